#define _GNU_SOURCE  // dl_iterate_phdr
#include "CDynamicLoad.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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

struct advise_request {
    int advice;
    const uintptr_t *clean;
    size_t count;
    uintptr_t page;
    size_t advised;
};

static int has_text_relocations(struct dl_phdr_info *info) {
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
        const ElfW(Dyn) *d = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        for (; d->d_tag != DT_NULL; d++) {
            if (d->d_tag == DT_TEXTREL) return 1;
            if (d->d_tag == DT_FLAGS && (d->d_un.d_val & DF_TEXTREL)) return 1;
        }
    }
    return 0;
}

static int advise_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct advise_request *r = data;
    // The vDSO has no file behind it (smaps names it [vdso], never a clean range): skipped there.
    if (has_text_relocations(info)) return 0;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W) || ph->p_memsz == 0) continue;
        uintptr_t start = (info->dlpi_addr + ph->p_vaddr) & ~(r->page - 1);
        uintptr_t end = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + r->page - 1) & ~(r->page - 1);
        for (size_t k = 0; k + 1 < 2 * r->count; k += 2) {
            uintptr_t lo = r->clean[k] > start ? r->clean[k] : start;
            uintptr_t hi = r->clean[k + 1] < end ? r->clean[k + 1] : end;
            if (lo >= hi) continue;
            if (madvise((void *)lo, hi - lo, r->advice) == 0) r->advised += hi - lo;
        }
    }
    return 0;
}

size_t tidings_dl_advise_read_only(int advice, const uintptr_t *clean, size_t count) {
    struct advise_request r = {advice, clean, count, (uintptr_t)sysconf(_SC_PAGESIZE), 0};
    dl_iterate_phdr(advise_object, &r);
    return r.advised;
}
