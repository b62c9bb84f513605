#include "pc/status.h"
#include "base/fail.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
    /* Formatted apart first: callers prefix the previous message ("%s: %s", path,
     * pc_last_error()), and vsnprintf into the buffer it reads from is undefined (it garbled
     * such messages). */
    char text[PC_ERROR_TEXT_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    memcpy(last_error, text, sizeof text);
    return status;
}
