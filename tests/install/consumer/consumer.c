/* A program built outside the source tree against an installed pcinfer: it sees only the
 * installed headers and library. It checks that the library is the version of the header it was
 * compiled with, then scores every row of a table "x_0 ... x_{V-1} log p(x)" (lines starting
 * with '#' skipped) with the FP64 backend `ref` and compares each score to the table's to 1e-12
 * nats. The backend touches no GPU, so this also runs where no CUDA library is installed.
 *
 * Usage: consumer MODEL.h5 TABLE.txt. Exit status 0 when everything matches, 1 otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pc/circuit.h"
#include "pc/eval.h"
#include "pc/hclt.h"
#include "pc/version.h"

enum { MAX_ROWS = 64, MAX_VARS = 16 };

typedef struct table {
    int64_t rows;
    uint8_t x[MAX_ROWS * MAX_VARS]; /* [rows, V] */
    double logp[MAX_ROWS];
} table;

/* Reads the table for V variables; 0 on success. */
static int read_table(const char *path, int32_t num_vars, table *t) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "consumer: cannot open %s\n", path);
        return 1;
    }
    char line[512];
    t->rows = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (t->rows == MAX_ROWS)
            break;
        char *p = line, *end = NULL;
        for (int32_t v = 0; v < num_vars; v++, p = end)
            t->x[t->rows * num_vars + v] = (uint8_t)strtol(p, &end, 10);
        t->logp[t->rows++] = strtod(p, &end);
        if (end == p)
            break;
    }
    fclose(f);
    if (t->rows == 0) {
        fprintf(stderr, "consumer: %s: no rows read\n", path);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: consumer MODEL.h5 TABLE.txt\n");
        return 1;
    }
    printf("pcinfer %s (header %s)\n", pc_version(), PC_VERSION_STRING);
    if (strcmp(pc_version(), PC_VERSION_STRING) != 0 || pc_version_number() != PC_VERSION_NUMBER) {
        fprintf(stderr, "consumer: library and header versions differ\n");
        return 1;
    }
    pc_hclt *model = NULL;
    pc_circuit *circuit = NULL;
    pc_evaluator *evaluator = NULL;
    static table t;
    double logp[MAX_ROWS];
    int failed = 1;
    pc_status st = pc_hclt_load(argv[1], &model);
    if (st == PC_OK && model->num_vars > MAX_VARS) {
        fprintf(stderr, "consumer: %s: more than %d variables\n", argv[1], MAX_VARS);
        goto done;
    }
    if (st == PC_OK)
        st = pc_circuit_compile(model, &circuit);
    const pc_eval_opts opts = {PC_BACKEND_REF, MAX_ROWS, 1};
    if (st == PC_OK)
        st = pc_evaluator_create(circuit, &opts, &evaluator);
    if (st != PC_OK) {
        fprintf(stderr, "consumer: %s\n", pc_last_error());
        goto done;
    }
    if (read_table(argv[2], model->num_vars, &t) != 0)
        goto done;
    for (int64_t i = 0; i < t.rows; i++)
        logp[i] = NAN;
    if (pc_evaluate(evaluator, t.x, NULL, t.rows, model->num_vars, logp) != PC_OK) {
        fprintf(stderr, "consumer: %s\n", pc_last_error());
        goto done;
    }
    failed = 0;
    for (int64_t i = 0; i < t.rows; i++) {
        if (!(fabs(logp[i] - t.logp[i]) <= 1e-12)) {
            fprintf(stderr, "consumer: row %lld: log p = %.17g, table %.17g\n", (long long)i,
                    logp[i], t.logp[i]);
            failed = 1;
        }
    }
    printf("%lld rows scored with ref: %s\n", (long long)t.rows, failed ? "MISMATCH" : "ok");
done:
    pc_evaluator_free(evaluator);
    pc_circuit_free(circuit);
    pc_hclt_free(model);
    return failed;
}
