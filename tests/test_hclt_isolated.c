/* pc_hclt_load_isolated: the same model as the in-process loader, bounded failures whatever
 * the caller's signal settings or threads, and a receiver that trusts nothing the reader
 * program sends (answers forged here byte by byte). */
#define _GNU_SOURCE /* memfd_create */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "hclt_random.h"
#include "pc/hclt.h"

#include "model/hclt_wire.h"

static char *tmpdir;

static const char *path_of(const char *name) { return pc_hr_path(tmpdir, name); }

/* A sample from the committed corpus that makes libhdf5 loop, and one it crashes on. */
static char hang_file[4096], crash_file[4096];

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void expect_same(const pc_hclt *a, const pc_hclt *b) {
    assert_int_equal(a->num_vars, b->num_vars);
    assert_int_equal(a->num_cats, b->num_cats);
    assert_int_equal(a->num_latents, b->num_latents);
    assert_int_equal(a->num_trans, b->num_trans);
    const size_t V = (size_t)a->num_vars, K = (size_t)a->num_latents;
    assert_memory_equal(a->parent, b->parent, V * 4);
    assert_memory_equal(a->trans_index, b->trans_index, V * 4);
    assert_memory_equal(a->root_logw, b->root_logw, K * 8);
    assert_memory_equal(a->trans_logw, b->trans_logw, (size_t)a->num_trans * K * K * 8);
    assert_memory_equal(a->input_logp, b->input_logp, V * K * (size_t)a->num_cats * 8);
}

static void test_same_model_as_in_process(void **state) {
    (void)state;
    for (int rep = 0; rep < 4; rep++) {
        pc_hclt *m = pc_hr_model((int32_t)pc_hr_int(1, 80), (int32_t)pc_hr_int(2, 9),
                                 (int32_t)pc_hr_int(1, 7), pc_hr_unit(), 1);
        assert_int_equal(pc_hclt_save(m, path_of("m.h5"), rep % 2 ? PC_HCLT_F32 : PC_HCLT_F64),
                         PC_OK);
        pc_hclt *a = NULL, *b = NULL;
        if (pc_hclt_load(path_of("m.h5"), &a) != PC_OK) fail_msg("%s", pc_last_error());
        if (pc_hclt_load_isolated(path_of("m.h5"), NULL, &b) != PC_OK)
            fail_msg("%s", pc_last_error());
        expect_same(a, b);
        pc_hclt_free(a);
        pc_hclt_free(b);
        pc_hclt_free(m);
    }
    /* A caller's lower limit (512 bytes would be needed). */
    pc_hclt *m = pc_hr_model(6, 3, 2, 0.0, 0);
    assert_int_equal(pc_hclt_save(m, path_of("m.h5"), PC_HCLT_F64), PC_OK);
    pc_hclt *back = NULL;
    const pc_hclt_load_opts small = {100, 0};
    assert_int_equal(pc_hclt_load_isolated(path_of("m.h5"), &small, &back), PC_ERR_FORMAT);
    assert_null(back);
    assert_non_null(
        strstr(pc_last_error(), "need 512 bytes of memory; at most 100 bytes are accepted"));
    pc_hclt_free(m);
}

static void test_file_and_reader_errors(void **state) {
    (void)state;
    pc_hclt *m = (pc_hclt *)&m;
    assert_int_equal(pc_hclt_load_isolated(path_of("none.h5"), NULL, &m), PC_ERR_IO);
    assert_null(m);
    assert_non_null(strstr(pc_last_error(), "No such file"));
    /* A FIFO would block the reader's open: refused at once. */
    assert_int_equal(mkfifo(path_of("fifo.h5"), 0600), 0);
    const double t0 = now_seconds();
    assert_int_equal(pc_hclt_load_isolated(path_of("fifo.h5"), NULL, &m), PC_ERR_IO);
    assert_true(now_seconds() - t0 < 1.0);
    assert_non_null(strstr(pc_last_error(), "not a regular file"));
    remove(path_of("fifo.h5"));
    /* No reader program where it is looked for: a clear error, no fallback in process. */
    pc_hclt *good = pc_hr_model(4, 2, 2, 0.3, 0);
    assert_int_equal(pc_hclt_save(good, path_of("m.h5"), PC_HCLT_F32), PC_OK);
    pc_hclt_free(good);
    setenv("PCINFER_LIBEXECDIR", path_of("nowhere"), 1);
    assert_int_equal(pc_hclt_load_isolated(path_of("m.h5"), NULL, &m), PC_ERR_UNSUPPORTED);
    assert_non_null(strstr(pc_last_error(), "pcinfer-hclt-reader is missing"));
    unsetenv("PCINFER_LIBEXECDIR");
    assert_int_equal(pc_hclt_load_isolated(NULL, NULL, &m), PC_ERR_ARG);
    assert_int_equal(pc_hclt_load_isolated(path_of("m.h5"), NULL, NULL), PC_ERR_ARG);
}

