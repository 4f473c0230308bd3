// Loading a C library at first use (DESIGN §15, docs/development.md "C libraries"): the
// libraries only some runs need (libxml2, libnotify and GLib) are not linked; their module
// (CLibXML2, CLibnotify) opens them with this and calls through the pointers it resolves.
#pragma once
#include <stddef.h>
#include <stdint.h>

/// Opens `soname` and resolves each of `names` into `slots` (the library stays loaded for the
/// process's life). Returns 0, or -1 with a message in `error` that names the library, the
/// missing symbol if any, and the Debian package that provides it.
int tidings_dl_load(const char *soname, const char *package, const char *const *names, void **slots, size_t count,
                    char *error, size_t size);

/// Called through a slot that was never resolved (a wrapper used before its library's load
/// succeeded): a bug in tidings. Says which function on stderr and aborts, rather than jumping to 0.
__attribute__((noreturn)) void *tidings_dl_unloaded(const char *function);

// For a loader's .c file, given LIST, an X-macro of the library's function names
// (`#define LIST(X) X(f) X(g)`): TIDINGS_DL_TABLE(LIST) declares their slot indices
// (slot_f, and slot_count), their names and their slots; CALL(f) is f's slot as f's declared
// type (aborting if it was never resolved); TIDINGS_DL_SAME_TYPE(f) checks that tidings_f has
// exactly f's type.
#define TIDINGS_DL_SLOT(f) slot_##f,
#define TIDINGS_DL_NAME(f) #f,
#define TIDINGS_DL_TABLE(LIST)                          \
    enum { LIST(TIDINGS_DL_SLOT) slot_count };          \
    static const char *const names[] = {LIST(TIDINGS_DL_NAME)}; \
    static void *slots[slot_count];
#define CALL(f) ((__typeof__(f) *)(slots[slot_##f] ? slots[slot_##f] : tidings_dl_unloaded(#f)))
#define TIDINGS_DL_SAME_TYPE(f) \
    _Static_assert(__builtin_types_compatible_p(__typeof__(tidings_##f), __typeof__(f)), #f);

/// madvise(`advice`) over the pages of each loaded object's (the executable's, ld.so's, every
/// library's) read-only `PT_LOAD` segments (code, read-only data) that lie inside one of the
/// `count` ranges `clean` (start, end pairs: what the caller read from /proc/self/smaps as clean
/// private file pages). It runs inside `dl_iterate_phdr`, which holds the loader's lock: no
/// dlopen or dlclose maps or unmaps an object meanwhile, so every address advised is still
/// that object's file mapping. Objects with text relocations (their code is written at load)
/// are left alone. Returns the bytes advised (a failed madvise is skipped).
size_t tidings_dl_advise_read_only(int advice, const uintptr_t *clean, size_t count);

/// madvise(`advice`) over the executable's pages that hold only sections without write
/// permission but sit in a writable segment (GNU ld's layout: `.eh_frame`, Swift metadata…),
/// page by page where /proc/self/pagemap shows the page present and still the file's (never one
/// copied on write). Returns the bytes advised.
size_t tidings_dl_advise_executable_read_only_sections(int advice);
