/* Status codes and error text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pc/lse.h"
#include "pc/status.h"

#include "base/fail.h"

static void test_status_words(void **state) {
    (void)state;
    assert_string_equal(pc_status_str(PC_OK), "ok");
    assert_string_equal(pc_status_str(PC_ERR_ARG), "invalid argument");
    assert_string_equal(pc_status_str((pc_status)-999), "unknown status");
}

static void test_fail_records_message(void **state) {
    (void)state;
    assert_int_equal(pc_fail(PC_ERR_IO, "%s: cannot open", "x.h5"), PC_ERR_IO);
    assert_string_equal(pc_last_error(), "x.h5: cannot open");
    /* A message that prefixes the previous one, as loaders do when they add the file name. */
    pc_fail(PC_ERR_MODEL, "pc_hclt_create: V = %d is too large", 5);
    assert_int_equal(pc_fail(PC_ERR_MODEL, "%s: %s", "m.h5", pc_last_error()), PC_ERR_MODEL);
    assert_string_equal(pc_last_error(), "m.h5: pc_hclt_create: V = 5 is too large");
}

static void test_names_round_trip(void **state) {
    (void)state;
    for (int k = PC_LSE_REF; k <= PC_LSE_INT; k++) {
        pc_lse_kernel parsed;
        assert_int_equal(pc_lse_kernel_parse(pc_lse_kernel_name((pc_lse_kernel)k), &parsed), PC_OK);
        assert_int_equal(parsed, k);
    }
    for (int d = PC_F32; d <= PC_Q10_6; d++) {
        pc_dtype parsed;
        assert_int_equal(pc_dtype_parse(pc_dtype_name((pc_dtype)d), &parsed), PC_OK);
        assert_int_equal(parsed, d);
    }
    pc_lse_kernel k;
    assert_int_equal(pc_lse_kernel_parse("fast", &k), PC_ERR_ARG);
    assert_non_null(strstr(pc_last_error(), "fast"));
    assert_int_equal(pc_lse_kernel_parse(NULL, &k), PC_ERR_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_words),
        cmocka_unit_test(test_fail_records_message),
        cmocka_unit_test(test_names_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