/* A caller that ignores SIGCHLD (children reaped by the kernel) and SIGXCPU (the reader's CPU
 * limit must still stop it) gets the same bounded answers. */
static void test_caller_signal_settings(void **state) {
    (void)state;
    struct sigaction ign = {0}, old_chld, old_xcpu;
    ign.sa_handler = SIG_IGN;
    sigaction(SIGCHLD, &ign, &old_chld);
    sigaction(SIGXCPU, &ign, &old_xcpu);
    const pc_hclt_load_opts opts = {0, 1.0};
    pc_hclt *m = NULL;
    double t0 = now_seconds();
    assert_int_equal(pc_hclt_load_isolated(hang_file, &opts, &m), PC_ERR_FORMAT);
    assert_true(now_seconds() - t0 < 10.0);
    assert_non_null(strstr(pc_last_error(), "not a valid model file"));
    assert_int_equal(pc_hclt_load_isolated(crash_file, &opts, &m), PC_ERR_FORMAT);
    assert_non_null(strstr(pc_last_error(), "not a valid model file"));
    assert_int_equal(pc_hclt_load_isolated(path_of("m.h5"), &opts, &m), PC_OK);
    pc_hclt_free(m);
    sigaction(SIGCHLD, &old_chld, NULL);
    sigaction(SIGXCPU, &old_xcpu, NULL);
}

typedef struct job {
    const char *path;
    pc_status want, got;
    char message[1024];
} job;

static void *load_job(void *arg) {
    job *j = arg;
    const pc_hclt_load_opts opts = {0, 1.0};
    for (int rep = 0; rep < 3 && j->got == j->want; rep++) {
        pc_hclt *m = NULL;
        j->got = pc_hclt_load_isolated(j->path, &opts, &m);
        snprintf(j->message, sizeof j->message, "%s", pc_last_error());
        pc_hclt_free(m);
    }
    return NULL;
}

