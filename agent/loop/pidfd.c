/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Questions asked of a pidfd, never of a pid: whether its process has exited (a poll that does not
 * wait) and its pidfs identity. Used by the peer checks (sockopt.c), the user namespace charge
 * (userns.c) and the target's pin (target.c); a module of its own so that none of them reaches
 * into another for it.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include "agent/loop/pidfd.h"

#ifndef PID_FS_MAGIC
#define PID_FS_MAGIC 0x50494446
#endif

/* Whether pidfds live on pidfs: a property of the running kernel, so asked once. */
static int pidfs_known = -1;

int pidfd_identity(int pidfd, struct stat *ret) {
        struct statfs sfs;

        if (pidfs_known < 0) {
                if (fstatfs(pidfd, &sfs) < 0)
                        return -errno;
                pidfs_known = sfs.f_type == PID_FS_MAGIC;
        }
        if (!pidfs_known)
                return -EOPNOTSUPP;
        return fstat(pidfd, ret) < 0 ? -errno : 0;
}

bool pidfd_is_alive(int pidfd) {
        struct pollfd p = { .fd = pidfd, .events = POLLIN };
        int r;

        do
                r = poll(&p, 1, 0);
        while (r < 0 && errno == EINTR);
        return r == 0;
}
