/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whole reads and writes on blocking sockets, for the client side */
#pragma once

#include <stddef.h>
#include <stdint.h>

int fd_read_exactly(int fd, uint8_t *buf, size_t size);
int fd_write_all(int fd, const uint8_t *buf, size_t size);
int fd_copy_all(int in_fd, int out_fd, uint64_t size);
