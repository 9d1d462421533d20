/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A socket peer's identity as the kernel vouches for it (sockopt.h): SO_PEERCRED, SO_PEERGROUPS,
 * SO_PEERPIDFD; connections and ports call it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "agent/support/fileio.h"
#include "agent/loop/pidfd.h"
#include "agent/targets/procfs.h"
#include "agent/loop/sockopt.h"
#include "agent/support/test-hooks.h"
#include "agent/loop/userns.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

static int compare_gid(const void *a, const void *b) {
        gid_t x = *(const gid_t *)a, y = *(const gid_t *)b;
        return x < y ? -1 : x > y;
}

/* Most users are in a few groups: the first read is sized for them, and only a longer list costs a second. */
#define PEER_GROUPS_FIRST_GUESS 32

/*
 * On ERANGE the kernel says how long the list is; it can grow between that
 * read and the next only while the peer is being torn down, so one retry
 * covers the race and a second would just chase a dying peer.
 */
static int sockopt_get_peer_groups(int fd, gid_t primary, gid_t **ret, size_t *ret_n) {
        _cleanup_free_ gid_t *groups = NULL;
        socklen_t len = PEER_GROUPS_FIRST_GUESS * sizeof(gid_t);
        size_t n, out = 1;

        for (int attempt = 0;; attempt++) {
                if (len / sizeof(gid_t) > PEER_GROUPS_MAX)
                        return -E2BIG;
                free(groups);
                groups = malloc((len / sizeof(gid_t) + 1) * sizeof(gid_t));
                if (!groups)
                        return -ENOMEM;
                if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups + 1, &len) == 0)
                        break;
                if (errno != ERANGE || attempt > 1)
                        return -errno;
        }

        n = len / sizeof(gid_t);
        qsort(groups + 1, n, sizeof(gid_t), compare_gid);
        groups[0] = primary;
        for (size_t i = 1; i <= n; i++)
                if (groups[i] != primary && groups[i] != groups[out - 1])
                        groups[out++] = groups[i];

        *ret = TAKE_PTR(groups);
        *ret_n = out;
        return 0;
}

/* /proc/PID/status is a few hundred bytes; a bound keeps a malformed one from costing more. */
#define PROC_STATUS_MAX (64 * 1024)

/* Before Linux 6.5: a pidfd by pid, proved to pin a process of @uid by a check the pidfd outlives. */
static int peer_pidfd_by_pid(pid_t pid, uid_t uid, int *ret_pidfd) {
        _cleanup_close_ int pidfd = -EBADF;
        _cleanup_free_ char *status = NULL;
        char path[64];
        size_t size;
        ProcStatus st;
        int r;

        if (pid <= 0)
                return -ESRCH;
        pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0)
                return -errno;
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        r = read_file_at(AT_FDCWD, path, PROC_STATUS_MAX, &status, &size);
        if (r < 0)
                return r == -ENOENT ? -ESRCH : r;
        if (procfs_parse_status(status, size, &st) != 0)
                return -EIO;
        /* alive after the read: the status read was of the process the pidfd pins, not of a pid's next owner */
        if (!pidfd_is_alive(pidfd) || st.uid[1] != uid)
                return -ESRCH;
        *ret_pidfd = TAKE_FD(pidfd);
        return 0;
}

int sockopt_get_peer_pidfd(int fd, pid_t pid, uid_t uid, int *ret_pidfd) {
        socklen_t len = sizeof(int);
        int pidfd;

        if (!test_hook_kernel_has_peer_pidfd())
                return peer_pidfd_by_pid(pid, uid, ret_pidfd);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0) {
                /* ENOPROTOOPT: a kernel before 6.5 */
                if (errno == ENOPROTOOPT)
                        return peer_pidfd_by_pid(pid, uid, ret_pidfd);
                return -errno;
        }
        *ret_pidfd = pidfd;
        return 0;
}

/**
 * sockopt_get_peer_creds() - read the peer's identity, once, from the kernel
 *
 * The credentials are those recorded at connect(); nothing the peer sends can
 * change them. The peer's pidfd is read for its identity (the pidfs inode
 * number, for the audit record) and closed: a connection holds one fd.
 *
 * Return: 0 or a negative errno.
 */
int sockopt_get_peer_creds(int fd, PeerCreds *ret) {
        struct ucred cred;
        socklen_t len = sizeof(cred);
        _cleanup_free_ gid_t *groups = NULL;
        _cleanup_close_ int pidfd = -EBADF;
        uint64_t pidfd_id = 0;
        uid_t charged = USERNS_CHARGE_UNKNOWN;
        uint64_t userns = 0;
        struct stat st;
        size_t n_groups = 0;
        int r;

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return -errno;
        if (len != sizeof(cred))
                return -EIO;

        r = sockopt_get_peer_groups(fd, cred.gid, &groups, &n_groups);
        if (r < 0)
                return r;

        /* the pidfd only adds to the record and the charge: without it (the process is gone, out of fds)
         * the record goes without its id and the peer is charged as unknown (fail closed), uid 0 too:
         * it is root only in the agent's own user namespace, which only the process can tell */
        (void)sockopt_get_peer_pidfd(fd, cred.pid, cred.uid, &pidfd);
        if (pidfd >= 0 && pidfd_identity(pidfd, &st) == 0)
                pidfd_id = (uint64_t)st.st_ino;
        if (pidfd >= 0)
                (void)userns_charged_uid(pidfd, cred.pid, cred.uid, &charged, &userns);

        *ret = (PeerCreds){
                .pid = cred.pid,
                .uid = cred.uid,
                .gid = cred.gid,
                .groups = TAKE_PTR(groups),
                .n_groups = n_groups,
                .pidfd_id = pidfd_id,
                .charged_uid = charged,
                .userns_inode = userns,
        };
        return 0;
}

void peer_creds_done(PeerCreds *c) {
        free(c->groups);
        c->groups = NULL;
        c->n_groups = 0;
}
