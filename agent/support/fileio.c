/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Bounded reads of small files relative to a directory fd (fileio.h), for the /proc and policy
 * readers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "agent/support/fileio.h"

/**
 * read_fd_bounded() - read at most @max bytes from @fd
 *
 * The result is NUL-terminated (the NUL is not counted in *@ret_size). A
 * caller that must tell "exactly @max" from "more" asks for one byte more.
 *
 * Return: 0 or a negative errno.
 */
/* The first buffer: it holds any ordinary /proc file, and stays below malloc's mmap threshold. */
#define READ_FIRST_BUFFER (64 * 1024)

static int read_bounded(int fd, size_t max, bool short_read_is_end, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, allocated = max < READ_FIRST_BUFFER ? max + 1 : READ_FIRST_BUFFER;

        buf = malloc(allocated);
        if (!buf)
                return -ENOMEM;
        while (size < max) {
                ssize_t n;

                if (size + 1 >= allocated) {
                        size_t grown = allocated > (max + 1) / 2 ? max + 1 : allocated * 2;
                        char *p = realloc(buf, grown);
                        if (!p)
                                return -ENOMEM;
                        buf = p;
                        allocated = grown;
                }
                n = read(fd, buf + size, (allocated - 1 < max ? allocated - 1 : max) - size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                size += (size_t)n;
                if (short_read_is_end && size + 1 < allocated && size < max)
                        break;
        }
        buf[size] = '\0';

        *ret = TAKE_PTR(buf);
        *ret_size = size;
        return 0;
}

int read_fd_bounded(int fd, size_t max, char **ret, size_t *ret_size) {
        return read_bounded(fd, max, false, ret, ret_size);
}

static int read_at(int dir_fd, const char *name, size_t max, bool short_read_is_end, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;

        fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return -errno;
        return read_bounded(fd, max, short_read_is_end, ret, ret_size);
}

/**
 * read_file_at() - read at most @max bytes of @name below @dir_fd
 *
 * Never follows a symlink in the last component; a longer file is cut at @max.
 *
 * Return: 0 or a negative errno.
 */
int read_file_at(int dir_fd, const char *name, size_t max, char **ret, size_t *ret_size) {
        return read_at(dir_fd, name, max, false, ret, ret_size);
}

/**
 * read_proc_whole_at() - read_file_at() for a /proc file that one read gives whole
 *
 * Only for files that fill any read to its end: those made by one show()
 * (single_open: status, stat, cgroup, auxv) and the memory reads (cmdline,
 * environ). A multi-record seq_file (mountinfo, net/unix) gives about a page
 * per read, so a short read is not its end there: use read_file_at().
 *
 * Return: 0 or a negative errno.
 */
int read_proc_whole_at(int dir_fd, const char *name, size_t max, char **ret, size_t *ret_size) {
        return read_at(dir_fd, name, max, true, ret, ret_size);
}
