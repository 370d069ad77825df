#define _GNU_SOURCE
#include "CSpawn.h"
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <errno.h>
#include <sys/resource.h>

static int redirect(posix_spawn_file_actions_t *actions, int from, int to) {
    if (from < 0) return posix_spawn_file_actions_addopen(actions, to, "/dev/null", to == 0 ? O_RDONLY : O_WRONLY, 0);
    return posix_spawn_file_actions_adddup2(actions, from, to);
}

int hydra_test_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[],
                     const char *directory, int stdin_fd, int stdout_fd, int stderr_fd) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    int status = posix_spawn_file_actions_init(&actions);
    if (status != 0) return status;
    status = posix_spawnattr_init(&attributes);
    if (status != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return status;
    }
    if (status == 0) status = redirect(&actions, stdin_fd, 0);
    if (status == 0) status = redirect(&actions, stdout_fd, 1);
    if (status == 0) status = redirect(&actions, stderr_fd, 2);
    if (status == 0) status = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    if (status == 0 && directory != NULL) status = posix_spawn_file_actions_addchdir_np(&actions, directory);

    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGHUP);
    if (status == 0) status = posix_spawnattr_setsigmask(&attributes, &none);
    if (status == 0) status = posix_spawnattr_setsigdefault(&attributes, &defaults);
    if (status == 0) status = posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (status == 0) status = posix_spawn(pid, path, &actions, &attributes, argv, envp);

    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    return status;
}

int hydra_test_limit_file_size(pid_t pid, unsigned long long bytes) {
    struct rlimit current;
    if (prlimit(pid, RLIMIT_FSIZE, NULL, &current) != 0) return errno;
    struct rlimit lowered = current;
    lowered.rlim_cur = (rlim_t)bytes < current.rlim_max ? (rlim_t)bytes : current.rlim_max;
    if (prlimit(pid, RLIMIT_FSIZE, &lowered, NULL) != 0) return errno;
    return 0;
}
