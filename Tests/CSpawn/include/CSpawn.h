#ifndef CSPAWN_H
#define CSPAWN_H
#include <sys/types.h>

/// Starts `path` with `argv` and `envp` (NULL-terminated) through posix_spawn,
/// for the tests' child processes. Foundation's `Process.run()` on this
/// toolchain over-reads `/proc/self/fd` entries (swift-corelibs-foundation
/// #5472) and crashes a test run now and then; this takes its place.
///
/// The child gets `stdin_fd`, `stdout_fd` and `stderr_fd` as 0, 1 and 2
/// (-1: /dev/null), every other descriptor closed (so no child holds a pipe
/// meant for another and keeps its reader from seeing EOF), an empty signal
/// mask and default dispositions for the signals tests send, and `directory`
/// as its working directory unless NULL. Returns 0 and sets `*pid`, or an
/// errno value.
int hydra_test_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[],
                     const char *directory, int stdin_fd, int stdout_fd, int stderr_fd);

/// Sets the soft file-size limit (RLIMIT_FSIZE) of the running process `pid`
/// to `bytes` (at most its hard limit; ~0 for no limit), as `prlimit --fsize`
/// does: Swift's Glibc module does not declare `prlimit`. Returns 0 or an
/// errno value.
int hydra_test_limit_file_size(pid_t pid, unsigned long long bytes);

#endif
