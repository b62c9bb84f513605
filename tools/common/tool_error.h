/* Error text of the tools' shared code (tools/common): the library keeps its own text for
 * pc_last_error() and sets it only from library code, so the shared readers and writers record
 * theirs here, in the same style (a pc_status returned, a message naming the file kept for the
 * calling thread). A failed library call is passed on with its text by pc_tool_pass. */
#ifndef PC_TOOLS_TOOL_ERROR_H
#define PC_TOOLS_TOOL_ERROR_H

#include "pc/status.h"

/* Records a formatted message for the calling thread and returns `status`. The arguments may
 * include pc_tool_last_error() itself. */
pc_status pc_tool_fail(pc_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Returns `status`, and when it is an error records the library's pc_last_error() text. */
pc_status pc_tool_pass(pc_status status);

/* The last message recorded on this thread ("" before any). */
const char *pc_tool_last_error(void);

#endif
