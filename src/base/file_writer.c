/* Output files written safely (pc/file.h): a temporary file in the target's folder, synced,
 * then renamed over the target. */
#define _GNU_SOURCE /* O_TMPFILE, linkat's AT_EMPTY_PATH, getrandom */
#include "pc/file.h"
#include "base/fail.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PC_WRITER_BUFFER (1 << 16)
#define PC_WRITER_MAX_INPUTS 8

struct pc_file_writer {
    char *path;     /* the target as given */
    char *base;     /* its last component, inside path */
    int dir_fd;     /* the target's folder */
    int fd;         /* the temporary file */
    int unnamed;    /* 1: O_TMPFILE (no name until commit) */
    char tmp[96];   /* the temporary file's name in the folder (named files) */
    int num_inputs; /* the inputs' identities, compared with the target's */
    dev_t in_dev[PC_WRITER_MAX_INPUTS];
    ino_t in_ino[PC_WRITER_MAX_INPUTS];
    pc_status error; /* the first failed write, kept for later calls */
    char error_text[512];
    size_t used;
    char buf[PC_WRITER_BUFFER];
};

static const char *kind_of(mode_t mode) {
    return S_ISLNK(mode) ? "a symbolic link" : S_ISDIR(mode) ? "a folder"
           : S_ISCHR(mode) || S_ISBLK(mode) ? "a device" : S_ISFIFO(mode) ? "a FIFO"
           : S_ISSOCK(mode) ? "a socket" : "not a regular file";
}

/* The target may be replaced: it does not exist, or is a regular file that is no input. */
static pc_status check_target(const pc_file_writer *w) {
    struct stat sb;
    if (fstatat(w->dir_fd, w->base, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) return PC_OK;
        return pc_fail(PC_ERR_IO, "%s: cannot check the output path: %s", w->path,
                       strerror(errno));
    }
    if (!S_ISREG(sb.st_mode))
        return pc_fail(PC_ERR_IO, "%s: exists and is %s, not a regular file; refusing to replace "
                                  "it", w->path, kind_of(sb.st_mode));
    for (int i = 0; i < w->num_inputs; i++)
        if (sb.st_dev == w->in_dev[i] && sb.st_ino == w->in_ino[i])
            return pc_fail(PC_ERR_IO, "%s: is an input of this run; refusing to write over it",
                           w->path);
    return PC_OK;
}

/* 16 hex digits from the kernel's generator (the clock and pid if that fails): O_EXCL makes a
 * guessed name harmless, randomness only avoids collisions between writers. */
static uint64_t random_word(void) {
    uint64_t x = 0;
    if (getrandom(&x, sizeof x, GRND_NONBLOCK) == (ssize_t)sizeof x) return x;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid() << 32 ^
           (uint64_t)ts.tv_sec;
}

/* An unnamed file when the folder's file system supports it and /proc can name it later;
 * else a new hidden name ".<base>.<random>.tmp" that did not exist. */
