#include "CDynamicLoad.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int tidings_dl_load(const char *soname, const char *package, const char *const *names, void **slots, size_t count,
                    char *error, size_t size) {
    // RTLD_LOCAL: its symbols serve only the pointers resolved here (and its own dependencies).
    void *handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *why = dlerror();
        snprintf(error, size, "%s could not be loaded (%s): install the Debian package %s", soname,
                 why ? why : "not found", package);
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        dlerror();
        slots[i] = dlsym(handle, names[i]);
        if (slots[i] == NULL) {
            snprintf(error, size, "%s has no function %s (too old?): install a current Debian package %s", soname,
                     names[i], package);
            return -1;
        }
    }
    return 0;
}

void *tidings_dl_unloaded(const char *function) {
    fprintf(stderr, "tidings: %s called before its library was loaded (a bug: please report it)\n", function);
    abort();
}
