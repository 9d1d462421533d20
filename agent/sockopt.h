/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Kernel-verified identity of a socket peer: SO_PEERCRED, SO_PEERGROUPS, SO_PEERPIDFD */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#define PEER_GROUPS_MAX 65536

typedef struct PeerCreds {
        pid_t pid; /* 0 when the peer is in a pid namespace we cannot see */
        uid_t uid;
        gid_t gid;
        gid_t *groups; /* primary gid first, then sorted supplementary gids, no duplicates */
        size_t n_groups;
        /* the process's pidfs inode: unlike a pid, never reused while the host runs; 0 when the
         * kernel has no SO_PEERPIDFD or no pidfs. Read at accept; no fd is kept for it */
        uint64_t pidfd_id;
} PeerCreds;

#define PEER_CREDS_NULL {}

int sockopt_get_peer_creds(int fd, PeerCreds *ret);

/*
 * pidfd_identity() - fstat() of a pidfd on pidfs (Linux 6.9+), where each
 * process has one inode for its whole life: two pidfds name the same process
 * exactly when st_dev and st_ino match. Whether the kernel has pidfs is asked
 * of the first pidfd only.
 *
 * Return: 0, -EOPNOTSUPP before pidfs (all pidfds share one inode), or a negative errno.
 */
int pidfd_identity(int pidfd, struct stat *ret);
void peer_creds_done(PeerCreds *c);
