/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a pidfd tells of its process: whether it lives, and (on pidfs) which process it is for good */
#pragma once

#include <stdbool.h>
#include <sys/stat.h>

/*
 * pidfd_identity() - fstat() of a pidfd on pidfs (Linux 6.9+), where each
 * process has one inode for its whole life: two pidfds name the same process
 * exactly when st_dev and st_ino match. Whether the kernel has pidfs is asked
 * of the first pidfd only.
 *
 * Return: 0, -EOPNOTSUPP before pidfs (all pidfds share one inode), or a negative errno.
 */
int pidfd_identity(int pidfd, struct stat *ret);

/* pidfd_is_alive() - whether the process @pidfd pins has not exited (a poll that does not wait). */
bool pidfd_is_alive(int pidfd);
