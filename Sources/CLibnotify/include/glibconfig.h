// GLib's configuration header lives in the architecture's library directory (glib-2.0's
// pkg-config cflags name it); the other GLib headers are links to /usr/include (libglib2.0-dev).
#pragma once
#if defined(__x86_64__)
#include "/usr/lib/x86_64-linux-gnu/glib-2.0/include/glibconfig.h"
#elif defined(__aarch64__)
#include "/usr/lib/aarch64-linux-gnu/glib-2.0/include/glibconfig.h"
#else
#error "glibconfig.h: add this architecture's Debian multiarch directory"
#endif
