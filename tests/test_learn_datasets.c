/* The data-set finder of the tools (tools/common/dataset_find.h): the working directory's
 * datasets/<name> first, every place named when nothing is found, bad names refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "dataset_find.h"
#include "hclt_random.h"

static void test_finds_and_reports(void **state) {
    (void)state;
    char *dir = pc_hr_tempdir();
    char here[4096], path[4096];
    assert_non_null(getcwd(here, sizeof here));
    assert_int_equal(chdir(dir), 0);
    assert_int_equal(mkdir("datasets", 0700), 0);
    assert_int_equal(mkdir("datasets/toy-set", 0700), 0);
    FILE *f = fopen("datasets/toy-set/train.gz", "wb");
    assert_non_null(f);
    fclose(f);
    memset(path, 'x', sizeof path);
    assert_int_equal(pc_tool_find_dataset("toy-set", "train.gz", path, sizeof path), PC_OK);
    assert_string_equal(path, "datasets/toy-set/train.gz");
    assert_int_equal(pc_tool_find_dataset("toy-set", "test.gz", path, sizeof path), PC_ERR_IO);
    assert_non_null(strstr(path, "toy-set file test.gz not found"));
    assert_non_null(strstr(path, "datasets/toy-set/test.gz"));
    assert_non_null(strstr(path, "/usr/share/datasets/toy-set/test.gz"));
    /* a directory is not a file */
    assert_int_equal(mkdir("datasets/toy-set/dir.gz", 0700), 0);
    assert_int_equal(pc_tool_find_dataset("toy-set", "dir.gz", path, sizeof path), PC_ERR_IO);
    rmdir("datasets/toy-set/dir.gz");
    /* a path too short for the answer is not a match */
    char tiny[8];
    assert_int_equal(pc_tool_find_dataset("toy-set", "train.gz", tiny, sizeof tiny), PC_ERR_IO);
    assert_int_equal(pc_tool_find_dataset("../x", "train.gz", path, sizeof path), PC_ERR_ARG);
    assert_int_equal(pc_tool_find_dataset("", "train.gz", path, sizeof path), PC_ERR_ARG);
    assert_int_equal(pc_tool_find_dataset("toy-set", NULL, path, sizeof path), PC_ERR_ARG);
    assert_int_equal(pc_tool_find_dataset("toy-set", "train.gz", NULL, 10), PC_ERR_ARG);
    remove("datasets/toy-set/train.gz");
    rmdir("datasets/toy-set");
    rmdir("datasets");
    assert_int_equal(chdir(here), 0);
    pc_hr_rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_finds_and_reports)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
