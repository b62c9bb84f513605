/* pc/file.h: output files complete or absent, never through a planted link, never over a
 * special file or an input, and nothing left after a failure, an abort or a killed process. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "hclt_random.h"
#include "pc/file.h"

static char *tmpdir;

static int setup(void **state) {
    (void)state;
    tmpdir = pc_hr_tempdir();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    pc_hr_rmdir(tmpdir);
    return 0;
}

static const char *path_of(const char *name) { return pc_hr_path(tmpdir, name); }

/* The folder's entries, sorted and joined by spaces ("" when empty). */
static const char *listing(void) {
    static char out[4096];
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | tr '\\n' ' '", tmpdir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    pclose(p);
    out[n] = '\0';
    return out;
}

static void clear_dir(void) {
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'/* '%s'/.[!.]*", tmpdir, tmpdir);
    assert_int_equal(system(cmd), 0);
}

static void put_text(const char *name, const char *text) {
    FILE *f = fopen(path_of(name), "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *get_text(const char *name) {
    static char buf[1 << 16];
    FILE *f = fopen(path_of(name), "r");
    if (!f) return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void test_write_commit_abort(void **state) {
    (void)state;
    pc_file_writer *w = NULL;
    /* More than the writer's buffer, in pieces of random sizes. */
    const size_t n = 200000;
    char *want = malloc(n + 1);
    assert_non_null(want);
    for (size_t i = 0; i < n; i++) want[i] = (char)('a' + pc_hr_int(0, 25));
    want[n] = '\0';
    assert_int_equal(pc_file_writer_open(path_of("out.txt"), NULL, 0, &w), PC_OK);
    for (size_t at = 0; at < n;) {
        size_t take = (size_t)pc_hr_int(0, 70000);
        if (take > n - at) take = n - at;
        assert_int_equal(pc_file_writer_write(w, want + at, take), PC_OK);
        at += take;
    }
    assert_string_equal(listing(), ""); /* nothing has a name before commit */
    assert_int_equal(pc_file_writer_commit(w), PC_OK);
    FILE *f = fopen(path_of("out.txt"), "r");
    assert_non_null(f);
    char *got = malloc(n + 1);
    assert_non_null(got);
    assert_int_equal(fread(got, 1, n + 1, f), n);
    fclose(f);
    assert_memory_equal(got, want, n);
    free(got);
    free(want);
    assert_string_equal(listing(), "out.txt ");
    /* The mode is the umask's, as for any new file. */
    mode_t mask = umask(022);
    umask(mask);
    struct stat sb;
    assert_int_equal(stat(path_of("out.txt"), &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0666 & ~mask);

    /* Replacing keeps the old file whole for whoever still holds it (a hard link here). */
    assert_int_equal(link(path_of("out.txt"), path_of("old.txt")), 0);
    assert_int_equal(pc_file_writer_open(path_of("out.txt"), NULL, 0, &w), PC_OK);
    assert_int_equal(pc_file_writer_printf(w, "%d %s\n", 42, "new"), PC_OK);
    assert_int_equal(pc_file_writer_commit(w), PC_OK);
    assert_string_equal(get_text("out.txt"), "42 new\n");
    assert_int_equal(stat(path_of("old.txt"), &sb), 0);
    assert_int_equal(sb.st_size, n);

    /* Abort leaves the target as it was and nothing else. */
    assert_int_equal(pc_file_writer_open(path_of("out.txt"), NULL, 0, &w), PC_OK);
    assert_int_equal(pc_file_writer_printf(w, "never\n"), PC_OK);
    pc_file_writer_abort(w);
    pc_file_writer_abort(NULL);
    assert_string_equal(get_text("out.txt"), "42 new\n");
    assert_string_equal(listing(), "old.txt out.txt ");
    clear_dir();
}

static void expect_refused(const char *path, const char *const *inputs, int n, const char *frag) {
    pc_file_writer *w = (pc_file_writer *)&w;
    pc_status st = pc_file_writer_open(path, inputs, n, &w);
    if (st != PC_ERR_IO || w != NULL || !strstr(pc_last_error(), path) ||
        !strstr(pc_last_error(), frag))
        fail_msg("%s: status %d, message '%s' (want '%s')", path, st, pc_last_error(), frag);
}

static void test_refused_targets(void **state) {
    (void)state;
    put_text("in.idx", "input data\n");
    const char *inputs[2] = {path_of("model.h5"), path_of("in.idx")};
    expect_refused(path_of("in.idx"), inputs, 2, "is an input of this run");
    /* The same file under another name: a hard link, or a path through a symbolic link. */
    assert_int_equal(link(path_of("in.idx"), path_of("hard.idx")), 0);
    expect_refused(path_of("hard.idx"), inputs, 2, "is an input of this run");
    assert_int_equal(mkdir(path_of("sub"), 0700), 0);
    assert_int_equal(symlink(tmpdir, path_of("sub/up")), 0);
    char via[4200];
    snprintf(via, sizeof via, "%s/sub/up/in.idx", tmpdir);
    expect_refused(via, inputs, 2, "is an input of this run");
    /* Special files: a rename would replace them. */
    assert_int_equal(symlink(path_of("in.idx"), path_of("link.txt")), 0);
    expect_refused(path_of("link.txt"), NULL, 0, "is a symbolic link, not a regular file");
    assert_int_equal(mkfifo(path_of("fifo"), 0600), 0);
    expect_refused(path_of("fifo"), NULL, 0, "is a FIFO, not a regular file");
    expect_refused(path_of("sub"), NULL, 0, "is a folder, not a regular file");
    expect_refused("/dev/null", NULL, 0, "is a device, not a regular file");
    expect_refused(path_of("no/such/dir/out.txt"), NULL, 0, "cannot open its folder");
    char folder[4200];
    snprintf(folder, sizeof folder, "%s/sub/", tmpdir);
    expect_refused(folder, NULL, 0, "names a folder, not a file");
    assert_string_equal(get_text("in.idx"), "input data\n");
    assert_string_equal(listing(), "fifo hard.idx in.idx link.txt sub ");

    /* A target turned into a special file while the writer was open is refused at commit. */
    pc_file_writer *w = NULL;
    assert_int_equal(pc_file_writer_open(path_of("late.txt"), NULL, 0, &w), PC_OK);
    assert_int_equal(mkfifo(path_of("late.txt"), 0600), 0);
    assert_int_equal(pc_file_writer_commit(w), PC_ERR_IO);
    assert_non_null(strstr(pc_last_error(), "is a FIFO"));
    struct stat sb;
    assert_int_equal(lstat(path_of("late.txt"), &sb), 0);
    assert_true(S_ISFIFO(sb.st_mode));
    clear_dir();
}

/* A link planted where an old writer put its temporary file ("<path>.tmp-<pid>") is never
 * followed: the file it points at stays as it was. */
static void test_planted_link_not_followed(void **state) {
    (void)state;
    put_text("victim", "precious\n");
    char planted[256];
    snprintf(planted, sizeof planted, "out.txt.tmp-%ld", (long)getpid());
    assert_int_equal(symlink(path_of("victim"), path_of(planted)), 0);
    pc_file_writer *w = NULL;
    assert_int_equal(pc_file_writer_open(path_of("out.txt"), NULL, 0, &w), PC_OK);
    assert_int_equal(pc_file_writer_printf(w, "result\n"), PC_OK);
    assert_int_equal(pc_file_writer_commit(w), PC_OK);
    assert_string_equal(get_text("victim"), "precious\n");
    assert_string_equal(get_text("out.txt"), "result\n");
    clear_dir();
}

/* A process killed while writing leaves no file behind (the temporary file has no name). */
static void test_killed_writer_leaves_nothing(void **state) {
    (void)state;
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        pc_file_writer *w = NULL;
        if (pc_file_writer_open(path_of("out.txt"), NULL, 0, &w) != PC_OK) _exit(3);
        static char block[1 << 20];
        for (int i = 0; i < 4; i++) pc_file_writer_write(w, block, sizeof block);
        if (write(ready[1], "x", 1) != 1) _exit(4);
        pause();
        _exit(5);
    }
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    kill(pid, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    close(ready[0]);
    close(ready[1]);
    assert_string_equal(listing(), "");
}

/* Writes over a file-size limit (SIGXFSZ ignored: writes fail with EFBIG, as on a full disk):
 * every later call reports the first failure, commit fails, nothing is left. */
static void test_write_errors_are_kept(void **state) {
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {100000, 100000};
        setrlimit(RLIMIT_FSIZE, &lim);
        pc_file_writer *w = NULL;
        if (pc_file_writer_open(path_of("big.txt"), NULL, 0, &w) != PC_OK) _exit(3);
        static char block[1 << 16];
        pc_status first = PC_OK;
        for (int i = 0; i < 8 && first == PC_OK; i++)
            first = pc_file_writer_write(w, block, sizeof block);
        if (first != PC_ERR_IO || !strstr(pc_last_error(), "File too large")) _exit(4);
        if (pc_file_writer_printf(w, "more\n") != PC_ERR_IO) _exit(5);
        if (pc_file_writer_commit(w) != PC_ERR_IO || !strstr(pc_last_error(), "File too large"))
            _exit(6);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_string_equal(listing(), "");
}

static void test_arguments(void **state) {
    (void)state;
    pc_file_writer *w = NULL;
    assert_int_equal(pc_file_writer_open(NULL, NULL, 0, &w), PC_ERR_ARG);
    assert_int_equal(pc_file_writer_open("", NULL, 0, &w), PC_ERR_ARG);
    assert_int_equal(pc_file_writer_open(path_of("x"), NULL, -1, &w), PC_ERR_ARG);
    assert_int_equal(pc_file_writer_open(path_of("x"), NULL, 1, &w), PC_ERR_ARG);
    assert_int_equal(pc_file_writer_open(path_of("x"), NULL, 0, NULL), PC_ERR_ARG);
    assert_int_equal(pc_file_writer_write(NULL, "x", 1), PC_ERR_ARG);
    assert_int_equal(pc_file_writer_commit(NULL), PC_ERR_ARG);
    assert_string_equal(listing(), "");
}

int main(void) {
    pc_hr_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_commit_abort),
        cmocka_unit_test(test_refused_targets),
        cmocka_unit_test(test_planted_link_not_followed),
        cmocka_unit_test(test_killed_writer_leaves_nothing),
        cmocka_unit_test(test_write_errors_are_kept),
        cmocka_unit_test(test_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
