/* pc_fail: how library code records an error for pc_last_error() (pc/status.h). Internal to the
 * library: tools and callers read errors, only the library sets them. */
#ifndef PC_BASE_FAIL_H
#define PC_BASE_FAIL_H

#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records a formatted message for the calling thread and returns `status`, so that library code
 * can write `return pc_fail(PC_ERR_ARG, "rows = %lld is negative", (long long)rows);`. The
 * arguments may include pc_last_error() itself (to prefix a message): the text is formatted
 * into a scratch buffer before it replaces the old one. */
pc_status pc_fail(pc_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif

#endif
