/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Whom a peer counts against: the uid the kernel vouches for. A user who has
 * a subordinate uid range (/etc/subuid) can run processes under many uids in
 * a user namespace of their own; every one of those uids is still that one
 * user, the namespace's owner. Bounds (connections, the request budget,
 * workers, sessions, dumps, runtimes, port backlogs, startup traces) are kept
 * per charged uid; who the peer IS, for the policy, stays its own uid.
 */
#pragma once

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

/**
 * userns_charged_uid() - the uid that @uid's peer process counts against
 * @pidfd: the peer's pidfd (SO_PEERPIDFD), or negative when the kernel gave none
 * @pid: the peer's pid in the agent's pid namespace (0: not visible)
 * @uid: its uid (SO_PEERCRED)
 *
 * In the agent's own user namespace: @uid itself. In a namespace below it:
 * the owner of the outermost one below the agent's (NS_GET_OWNER_UID), found
 * by walking NS_GET_PARENT up from the process's namespace. uid 0 is root
 * however it got there (only root can map uid 0 to itself) and is not looked
 * up. The namespace is read from the pidfd (PIDFD_GET_USER_NAMESPACE, Linux
 * 6.11), else from /proc/PID/ns/user, trusted only when the pidfd says the
 * process still lives after the open (so the pid was not reused); without a
 * pidfd (sockopt_get_peer_pidfd() gives one on every kernel while the process
 * lives) the process counts as gone. Only nsfs and pidfs ioctls: nothing here
 * blocks.
 *
 * Return: 0 with *@ret, or a negative errno (-ESRCH: the process is gone;
 * -EPERM: its namespace is not below the agent's): the caller charges
 * USERNS_CHARGE_UNKNOWN then.
 */
int userns_charged_uid(int pidfd, pid_t pid, uid_t uid, uid_t *ret);
