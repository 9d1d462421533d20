/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Whom a peer counts against: the principal the kernel vouches for. A user
 * who has a subordinate uid range (/etc/subuid) can run processes under many
 * uids in a user namespace of her own; every one of those uids is still that
 * one user, the namespace's owner. A user namespace root made (a rootful
 * container with user namespaces, a PrivateUsers=yes service, a Kubernetes
 * pod with hostUsers: false) is not root's: whoever root gave it to controls
 * every uid mapped there, so the namespace itself is the principal, with a
 * share of its own. Bounds (connections, the request budget, workers,
 * sessions, dumps, runtimes, port backlogs, startup traces) are kept per
 * charge; who the peer IS, for the policy, stays its own uid.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/types.h>
#include <linux/nsfs.h>

/* Debian 12's headers (Linux 6.1) have no PIDFD_GET_USER_NAMESPACE yet: the kernel's value (6.11, linux/pidfd.h) */
#ifndef PIDFD_GET_USER_NAMESPACE
#define PIDFD_GET_USER_NAMESPACE _IO(0xFF, 9)
#endif

/* A peer whose user namespace could not be told (its process is gone, it is
 * outside the agent's namespace): all of them share this one charge. */
#define USERNS_CHARGE_UNKNOWN ((uid_t)-3)

/*
 * A user namespace root made is charged as itself: its nsfs inode number,
 * which the kernel hands out from 0xF0000000 up (PROC_DYNAMIC_FIRST) and
 * never gives two namespaces that live at once. No user is given a uid in
 * this range; the values at its top are kept for the agent's own charges
 * (USERNS_CHARGE_UNKNOWN, the collector's, the startup traces'), and a
 * namespace whose number falls outside it is charged USERNS_CHARGE_UNKNOWN.
 */
#define USERNS_CHARGE_NAMESPACE_FIRST ((uid_t)0xF0000000U)
#define USERNS_CHARGE_NAMESPACE_END ((uid_t)0xFFFFFF00U)

/* Whether @charged names a user namespace (its inode number), not a uid. */
static inline bool userns_charge_is_namespace(uid_t charged) {
        return charged >= USERNS_CHARGE_NAMESPACE_FIRST && charged < USERNS_CHARGE_NAMESPACE_END;
}

/**
 * userns_charged_uid() - whom @uid's peer process counts against
 * @pidfd: the peer's pidfd (SO_PEERPIDFD), or negative when the kernel gave none
 * @pid: the peer's pid in the agent's pid namespace (0: not visible)
 * @uid: its uid (SO_PEERCRED)
 *
 * In the agent's own user namespace: @uid itself (root is root only there).
 * In a namespace below it, the outermost one below the agent's decides,
 * found by walking NS_GET_PARENT up from the process's namespace: when a user
 * other than root owns it (NS_GET_OWNER_UID), that owner, whatever uid the
 * peer runs as there or in namespaces nested in it; when root owns it, the
 * namespace itself (its inode number, see USERNS_CHARGE_NAMESPACE_FIRST),
 * never root, even for a peer mapped to uid 0. The namespace is read from
 * the pidfd (PIDFD_GET_USER_NAMESPACE, Linux 6.11), else from
 * /proc/PID/ns/user, trusted only when the pidfd says the process still
 * lives after the open (so the pid was not reused); without a pidfd
 * (sockopt_get_peer_pidfd() gives one on every kernel while the process
 * lives) the process counts as gone. Only nsfs and pidfs ioctls: nothing
 * here blocks.
 *
 * *@ret_userns (when not NULL): the inode of the peer's own namespace, for userns_cache_learn().
 *
 * Return: 0 with *@ret, or a negative errno (-ESRCH: the process is gone;
 * -EPERM: its namespace is not below the agent's): the caller charges
 * USERNS_CHARGE_UNKNOWN then.
 */
int userns_charged_uid(int pidfd, pid_t pid, uid_t uid, uid_t *ret, uint64_t *ret_userns);

/*
 * A peer refused again and again costs the loop its identification each time (its pidfd, the walk
 * up its namespaces). Whom a peer in the agent's own namespace is charged to, its uid, can be told
 * from the name of its namespace, /proc/PID/ns/user (one readlink, no fd), and that of a peer in a
 * namespace below from a cache the agent fills as it refuses such peers: for USERNS_CACHE_USEC, at
 * most USERNS_CACHE_MAX namespaces, each held open meanwhile, so that its inode number names no
 * other. What it answers is only ever used to refuse at once a peer whose charge is over its
 * limits already: a pid reused since connect() (the client gone) is the one way to a wrong answer,
 * and it costs nobody but that gone client.
 */
#define USERNS_CACHE_MAX 64
#define USERNS_CACHE_USEC (1000 * 1000ULL)

typedef struct UsernsCache UsernsCache;

UsernsCache *userns_cache_new(void);
UsernsCache *userns_cache_free(UsernsCache *c);

/*
 * userns_cache_learn() - remember that peers of the namespace @inode, as @pid's pidfd showed it
 * (userns_charged_uid()'s *ret_userns), are charged to @charged
 *
 * Nothing for the agent's own namespace. @pid's namespace is opened and kept only when it is @inode.
 *
 * Return: 0, -ESRCH (@pid is gone, or another process has it now), or another negative errno.
 */
int userns_cache_learn(UsernsCache *c, pid_t pid, uint64_t inode, uid_t charged, uint64_t now_usec);

/*
 * userns_cache_charge() - whom the peer @pid, of @uid (SO_PEERCRED), is charged to, from its
 * namespace's name: @uid in the agent's own, else what the cache learned
 *
 * Return: 0 with *@ret; -ENOENT when the cache does not know the namespace, or another negative
 * errno: the caller identifies the peer as ever then.
 */
int userns_cache_charge(UsernsCache *c, pid_t pid, uid_t uid, uint64_t now_usec, uid_t *ret);

/* Closes what is older than USERNS_CACHE_USEC. */
void userns_cache_expire(UsernsCache *c, uint64_t now_usec);
