/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Kernel-verified identity of a socket peer: SO_PEERCRED, SO_PEERGROUPS, SO_PEERPIDFD */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "agent/loop/pidfd.h"

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
        /* whom the peer counts against for every per-user bound (userns.h): uid, or the owner of the
         * user namespace it runs in below the agent's, or USERNS_CHARGE_UNKNOWN. Policy decisions
         * stay on uid and groups */
        uid_t charged_uid;
        uint64_t userns_inode; /* the peer's own user namespace, as the pidfd showed it; 0 when unknown */
} PeerCreds;

#define PEER_CREDS_NULL {}

/*
 * sockopt_get_peer_creds() - who connected to @fd, read from the kernel at accept
 *
 * Also works out ->charged_uid from the peer's pidfd (userns_charged_uid());
 * when the kernel has SO_PEERPIDFD but the peer's process is gone, or its
 * namespace cannot be read, the peer is charged USERNS_CHARGE_UNKNOWN: one
 * shared bound for all such peers, never a uid of its own (fail closed).
 *
 * Return: 0 or a negative errno.
 */
int sockopt_get_peer_creds(int fd, PeerCreds *ret);

/**
 * sockopt_get_peer_pidfd() - a pidfd of the process that connected to @fd
 * @pid, @uid: the peer's pid and uid from SO_PEERCRED (sockopt_get_peer_creds())
 *
 * The kernel's own (SO_PEERPIDFD) where it has one (Linux 6.5+). Before 6.5 a
 * pidfd opened by @pid, kept only when the process it pins still has @uid as
 * its effective uid after the check (so the pid was not handed to a process
 * of another user meanwhile). What that cannot tell apart is a pid reused by
 * another process of the same user between connect() and the open; see
 * SECURITY.md.
 *
 * Return: 0 with *@ret_pidfd (CLOEXEC), -ESRCH when the process is gone or is
 * not @uid's, or another negative errno.
 */
int sockopt_get_peer_pidfd(int fd, pid_t pid, uid_t uid, int *ret_pidfd);
void peer_creds_done(PeerCreds *c);
