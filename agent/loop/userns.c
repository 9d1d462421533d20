/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Whom a peer process is charged to, from the outermost user namespace below the agent's, and a
 * cache of that answer by the name of the peer's own namespace, for refusals (userns.h)
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "common/cleanup.h"
#include "agent/loop/pidfd.h"
#include "agent/support/test-hooks.h"
#include "agent/loop/userns.h"

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

int userns_charged_uid(int pidfd, pid_t pid, uid_t uid, uid_t *ret, uint64_t *ret_userns) {
        _cleanup_close_ int ns = -EBADF, below = -EBADF;
        struct stat own = {}, first, st;
        uid_t owner;
        int r;

        r = own_userns(&own);
        if (r < 0)
                return r;
        ns = open_userns(pidfd, pid);
        if (ns < 0)
                return ns;
        if (fstat(ns, &first) < 0)
                return -errno;
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
        if (below < 0)
                st = first;
        else if (fstat(ns, &st) < 0)
                return -errno;
        if (!same_inode(&st, &own))
                return -EPERM;
        if (ret_userns)
                *ret_userns = (uint64_t)first.st_ino;
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

/* ---- whom a peer is charged to, from its namespace's name alone, for refusals ---- */

typedef struct UsernsCacheEntry {
        int fd;                 /* the namespace, held open: its inode names no other while it lives */
        uint64_t inode;
        uid_t charged;
        uint64_t until_usec;
} UsernsCacheEntry;

struct UsernsCache {
        UsernsCacheEntry entries[USERNS_CACHE_MAX];
        size_t n;
};

UsernsCache *userns_cache_new(void) {
        return calloc(1, sizeof(UsernsCache));
}

static void cache_drop(UsernsCache *c, size_t i) {
        safe_close(c->entries[i].fd);
        c->entries[i] = c->entries[--c->n];
}

void userns_cache_expire(UsernsCache *c, uint64_t now_usec) {
        for (size_t i = 0; i < c->n;)
                if (c->entries[i].until_usec <= now_usec)
                        cache_drop(c, i);
                else
                        i++;
}

UsernsCache *userns_cache_free(UsernsCache *c) {
        if (!c)
                return NULL;
        while (c->n > 0)
                cache_drop(c, 0);
        free(c);
        return NULL;
}

int userns_cache_learn(UsernsCache *c, pid_t pid, uint64_t inode, uid_t charged, uint64_t now_usec) {
        char path[sizeof("/proc//ns/user") + 3 * sizeof(pid_t)];
        struct stat own, st;
        size_t oldest = 0;
        int fd, r;

        r = own_userns(&own);
        if (r < 0)
                return r;
        if (inode == (uint64_t)own.st_ino)
                return 0; /* the agent's own: told apart by the uid alone */
        userns_cache_expire(c, now_usec);
        for (size_t i = 0; i < c->n; i++)
                if (c->entries[i].inode == inode) {
                        c->entries[i].charged = charged;
                        c->entries[i].until_usec = now_usec + USERNS_CACHE_USEC;
                        return 0;
                }
        if (pid <= 0)
                return -ESRCH;
        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        /* the very namespace the pidfd showed: not that of a process that took the pid since */
        if (fstat(fd, &st) < 0 || (uint64_t)st.st_ino != inode) {
                close(fd);
                return -ESRCH;
        }
        if (c->n == USERNS_CACHE_MAX) {
                for (size_t i = 1; i < c->n; i++)
                        if (c->entries[i].until_usec < c->entries[oldest].until_usec)
                                oldest = i;
                cache_drop(c, oldest);
        }
        c->entries[c->n++] = (UsernsCacheEntry){ .fd = fd, .inode = inode, .charged = charged,
                                                  .until_usec = now_usec + USERNS_CACHE_USEC };
        return 0;
}

int userns_cache_charge(UsernsCache *c, pid_t pid, uid_t uid, uint64_t now_usec, uid_t *ret) {
        char path[sizeof("/proc//ns/user") + 3 * sizeof(pid_t)], link[64];
        unsigned long long inode;
        struct stat own;
        ssize_t n;
        int r;

        if (pid <= 0)
                return -ESRCH;
        r = own_userns(&own);
        if (r < 0)
                return r;
        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        n = readlink(path, link, sizeof(link) - 1);
        if (n < 0)
                return -errno;
        link[n] = '\0';
        if (sscanf(link, "user:[%llu]", &inode) != 1)
                return -EIO;
        if (inode == (unsigned long long)own.st_ino) {
                *ret = uid;
                return 0;
        }
        for (size_t i = 0; i < c->n; i++)
                if (c->entries[i].inode == inode && c->entries[i].until_usec > now_usec) {
                        *ret = c->entries[i].charged;
                        return 0;
                }
        return -ENOENT;
}
