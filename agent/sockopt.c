/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include "cleanup.h"
#include "sockopt.h"
#include "userns.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
#ifndef PID_FS_MAGIC
#define PID_FS_MAGIC 0x50494446
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
        bool trust_pid = false;
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

        len = sizeof(pidfd);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0) {
                pidfd = -EBADF;
                /* the id only adds to the audit record: out of fds, the record goes without it */
                if (errno != ENOPROTOOPT && errno != ENODATA && errno != ESRCH && errno != EINVAL &&
                    errno != EMFILE && errno != ENFILE)
                        return -errno;
                /* a kernel without SO_PEERPIDFD (before 6.5) leaves the pid as the only handle; where
                 * the kernel has it, no pidfd means the process is gone and its pid may be anyone's */
                trust_pid = errno == ENOPROTOOPT || errno == EINVAL;
        }
        if (pidfd >= 0 && pidfd_identity(pidfd, &st) == 0)
                pidfd_id = (uint64_t)st.st_ino;
        if (pidfd >= 0 || trust_pid || cred.uid == 0)
                (void)userns_charged_uid(pidfd, cred.pid, cred.uid, &charged);

        *ret = (PeerCreds){
                .pid = cred.pid,
                .uid = cred.uid,
                .gid = cred.gid,
                .groups = TAKE_PTR(groups),
                .n_groups = n_groups,
                .pidfd_id = pidfd_id,
                .charged_uid = charged,
        };
        return 0;
}

void peer_creds_done(PeerCreds *c) {
        free(c->groups);
        c->groups = NULL;
        c->n_groups = 0;
}
