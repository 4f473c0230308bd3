// Loading a C library at first use (DESIGN §15, docs/development.md "C libraries"): the
// libraries only some runs need (libxml2, libnotify and GLib) are not linked; their module
// (CLibXML2, CLibnotify) opens them with this and calls through the pointers it resolves.
#pragma once
#include <stddef.h>

/// Opens `soname` and resolves each of `names` into `slots` (the library stays loaded for the
/// process's life). Returns 0, or -1 with a message in `error` that names the library, the
/// missing symbol if any, and the Debian package that provides it.
int tidings_dl_load(const char *soname, const char *package, const char *const *names, void **slots, size_t count,
                    char *error, size_t size);

/// Called through a slot that was never resolved (a wrapper used before its library's load
/// succeeded): a bug in tidings. Says which function on stderr and aborts, rather than jumping to 0.
__attribute__((noreturn)) void *tidings_dl_unloaded(const char *function);
