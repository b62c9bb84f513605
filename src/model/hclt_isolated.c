/* pc_hclt_load_isolated: the model file is parsed by a separate program, the reader
 * (src/libexec/hclt_reader.c), under memory and CPU limits; its answer comes back over a pipe
 * and is validated here. Malformed files make libhdf5 1.10 crash, loop or allocate without
 * bound; in the reader that costs the reader, never the caller. docs/format.md says why it is
 * a spawned program rather than a fork.
 *
 * The reader is looked for, in order: in $PCINFER_LIBEXECDIR when it is set (only there); next
 * to the object that holds this code (the shared library, or a program linked with the static
 * one) in ../libexec/pcinfer and libexec/pcinfer, which covers installed trees and the build
 * tree; then in the install location compiled in (PC_LIBEXEC_DIR). */
#define _GNU_SOURCE /* dladdr, posix_spawn_file_actions_addclosefrom_np, pipe2 */
#include "pc/hclt.h"
#include "base/fail.h"
#include "model/hclt_internal.h"
#include "model/hclt_wire.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PC_READER_NAME "pcinfer-hclt-reader"

extern char **environ;

static int is_program(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, X_OK) == 0;
}

/* The folder of the file that holds this function's code. */
static int own_dir(char *dir, size_t len) {
    Dl_info info;
    char exe[PATH_MAX];
    const char *file = NULL;
    if (dladdr((void *)own_dir, &info) && info.dli_fname && strchr(info.dli_fname, '/'))
        file = info.dli_fname;
    if (!file) {
        /* The main program reports no path of its own: /proc knows it. */
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0) return 0;
        exe[n] = '\0';
        file = exe;
    }
    const char *slash = strrchr(file, '/');
    return snprintf(dir, len, "%.*s", (int)(slash - file), file) < (int)len;
}

static pc_status find_reader(char *path, size_t len) {
    const char *env = getenv("PCINFER_LIBEXECDIR");
    if (env && *env) {
        snprintf(path, len, "%s/" PC_READER_NAME, env);
        if (is_program(path)) return PC_OK;
        return pc_fail(PC_ERR_UNSUPPORTED, "the model reader %s is missing (PCINFER_LIBEXECDIR "
                                           "is set)", path);
    }
    char dir[PATH_MAX];
    if (own_dir(dir, sizeof dir)) {
        static const char *const rel[] = {"../libexec/pcinfer", "libexec/pcinfer"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            snprintf(path, len, "%s/%s/" PC_READER_NAME, dir, rel[i]);
            if (is_program(path)) return PC_OK;
        }
    }
#ifdef PC_LIBEXEC_DIR
    snprintf(path, len, "%s/" PC_READER_NAME, PC_LIBEXEC_DIR);
    if (is_program(path)) return PC_OK;
#endif
    return pc_fail(PC_ERR_UNSUPPORTED, "the model reader " PC_READER_NAME " is not installed "
                                       "(looked next to the library and in its libexec folder)");
}

/* The file must be a readable regular file: a FIFO or device would block or never end. */
static pc_status check_file(const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return pc_fail(PC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    int ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode);
    close(fd);
    if (!ok) return pc_fail(PC_ERR_IO, "%s: not a regular file", path);
    return PC_OK;
}

/* Starts the reader with its stdout on out_fd and stdin, stderr on /dev/null, every other
 * descriptor closed and every signal at its default (a caller that ignores SIGXCPU must not
 * turn the CPU limit off). */
