// libnotify (freedesktop desktop notifications) and the GLib/GIO pieces the desktop sink uses.
#include <libnotify/notify.h>
#include <glib.h>
#include <glib-object.h>
#include <gio/gio.h>
