/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Bounded reads of small files relative to a directory fd */
#pragma once

#include <stddef.h>

int read_fd_bounded(int fd, size_t max, char **ret, size_t *ret_size);
int read_file_at(int dir_fd, const char *name, size_t max, char **ret, size_t *ret_size);
int read_proc_whole_at(int dir_fd, const char *name, size_t max, char **ret, size_t *ret_size);
