/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "cleanup.h"
#include "fileio.h"

/**
 * read_fd_bounded() - read at most @max bytes from @fd
 *
 * The result is NUL-terminated (the NUL is not counted in *@ret_size). A
 * caller that must tell "exactly @max" from "more" asks for one byte more.
 *
 * Return: 0 or a negative errno.
 */
int read_fd_bounded(int fd, size_t max, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;

        buf = malloc(max + 1);
        if (!buf)
                return -ENOMEM;
        while (size < max) {
                ssize_t n = read(fd, buf + size, max - size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                size += (size_t)n;
        }
        buf[size] = '\0';

        *ret = TAKE_PTR(buf);
        *ret_size = size;
        return 0;
}

/**
 * read_file_at() - read at most @max bytes of @name below @dir_fd
 *
 * Never follows a symlink in the last component; a longer file is cut at @max.
 *
 * Return: 0 or a negative errno.
 */
int read_file_at(int dir_fd, const char *name, size_t max, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;

        fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return -errno;
        return read_fd_bounded(fd, max, ret, ret_size);
}
