#define _GNU_SOURCE
#include "CSpawn.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

short tidings_spawn_setsid_flag(void) { return POSIX_SPAWN_SETSID; }

int tidings_spawn_addclosefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

int tidings_spawn_addchdir(posix_spawn_file_actions_t *actions, const char *path) {
    return posix_spawn_file_actions_addchdir_np(actions, path);
}

int tidings_pipe2(int fds[2], int flags) { return pipe2(fds, flags); }

int tidings_pidfd_open(pid_t pid) {
#ifdef SYS_pidfd_open
    // pidfd_open sets O_CLOEXEC itself.
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}
