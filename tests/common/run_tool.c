/* Running programs for the CLI tests (run_tool.h). */
#define _DEFAULT_SOURCE /* wait4 */
#include "run_tool.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int pc_run_tool(const char *const *argv, const char *out_path, const char *err_path,
                double limit_s, struct rusage *ru) {
    pid_t pid = fork();
    if (pid < 0) return -1000;
    if (pid == 0) {
        int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out < 0 || err < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    struct timespec t0, now, tick = {0, 2000000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int status = 0;
    struct rusage local;
    for (;;) {
        pid_t got = wait4(pid, &status, WNOHANG, ru ? ru : &local);
        if (got == pid) break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double t = (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec);
        if (t > limit_s) {
            kill(pid, SIGKILL);
            wait4(pid, &status, 0, ru ? ru : &local);
            return -SIGKILL;
        }
        nanosleep(&tick, NULL);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

char *pc_slurp(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 20);
    if (!buf) abort();
    size_t got = fread(buf, 1, (1 << 20) - 1, f);
    buf[got] = '\0';
    fclose(f);
    return buf;
}
