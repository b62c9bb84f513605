/* The pcinfer program of the build, run by the CLI tests (test_pcinfer*.c): its path from
 * PC_BINARY_DIR (set by ctest), a temporary folder for the files of a run, and checks of what
 * a run left there. Failures fail the calling cmocka test. */
#ifndef PC_TEST_PCINFER_CLI_H
#define PC_TEST_PCINFER_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "pc/circuit.h"
#include "pc/eval.h"
#include "pc/hclt.h"

/* Finds the program and makes the folder; returns 0 (the program may be absent: then
 * pc_cli_program() is "" and PC_CLI_REQUIRE() skips). pc_cli_stop removes the folder. */
int pc_cli_start(void);
void pc_cli_stop(void);

const char *pc_cli_program(void);
/* "folder/name" (pc_hr_path's buffers: a few paths may be held at once). */
const char *pc_cli_path(const char *name);

/* Runs pcinfer with the arguments (NULL-terminated), stdout and stderr into stdout.txt and
 * stderr.txt of the folder. Returns the exit status; a death by a signal fails the test. */
int pc_cli_run(const char *arg0, ...);
/* The same with an argument array (args NULL-terminated, without the program). */
int pc_cli_runv(const char *const *args);

/* The file of the folder contains frag (else the test fails, showing the file). */
void pc_cli_expect_in(const char *name, const char *frag);
/* Neither the file nor a temporary file beside it (a name starting with name's) exists. */
void pc_cli_expect_absent(const char *name);

/* Writes an IDX image file of count images of rows x cols, plain or gzip. */
void pc_cli_write_idx(const char *path, const uint8_t *values, uint32_t count, uint32_t rows,
                      uint32_t cols, int gz);

/* Writes a uint8 .npy file of shape [count, width] (the header written here, not by the tool's
 * code). */
void pc_cli_write_npy(const char *path, const uint8_t *values, int64_t count, int64_t width);

/* The array of a .npy file the program wrote, checked byte for byte: the magic, version 1.0,
 * the dict NumPy writes for descr and shape[0, ndim), spaces up to a multiple of 64 bytes and
 * a newline, then exactly `bytes` bytes, returned malloc'ed. */
void *pc_cli_read_npy(const char *path, const char *descr, const int64_t *shape, int ndim,
                      size_t bytes);

/* The payload of a uint8 IDX file (plain or gzip) of exactly the dimensions dims[0, ndim),
 * malloc'ed. */
uint8_t *pc_cli_read_idx(const char *path, const uint32_t *dims, int ndim);

/* An evaluator for the library's answers the program's are compared with (all cores). */
pc_evaluator *pc_cli_evaluator(const pc_circuit *c, pc_backend backend, int64_t max_batch);

/* A random model of side x side variables (C values, K latents, a latent shared with the parent
 * with probability `share`) saved as m.h5 in the folder, its circuit, and n random images of
 * it saved as d.idx (IDX [n, side, side]) and d.npy ([n, V]). */
typedef struct pc_cli_fixture {
    pc_hclt *model;
    pc_circuit *circuit;
    uint8_t *pixels; /* [n, V] */
} pc_cli_fixture;

void pc_cli_fixture_make(pc_cli_fixture *f, int side, int C, int K, double share, int n);
void pc_cli_fixture_free(pc_cli_fixture *f);

#define PC_CLI_REQUIRE()                \
    do {                                \
        if (!pc_cli_program()[0]) skip(); \
    } while (0)

#endif
