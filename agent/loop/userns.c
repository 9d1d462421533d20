/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whom a peer process is charged to, from the outermost user namespace below the agent's (userns.h) */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "cleanup.h"
#include "pidfd.h"
#include "test-hooks.h"
#include "userns.h"

/* The kernel nests user namespaces at most 32 deep; one more step would be a loop. */
#define USERNS_DEPTH_MAX 33

static bool same_inode(const struct stat *a, const struct stat *b) {
        return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* The agent's own user namespace: its identity is asked once (it cannot change: the filter forbids setns). */
static int own_userns(struct stat *ret) {
        static struct stat own;
        static bool known;

        if (!known) {
                _cleanup_close_ int fd = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
                if (fd < 0 || fstat(fd, &own) < 0)
                        return -errno;
                known = true;
        }
        *ret = own;
        return 0;
}

static int open_userns(int pidfd, pid_t pid) {
        char path[sizeof("/proc//ns/user") + 3 * sizeof(pid_t)];
        int fd;

        if (pidfd >= 0 && test_hook_kernel_has_pidfd_userns()) {
                fd = ioctl(pidfd, PIDFD_GET_USER_NAMESPACE, 0);
                if (fd >= 0)
                        return fd;
                if (errno != ENOTTY && errno != EINVAL && errno != EOPNOTSUPP)
                        return -errno; /* ESRCH: it has exited */
        }
        if (pidfd < 0 || pid <= 0)
                return -ESRCH; /* without a pidfd, nothing says the pid is still the peer's */
        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? -ESRCH : -errno;
        /* alive after the open: the pid still named the peer's process when its namespace was taken */
        if (!pidfd_is_alive(pidfd)) {
                close(fd);
                return -ESRCH;
        }
        return fd;
}

/* A namespace root made: charged as itself, by its inode number (userns.h), never as root. */
static int namespace_charge(int ns, uid_t *ret) {
        struct stat st;

        if (fstat(ns, &st) < 0)
                return -errno;
        if (st.st_ino < USERNS_CHARGE_NAMESPACE_FIRST || st.st_ino >= USERNS_CHARGE_NAMESPACE_END)
                *ret = USERNS_CHARGE_UNKNOWN; /* a number no kernel gives today: one shared charge, fail closed */
        else
                *ret = (uid_t)st.st_ino;
        return 0;
}

int userns_charged_uid(int pidfd, pid_t pid, uid_t uid, uid_t *ret) {
        _cleanup_close_ int ns = -EBADF, below = -EBADF;
        struct stat own = {}, st;
        uid_t owner;
        int r;

        r = own_userns(&own);
        if (r < 0)
                return r;
        ns = open_userns(pidfd, pid);
        if (ns < 0)
                return ns;
        /* up to the namespace whose parent the agent may not see: the agent's own, or one outside it */
        for (int depth = 0;; depth++) {
                int parent;
                if (depth >= USERNS_DEPTH_MAX)
                        return -ELOOP;
                parent = ioctl(ns, NS_GET_PARENT);
                if (parent < 0) {
                        if (errno != EPERM)
                                return -errno;
                        break;
                }
                safe_close(below);
                below = ns;
                ns = parent;
        }
        if (fstat(ns, &st) < 0)
                return -errno;
        if (!same_inode(&st, &own))
                return -EPERM;
        if (below < 0) {
                *ret = uid; /* in the agent's own namespace; uid 0 is root only here */
                return 0;
        }
        if (ioctl(below, NS_GET_OWNER_UID, &owner) < 0)
                return -errno;
        if (owner == 0)
                return namespace_charge(below, ret);
        *ret = owner;
        return 0;
}
