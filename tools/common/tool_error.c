/* Error text of the tools' shared code (tool_error.h). */
#include "tool_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

pc_status pc_tool_fail(pc_status status, const char *fmt, ...) {
    char text[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    memcpy(last_error, text, sizeof text);
    return status;
}

pc_status pc_tool_pass(pc_status status) {
    if (status != PC_OK) pc_tool_fail(status, "%s", pc_last_error());
    return status;
}

const char *pc_tool_last_error(void) { return last_error; }