static pc_status spawn_reader(const char *reader, char *const argv[], int out_fd, pid_t *pid) {
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
    posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
#endif
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    int err = posix_spawn(pid, reader, &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (err != 0)
        return pc_fail(PC_ERR_IO, "cannot start the model reader %s: %s", reader, strerror(err));
    return PC_OK;
}

/* Reaps the reader: at once when it is killed, else waiting up to `seconds` for it to end on
 * its own. Returns its wait status, or -1 when none can be had (SIGCHLD ignored). */
static int reap(pid_t pid, int kill_first, double seconds) {
    int status = 0;
    if (!kill_first) {
        const struct timespec tick = {0, 1000000};
        for (double waited = 0; waited < seconds; waited += 1e-3) {
            pid_t got = waitpid(pid, &status, WNOHANG);
            if (got == pid) return status;
            if (got < 0 && errno != EINTR) return -1;
            nanosleep(&tick, NULL);
        }
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return status;
}

/* The message for a reader that ended without an answer. */
static pc_status explain(const char *path, pc_wire_end end, int status, int data_stage,
                         double header_seconds) {
    const char *stage = data_stage ? "its data" : "its structure";
    int sig = status >= 0 && WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    if ((end == PC_WIRE_TIMEOUT || sig == SIGXCPU) && !data_stage)
        return pc_fail(PC_ERR_FORMAT, "%s: not a valid model file (reading its structure took "
                                      "more than %.3g s; libhdf5 loops on some malformed files)",
                       path, header_seconds);
    if (end == PC_WIRE_TIMEOUT || sig == SIGXCPU)
        return pc_fail(PC_ERR_FORMAT, "%s: not a valid model file (reading its data took longer "
                                      "than its size allows)", path);
    if (sig)
        return pc_fail(PC_ERR_FORMAT, "%s: not a valid model file (libhdf5 crashed reading %s: "
                                      "%s)", path, stage, strsignal(sig));
    if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) != 0)
        return pc_fail(PC_ERR_FORMAT, "%s: not a valid model file (the reader failed on %s, "
                                      "exit status %d)", path, stage, WEXITSTATUS(status));
    return pc_fail(PC_ERR_FORMAT, "%s: not a valid model file (the reader ended without an "
                                  "answer)", path);
}

pc_status pc_hclt_load_isolated(const char *path, const pc_hclt_load_opts *opts, pc_hclt **out) {
    if (!out) return pc_fail(PC_ERR_ARG, "pc_hclt_load_isolated: out is NULL");
    *out = NULL;
    if (!path) return pc_fail(PC_ERR_ARG, "pc_hclt_load_isolated: path is NULL");
    pc_wire_limits lim = {PC_HCLT_MAX_BYTES, PC_HCLT_HEADER_SECONDS};
    if (opts && opts->max_bytes > 0 && opts->max_bytes < lim.max_bytes)
        lim.max_bytes = opts->max_bytes;
    if (opts && opts->max_seconds > 0) lim.header_seconds = opts->max_seconds;
    char reader[PATH_MAX + 64];
    pc_status st = check_file(path);
    if (st == PC_OK) st = find_reader(reader, sizeof reader);
    if (st != PC_OK) return st;

    int pipe_fd[2];
    if (pipe2(pipe_fd, O_CLOEXEC) != 0)
        return pc_fail(PC_ERR_IO, "cannot make a pipe for the model reader: %s", strerror(errno));
    /* A larger pipe halves the context switches of a large model (best effort). */
    (void)fcntl(pipe_fd[0], F_SETPIPE_SZ, 1 << 20);
    char bytes_arg[32], seconds_arg[32];
    snprintf(bytes_arg, sizeof bytes_arg, "%lld", (long long)lim.max_bytes);
    snprintf(seconds_arg, sizeof seconds_arg, "%.9g", lim.header_seconds);
    char *const argv[] = {reader, bytes_arg, seconds_arg, (char *)path, NULL};
    pid_t pid;
    st = spawn_reader(reader, argv, pipe_fd[1], &pid);
    close(pipe_fd[1]);
    if (st != PC_OK) {
        close(pipe_fd[0]);
        return st;
    }
    pc_wire_end end;
    int data_stage = 0;
    pc_hclt *m = NULL;
    st = pc_wire_receive(pipe_fd[0], &lim, path, &m, &end, &data_stage);
    close(pipe_fd[0]);
    int answered = end == PC_WIRE_MODEL || end == PC_WIRE_ERROR || end == PC_WIRE_BAD;
    int status = reap(pid, answered || end == PC_WIRE_TIMEOUT, PC_WIRE_WALL_FACTOR);
    if (!answered) return explain(path, end, status, data_stage, lim.header_seconds);
    if (st == PC_OK && (st = pc_hclt_validate(m, path)) != PC_OK) pc_hclt_free(m);
    if (st == PC_OK) *out = m;
    return st;
}
