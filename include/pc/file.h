/* Output files that are never left half-written and cannot be turned against the user.
 *
 * A writer puts its bytes into a temporary file in the target's folder: an unnamed one
 * (O_TMPFILE) where the file system offers it, so that a killed process leaves nothing behind,
 * else a fresh name created with O_EXCL | O_NOFOLLOW (never an existing file or a planted
 * link). Commit flushes, fsyncs, gives the file the target's name (rename: readers see the old
 * file or the new one, never a part) and fsyncs the folder. Any failure, including a full disk
 * or a file-size limit (write errors are remembered and reported by commit), removes the
 * temporary file and leaves the target as it was.
 *
 * The target is refused (PC_ERR_IO, the message names it) when it exists and is not a regular
 * file (a device node, FIFO, socket, folder or symbolic link, which a rename would replace),
 * or when it is one of the caller's input files (same device and inode: hard links and links
 * to it count). Both are checked at open and again at commit.
 *
 * A writer belongs to one thread at a time; different writers are independent.
 */
#ifndef PC_FILE_H
#define PC_FILE_H

#include <stddef.h>

#include "pc/export.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pc_file_writer pc_file_writer;

/* Checks the target and creates the temporary file, so that a bad output path fails before
 * any long work. inputs[0, num_inputs) are the paths the caller reads (NULL entries and files
 * that do not exist are skipped); num_inputs may be 0. */
PC_API pc_status pc_file_writer_open(const char *path, const char *const *inputs, int num_inputs,
                                     pc_file_writer **out);

/* Appends bytes (buffered). A failed write is remembered: later calls return it too. */
PC_API pc_status pc_file_writer_write(pc_file_writer *w, const void *bytes, size_t n);

/* Appends formatted text, as fprintf. */
PC_API pc_status pc_file_writer_printf(pc_file_writer *w, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Flushes, syncs and renames the file into place, then frees the writer whatever the outcome;
 * on failure nothing is left behind. */
PC_API pc_status pc_file_writer_commit(pc_file_writer *w);

/* Removes the temporary file and frees the writer; NULL does nothing. */
PC_API void pc_file_writer_abort(pc_file_writer *w);

#ifdef __cplusplus
}
#endif

#endif
