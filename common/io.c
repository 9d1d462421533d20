/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whole reads and writes on blocking sockets (io.h), for the client side. */
#include <errno.h>
#include <stdbool.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/io.h"

/*
 * A socket timeout (SO_RCVTIMEO/SO_SNDTIMEO) surfaces as EAGAIN; it is
 * reported as -ETIMEDOUT so callers can say what happened. EOF before @size
 * bytes is -ECONNRESET.
 */
int fd_read_exactly(int fd, uint8_t *buf, size_t size) {
        size_t got = 0;

        while (got < size) {
                ssize_t n = recv(fd, buf + got, size - got, 0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? -ETIMEDOUT : -errno;
                }
                if (n == 0)
                        return -ECONNRESET;
                got += (size_t)n;
        }
        return 0;
}

int fd_write_all(int fd, const uint8_t *buf, size_t size) {
        size_t sent = 0;

        while (sent < size) {
                ssize_t n = send(fd, buf + sent, size - sent, MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? -ETIMEDOUT : -errno;
                }
                sent += (size_t)n;
        }
        return 0;
}

/* Copies @size bytes in the kernel (copy_file_range, else sendfile), from offset 0. */
int fd_copy_all(int in_fd, int out_fd, uint64_t size) {
        loff_t in = 0, out = 0;
        bool use_sendfile = false;

        while ((uint64_t)in < size) {
                size_t chunk = size - (uint64_t)in > (1u << 30) ? (1u << 30) : (size_t)(size - (uint64_t)in);
                ssize_t n;

                if (!use_sendfile) {
                        n = copy_file_range(in_fd, &in, out_fd, &out, chunk, 0);
                        if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
                                use_sendfile = true;
                                if (lseek(out_fd, out, SEEK_SET) < 0)
                                        return -errno;
                                continue;
                        }
                } else
                        n = sendfile(out_fd, in_fd, &in, chunk);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EIO; /* the source is shorter than it said */
        }
        return 0;
}
