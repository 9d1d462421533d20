/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <sys/socket.h>

#include "io.h"

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