/* Threads loading at once: each gets its own answer and message. */
static void test_threads(void **state) {
    (void)state;
    job jobs[4] = {{path_of("m.h5"), PC_OK, PC_OK, ""},
                   {crash_file, PC_ERR_FORMAT, PC_ERR_FORMAT, ""},
                   {path_of("m.h5"), PC_OK, PC_OK, ""},
                   {hang_file, PC_ERR_FORMAT, PC_ERR_FORMAT, ""}};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, load_job, &jobs[i]), 0);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++) {
        if (jobs[i].got != jobs[i].want)
            fail_msg("%s: status %d: %s", jobs[i].path, jobs[i].got, jobs[i].message);
        if (jobs[i].want != PC_OK && !strstr(jobs[i].message, jobs[i].path))
            fail_msg("%s: the message names another file: %s", jobs[i].path, jobs[i].message);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Forged answers: the receiver checks what the reader sends.                                */

static int answer_fd;

static void put(const void *bytes, size_t n) {
    assert_int_equal(write(answer_fd, bytes, n), (ssize_t)n);
}
static void put_u32(uint32_t v) { put(&v, 4); }
static void put_sizes(int32_t V, int32_t C, int32_t K, int32_t T) {
    const int32_t s[4] = {V, C, K, T};
    put_u32('S');
    put(s, sizeof s);
}

/* Receives what has been put, from the start; returns the status and how it ended. */
static pc_status receive(pc_wire_end *end, pc_hclt **m) {
    lseek(answer_fd, 0, SEEK_SET);
    const pc_wire_limits lim = {PC_HCLT_MAX_BYTES, 1.0};
    int sizes_seen = 0;
    pc_status st = pc_wire_receive(answer_fd, &lim, "x.h5", m, end, &sizes_seen);
    assert_int_equal(ftruncate(answer_fd, 0), 0);
    lseek(answer_fd, 0, SEEK_SET);
    return st;
}

static void test_forged_answers(void **state) {
    (void)state;
    answer_fd = memfd_create("answer", 0);
    assert_true(answer_fd >= 0);
    pc_wire_end end;
    pc_hclt *m = NULL;

    /* A real answer round-trips. */
    pc_hclt *good = pc_hr_model(5, 3, 2, 0.3, 0);
    assert_int_equal(pc_wire_send_sizes(answer_fd, 5, 3, 2, good->num_trans), PC_OK);
    assert_int_equal(pc_wire_send_model(answer_fd, good), PC_OK);
    assert_int_equal(receive(&end, &m), PC_OK);
    assert_int_equal(end, PC_WIRE_MODEL);
    expect_same(good, m);
    pc_hclt_free(m);

    /* The same with one byte more: garbled. */
    assert_int_equal(pc_wire_send_sizes(answer_fd, 5, 3, 2, good->num_trans), PC_OK);
    assert_int_equal(pc_wire_send_model(answer_fd, good), PC_OK);
    put("!", 1);
    assert_int_equal(receive(&end, &m), PC_ERR_FORMAT);
    assert_int_equal(end, PC_WIRE_BAD);
    assert_null(m);
    assert_non_null(strstr(pc_last_error(), "garbled"));

    /* Sizes above the limit are refused before anything is allocated. */
    put_sizes(1 << 20, 1 << 30, 1 << 14, 0);
    put_u32('D');
    assert_int_equal(receive(&end, &m), PC_ERR_FORMAT);
    assert_int_equal(end, PC_WIRE_BAD);
    assert_non_null(strstr(pc_last_error(), "more than 2^63 bytes"));
    put_sizes(0, 3, 2, 0);
    assert_int_equal(receive(&end, &m), PC_ERR_FORMAT);
    assert_int_equal(end, PC_WIRE_BAD);

    /* An answer cut short: the reader died. */
    put_sizes(5, 3, 2, good->num_trans);
    put_u32('D');
    put(good->parent, 12);
    assert_int_equal(receive(&end, &m), PC_ERR_FORMAT);
    assert_int_equal(end, PC_WIRE_EOF);
    assert_null(m);

    /* Error records: the status is kept when it is one, the text made printable. */
    const char text[] = "x.h5: bad\x1b[2J";
    put_u32('E');
    const int32_t code = PC_ERR_MODEL;
    put(&code, 4);
    put_u32(sizeof text - 1);
    put(text, sizeof text - 1);
    assert_int_equal(receive(&end, &m), PC_ERR_MODEL);
    assert_int_equal(end, PC_WIRE_ERROR);
    assert_string_equal(pc_last_error(), "x.h5: bad?[2J");
    put_u32('E');
    const int32_t odd = 12345;
    put(&odd, 4);
    put_u32(5000);
    assert_int_equal(receive(&end, &m), PC_ERR_FORMAT);
    assert_int_equal(end, PC_WIRE_BAD);
    put_u32(0xdeadbeef);
    assert_int_equal(receive(&end, &m), PC_ERR_FORMAT);
    assert_int_equal(end, PC_WIRE_BAD);
    pc_hclt_free(good);
    close(answer_fd);
}

static int setup(void **state) {
    (void)state;
    tmpdir = pc_hr_tempdir();
    const char *src = getenv("PC_SOURCE_DIR");
    snprintf(hang_file, sizeof hang_file, "%s/tests/data/badinput/%s", src ? src : ".",
             "hclt-timeout-91c0fc10c8dc8bb9af321288b847c702dae2904f");
    snprintf(crash_file, sizeof crash_file, "%s/tests/data/badinput/%s", src ? src : ".",
             "hclt-crash-a2f0deb8047cabdf3782f67eea64970f1f9472d3");
    return access(hang_file, R_OK) == 0 && access(crash_file, R_OK) == 0 ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    pc_hr_rmdir(tmpdir);
    return 0;
}

int main(void) {
    pc_hr_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_model_as_in_process),
        cmocka_unit_test(test_file_and_reader_errors),
        cmocka_unit_test(test_caller_signal_settings),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_forged_answers),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
