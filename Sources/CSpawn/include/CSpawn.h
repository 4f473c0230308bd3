#ifndef TIDINGS_CSPAWN_H
#define TIDINGS_CSPAWN_H

#include <spawn.h>
#include <sys/types.h>

// The GNU parts of posix_spawn, pipe2 and pidfd_open that Swift's Glibc module does not show (glibc
// declares them only with _GNU_SOURCE). ProcessRunner needs glibc 2.34 or later.

/// POSIX_SPAWN_SETSID: the child calls setsid() (it leads a new session and process group).
short tidings_spawn_setsid_flag(void);

/// posix_spawn_file_actions_addclosefrom_np: close every descriptor from `from` up in the child.
int tidings_spawn_addclosefrom(posix_spawn_file_actions_t *actions, int from);

/// posix_spawn_file_actions_addchdir_np: change the child's working directory.
int tidings_spawn_addchdir(posix_spawn_file_actions_t *actions, const char *path);

/// pipe2(2): a pipe with O_CLOEXEC / O_NONBLOCK set atomically.
int tidings_pipe2(int fds[2], int flags);

/// pidfd_open(2) (Linux 5.3): a descriptor that polls readable once `pid` has exited.
/// -1 with errno set when the kernel (or a seccomp filter) refuses it.
int tidings_pidfd_open(pid_t pid);

#endif
