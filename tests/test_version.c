/* The version: the header's macros agree with each other, the library reports the version of
 * the header it was built from, and CMake read that same version from the header
 * (PC_PROJECT_VERSION, passed in by tests/CMakeLists.txt). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "pc/version.h"

static void test_header_is_consistent(void **state) {
    (void)state;
    char text[64];
    snprintf(text, sizeof text, "%d.%d.%d", PC_VERSION_MAJOR, PC_VERSION_MINOR, PC_VERSION_PATCH);
    assert_string_equal(PC_VERSION_STRING, text);
    assert_true(PC_VERSION_MINOR < 100 && PC_VERSION_PATCH < 100);
    assert_int_equal(PC_VERSION_NUMBER,
                     PC_VERSION_MAJOR * 10000 + PC_VERSION_MINOR * 100 + PC_VERSION_PATCH);
}

static void test_library_matches_header(void **state) {
    (void)state;
    assert_non_null(pc_version());
    assert_string_equal(pc_version(), PC_VERSION_STRING);
    assert_int_equal(pc_version_number(), PC_VERSION_NUMBER);
}

static void test_build_read_the_header(void **state) {
    (void)state;
    assert_string_equal(PC_PROJECT_VERSION, PC_VERSION_STRING);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_is_consistent),
        cmocka_unit_test(test_library_matches_header),
        cmocka_unit_test(test_build_read_the_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
