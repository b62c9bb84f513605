/* Runs a built program for the CLI tests: stdout and stderr to files, a wall-clock limit, and
 * the child's resource use (peak RSS) for the memory bounds the tests check. */
#ifndef PC_TEST_RUN_TOOL_H
#define PC_TEST_RUN_TOOL_H

#include <sys/resource.h>

/* Runs argv[0] with argv (NULL-terminated), its output in out_path and err_path. Kills it
 * after limit_s seconds. Returns the exit status, or -(signal number) when it died of one
 * (-9 after the limit). *ru (may be NULL) receives the child's usage, reader children it
 * waited for included. */
int pc_run_tool(const char *const *argv, const char *out_path, const char *err_path,
                double limit_s, struct rusage *ru);

/* The file's contents (at most 1 MiB), malloc'ed and NUL-terminated; NULL if unreadable. */
char *pc_slurp(const char *path);

#endif