static pc_status create_temp(pc_file_writer *w) {
#ifdef O_TMPFILE
    if (access("/proc/self/fd", F_OK) == 0) {
        w->fd = openat(w->dir_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
        if (w->fd >= 0) {
            w->unnamed = 1;
            return PC_OK;
        }
    }
#endif
    for (int attempt = 0; attempt < 16; attempt++) {
        snprintf(w->tmp, sizeof w->tmp, ".%.48s.%016llx.tmp", w->base,
                 (unsigned long long)random_word());
        w->fd = openat(w->dir_fd, w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                       0666);
        if (w->fd >= 0) return PC_OK;
        if (errno != EEXIST) break;
    }
    return pc_fail(PC_ERR_IO, "%s: cannot create a file in its folder: %s", w->path,
                   strerror(errno));
}

static void writer_free(pc_file_writer *w) {
    if (w->fd >= 0) close(w->fd);
    if (w->dir_fd >= 0) close(w->dir_fd);
    free(w->path);
    free(w);
}

pc_status pc_file_writer_open(const char *path, const char *const *inputs, int num_inputs,
                              pc_file_writer **out) {
    if (!out) return pc_fail(PC_ERR_ARG, "pc_file_writer_open: out is NULL");
    *out = NULL;
    if (!path || !*path) return pc_fail(PC_ERR_ARG, "pc_file_writer_open: no path");
    if (num_inputs < 0 || num_inputs > PC_WRITER_MAX_INPUTS || (num_inputs > 0 && !inputs))
        return pc_fail(PC_ERR_ARG, "pc_file_writer_open: num_inputs = %d (0 to %d)", num_inputs,
                       PC_WRITER_MAX_INPUTS);
    pc_file_writer *w = malloc(sizeof *w);
    if (!w) return pc_fail(PC_ERR_NOMEM, "%s: out of memory", path);
    memset(w, 0, offsetof(pc_file_writer, buf));
    w->dir_fd = w->fd = -1;
    w->path = strdup(path);
    if (!w->path) {
        writer_free(w);
        return pc_fail(PC_ERR_NOMEM, "%s: out of memory", path);
    }
    /* Split "dir/base" in the copy; a path without '/' lives in ".". */
    char *slash = strrchr(w->path, '/');
    w->base = slash ? slash + 1 : w->path;
    const char *dir = ".";
    if (slash == w->path) dir = "/";
    if (slash && slash != w->path) *slash = '\0', dir = w->path;
    pc_status st = PC_OK;
    if (!*w->base || !strcmp(w->base, ".") || !strcmp(w->base, ".."))
        st = pc_fail(PC_ERR_IO, "%s: names a folder, not a file", path);
    else if ((w->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        st = pc_fail(PC_ERR_IO, "%s: cannot open its folder: %s", path, strerror(errno));
    if (slash && slash != w->path) *slash = '/';
    for (int i = 0; i < num_inputs && st == PC_OK; i++) {
        struct stat sb;
        if (inputs[i] && stat(inputs[i], &sb) == 0) {
            w->in_dev[w->num_inputs] = sb.st_dev;
            w->in_ino[w->num_inputs++] = sb.st_ino;
        }
    }
    if (st == PC_OK) st = check_target(w);
    if (st == PC_OK) st = create_temp(w);
    if (st != PC_OK) {
        writer_free(w);
        return st;
    }
    *out = w;
    return PC_OK;
}

/* Writes the buffer out; the first failure is kept (full disk, file-size limit, I/O error). */
static pc_status flush(pc_file_writer *w) {
    size_t done = 0;
    while (w->error == PC_OK && done < w->used) {
        ssize_t n = write(w->fd, w->buf + done, w->used - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            w->error = pc_fail(PC_ERR_IO, "%s: writing failed: %s", w->path,
                               n < 0 ? strerror(errno) : "no progress");
            snprintf(w->error_text, sizeof w->error_text, "%s", pc_last_error());
        }
        done += n > 0 ? (size_t)n : 0;
    }
    w->used = 0;
    return w->error;
}

static pc_status kept_error(const pc_file_writer *w) {
    return pc_fail(w->error, "%s", w->error_text);
}

pc_status pc_file_writer_write(pc_file_writer *w, const void *bytes, size_t n) {
    if (!w || (n > 0 && !bytes)) return pc_fail(PC_ERR_ARG, "pc_file_writer_write: NULL argument");
    if (w->error != PC_OK) return kept_error(w);
    const char *p = bytes;
    while (n > 0) {
        size_t room = sizeof w->buf - w->used, take = n < room ? n : room;
        memcpy(w->buf + w->used, p, take);
        w->used += take, p += take, n -= take;
        if (w->used == sizeof w->buf && flush(w) != PC_OK) return w->error;
    }
    return PC_OK;
}

pc_status pc_file_writer_printf(pc_file_writer *w, const char *fmt, ...) {
    if (!w || !fmt) return pc_fail(PC_ERR_ARG, "pc_file_writer_printf: NULL argument");
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line)
        return pc_fail(PC_ERR_ARG, "pc_file_writer_printf: text of %d bytes (at most %zu)", n,
                       sizeof line - 1);
    return pc_file_writer_write(w, line, (size_t)n);
}

/* Names the synced file: an unnamed one is linked straight to the target when there is none
 * (nothing can be left over), else to a fresh temporary name that rename then moves. */
static pc_status give_name(pc_file_writer *w) {
    if (w->unnamed) {
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", w->fd);
        if (linkat(AT_FDCWD, proc, w->dir_fd, w->base, AT_SYMLINK_FOLLOW) == 0) return PC_OK;
        for (int attempt = 0; attempt < 16 && errno == EEXIST; attempt++) {
            snprintf(w->tmp, sizeof w->tmp, ".%.48s.%016llx.tmp", w->base,
                     (unsigned long long)random_word());
            if (linkat(AT_FDCWD, proc, w->dir_fd, w->tmp, AT_SYMLINK_FOLLOW) == 0) {
                w->unnamed = 0;
                break;
            }
        }
        if (w->unnamed)
            return pc_fail(PC_ERR_IO, "%s: cannot name the finished file: %s", w->path,
                           strerror(errno));
    }
    if (renameat(w->dir_fd, w->tmp, w->dir_fd, w->base) != 0)
        return pc_fail(PC_ERR_IO, "%s: cannot rename the finished file into place: %s", w->path,
                       strerror(errno));
    w->tmp[0] = '\0';
    return PC_OK;
}

pc_status pc_file_writer_commit(pc_file_writer *w) {
    if (!w) return pc_fail(PC_ERR_ARG, "pc_file_writer_commit: writer is NULL");
    pc_status st = flush(w);
    if (st == PC_OK && fsync(w->fd) != 0)
        st = pc_fail(PC_ERR_IO, "%s: writing failed: %s", w->path, strerror(errno));
    if (st == PC_OK) st = check_target(w);
    if (st == PC_OK) st = give_name(w);
    /* The new name reaches the disk with the folder. Its result is not an error: the file is
     * complete and in place, and some file systems refuse to sync a folder. */
    if (st == PC_OK) (void)fsync(w->dir_fd);
    if (st != PC_OK) {
        pc_file_writer_abort(w);
        return st;
    }
    writer_free(w);
    return PC_OK;
}

void pc_file_writer_abort(pc_file_writer *w) {
    if (!w) return;
    if (!w->unnamed && w->tmp[0]) unlinkat(w->dir_fd, w->tmp, 0);
    writer_free(w);
}
