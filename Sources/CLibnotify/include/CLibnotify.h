// libnotify (the desktop sink) and GLib/GIO (its D-Bus, and the system-bus watcher's), loaded
// at first use: the binary does not link them (no DT_NEEDED), so a command that neither runs
// the daemon nor notifies the desktop never maps them. Their headers (links to libnotify-dev's,
// libglib2.0-dev's and libgdk-pixbuf-2.0-dev's) give the types and constants; the functions are
// called through the tidings_ wrappers below, valid once the matching load has returned NULL.
#pragma once
#include <libnotify/notify.h>
#include <glib.h>
#include <glib-object.h>
#include <gio/gio.h>

/// Loads GIO (with GObject and GLib), once per process: NULL, or why not (the soname and the
/// Debian package to install). Enough for the tidings_g_ wrappers. Thread-safe.
const char *tidings_gio_load(void);
/// Loads libnotify.so.4 and GIO, once per process: NULL, or why not. Enough for every wrapper.
const char *tidings_notify_load(void);

// GLib, GObject and GIO.
GDBusConnection *tidings_g_bus_get_sync(GBusType bus_type, GCancellable *cancellable, GError **error);
GVariant *tidings_g_dbus_connection_call_sync(GDBusConnection *connection, const gchar *bus_name,
                                              const gchar *object_path, const gchar *interface_name,
                                              const gchar *method_name, GVariant *parameters,
                                              const GVariantType *reply_type, GDBusCallFlags flags, gint timeout_msec,
                                              GCancellable *cancellable, GError **error);
void tidings_g_dbus_connection_set_exit_on_close(GDBusConnection *connection, gboolean exit_on_close);
guint tidings_g_dbus_connection_signal_subscribe(GDBusConnection *connection, const gchar *sender,
                                                 const gchar *interface_name, const gchar *member,
                                                 const gchar *object_path, const gchar *arg0, GDBusSignalFlags flags,
                                                 GDBusSignalCallback callback, gpointer user_data,
                                                 GDestroyNotify user_data_free_func);
gboolean tidings_g_dbus_connection_is_closed(GDBusConnection *connection);
void tidings_g_error_free(GError *error);
void tidings_g_free(gpointer mem);
void tidings_g_list_free_full(GList *list, GDestroyNotify free_func);
gboolean tidings_g_main_context_iteration(GMainContext *context, gboolean may_block);
GMainContext *tidings_g_main_context_new(void);
void tidings_g_main_context_push_thread_default(GMainContext *context);
void tidings_g_main_context_wakeup(GMainContext *context);
void tidings_g_object_unref(gpointer object);
gulong tidings_g_signal_connect_data(gpointer instance, const gchar *detailed_signal, GCallback c_handler,
                                     gpointer data, GClosureNotify destroy_data, GConnectFlags connect_flags);
gboolean tidings_g_spawn_async(const gchar *working_directory, gchar **argv, gchar **envp, GSpawnFlags flags,
                               GSpawnChildSetupFunc child_setup, gpointer user_data, GPid *child_pid, GError **error);
gboolean tidings_g_variant_get_boolean(GVariant *value);
GVariant *tidings_g_variant_get_child_value(GVariant *value, gsize index_);
const gchar *tidings_g_variant_get_string(GVariant *value, gsize *length);
const gchar *tidings_g_variant_get_type_string(GVariant *value);
guint32 tidings_g_variant_get_uint32(GVariant *value);
GVariant *tidings_g_variant_lookup_value(GVariant *dictionary, const gchar *key, const GVariantType *expected_type);
GVariant *tidings_g_variant_new_string(const gchar *string);
GVariant *tidings_g_variant_new_tuple(GVariant *const *children, gsize n_children);
void tidings_g_variant_unref(GVariant *value);

// libnotify.
GList *tidings_notify_get_server_caps(void);
gboolean tidings_notify_init(const char *app_name);
gboolean tidings_notify_is_initted(void);
void tidings_notify_uninit(void);
NotifyNotification *tidings_notify_notification_new(const char *summary, const char *body, const char *icon);
void tidings_notify_notification_add_action(NotifyNotification *notification, const char *action, const char *label,
                                            NotifyActionCallback callback, gpointer user_data, GFreeFunc free_func);
void tidings_notify_notification_set_app_name(NotifyNotification *notification, const char *app_name);
void tidings_notify_notification_set_category(NotifyNotification *notification, const char *category);
void tidings_notify_notification_set_hint(NotifyNotification *notification, const char *key, GVariant *value);
void tidings_notify_notification_set_timeout(NotifyNotification *notification, gint timeout);
void tidings_notify_notification_set_urgency(NotifyNotification *notification, NotifyUrgency urgency);
gboolean tidings_notify_notification_show(NotifyNotification *notification, GError **error);
