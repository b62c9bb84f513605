#include "pc/status.h"

#include <stdarg.h>
#include <stdio.h>

/* Long enough for a path plus a dataset name and a sentence. */
#define PC_ERROR_TEXT_LEN 1024

static _Thread_local char last_error[PC_ERROR_TEXT_LEN];

const char *pc_status_str(pc_status status) {
    switch (status) {
#define PC_STATUS_CASE(name, value, words) \
    case name:                             \
        return words;
        PC_STATUS_MAP(PC_STATUS_CASE)
#undef PC_STATUS_CASE
    }
    return "unknown status";
}

const char *pc_last_error(void) { return last_error; }

pc_status pc_fail(pc_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}
