/* pcinfer status codes and error text.
 *
 * Every fallible library call returns a pc_status: PC_OK (0) on success, a negative code on
 * error. On error the library also records a message for the calling thread that names the
 * file, dataset or argument at fault; pc_last_error() returns it until the next failing call
 * on the same thread. The library never prints and never exits. Only the library sets these
 * messages (src/base/fail.h).
 */
#ifndef PC_STATUS_H
#define PC_STATUS_H

#include "pc/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, words): one list generates the enum and pc_status_str(). */
#define PC_STATUS_MAP(X)                                                   \
    X(PC_OK, 0, "ok")                                                      \
    X(PC_ERR_ARG, -1, "invalid argument")                                  \
    X(PC_ERR_NOMEM, -2, "out of memory")                                   \
    X(PC_ERR_IO, -3, "input/output error")                                 \
    X(PC_ERR_FORMAT, -4, "invalid file format")                            \
    X(PC_ERR_MODEL, -5, "invalid model")                                   \
    X(PC_ERR_DATA, -6, "invalid data")                                     \
    X(PC_ERR_UNSUPPORTED, -7, "not supported by this build or device")     \
    X(PC_ERR_CUDA, -8, "CUDA error")                                       \
    X(PC_ERR_NO_DEVICE, -9, "no GPU present")                              \
    X(PC_ERR_DEVICE_MEMORY, -10, "not enough GPU memory")                  \
    X(PC_ERR_INTERNAL, -11, "internal error")

typedef enum pc_status {
#define PC_STATUS_ENUM(name, value, words) name = value,
    PC_STATUS_MAP(PC_STATUS_ENUM)
#undef PC_STATUS_ENUM
} pc_status;

/* The words for a status code ("invalid argument"); never NULL. */
PC_API const char *pc_status_str(pc_status status);

/* The message of the calling thread's most recent failing call ("" if none). The text is owned
 * by the library and stays valid until the next failing call on this thread. */
PC_API const char *pc_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
