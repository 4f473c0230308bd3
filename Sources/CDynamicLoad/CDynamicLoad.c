#define _GNU_SOURCE  // dl_iterate_phdr
#include "CDynamicLoad.h"

#include <dlfcn.h>
#include <fcntl.h>
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

// The executable's read-only sections that its link put in a writable segment (GNU ld puts
// .eh_frame, .eh_frame_hdr, Swift's metadata sections and .gcc_except_table in the RW PT_LOAD
// with .data): a page that holds only such sections, and that /proc/self/pagemap shows present
// and still the file's page (not copied on write), is advised. Nothing writes those sections
// at run time (the loader's relocations, done before main, would have copied the page, which
// the pagemap check then skips), so no write can land between the check and the advice.
static int advise_executable_sections(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct advise_request *r = data;
    int exe = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    int pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    ElfW(Ehdr) eh;
    if (exe < 0 || pagemap < 0 || pread(exe, &eh, sizeof eh, 0) != (ssize_t)sizeof eh ||
        eh.e_shentsize != sizeof(ElfW(Shdr)) || eh.e_shnum == 0 || eh.e_shnum > 4096) {
        if (exe >= 0) close(exe);
        if (pagemap >= 0) close(pagemap);
        return 1;  // the executable is the first object: stop there
    }
    size_t bytes = (size_t)eh.e_shnum * sizeof(ElfW(Shdr));
    ElfW(Shdr) *sh = malloc(bytes);
    if (sh != NULL && pread(exe, sh, bytes, (off_t)eh.e_shoff) == (ssize_t)bytes) {
        for (ElfW(Half) s = 0; s < eh.e_shnum; s++) {
            if (!(sh[s].sh_flags & SHF_ALLOC) || (sh[s].sh_flags & (SHF_WRITE | SHF_EXECINSTR)) ||
                sh[s].sh_type == SHT_NOBITS || sh[s].sh_size == 0)
                continue;
            uintptr_t lo = sh[s].sh_addr, hi = sh[s].sh_addr + sh[s].sh_size;
            // Only inside a writable PT_LOAD (the read-only ones are advised whole above).
            int inside = 0;
            for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
                const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
                if (ph->p_type == PT_LOAD && (ph->p_flags & PF_W) && lo >= ph->p_vaddr && hi <= ph->p_vaddr + ph->p_memsz)
                    inside = 1;
            }
            if (!inside) continue;
            // Whole pages only, and none that another (writable) section shares.
            uintptr_t first = (lo + r->page - 1) & ~(r->page - 1), last = hi & ~(r->page - 1);
            for (ElfW(Half) o = 0; o < eh.e_shnum; o++) {
                if (!(sh[o].sh_flags & SHF_ALLOC) || !(sh[o].sh_flags & SHF_WRITE) || sh[o].sh_size == 0) continue;
                uintptr_t olo = sh[o].sh_addr & ~(r->page - 1), ohi = (sh[o].sh_addr + sh[o].sh_size + r->page - 1) & ~(r->page - 1);
                if (olo < last && ohi > first) {
                    if (olo <= first) first = ohi > first ? ohi : first;
                    else last = olo;
                }
            }
            for (uintptr_t page = first; page < last; page += r->page) {
                uintptr_t at = info->dlpi_addr + page;
                uint64_t entry = 0;
                if (pread(pagemap, &entry, sizeof entry, (off_t)(at / r->page * sizeof entry)) != (ssize_t)sizeof entry) break;
                // Bit 63: present; bit 61: a file page (a private copy is anonymous).
                if (!(entry >> 63 & 1) || !(entry >> 61 & 1)) continue;
                if (madvise((void *)at, r->page, r->advice) == 0) r->advised += r->page;
            }
        }
    }
    free(sh);
    close(exe);
    close(pagemap);
    return 1;
}

size_t tidings_dl_advise_executable_read_only_sections(int advice) {
    struct advise_request r = {advice, NULL, 0, (uintptr_t)sysconf(_SC_PAGESIZE), 0};
    dl_iterate_phdr(advise_executable_sections, &r);
    return r.advised;
}
