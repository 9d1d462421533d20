/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Whether root answers for the cgroup a process is in: the names in a cgroup
 * path (a container id, a pod uid, what a targets.cgroups pattern matches)
 * are whatever the maker of each directory chose, and a user with a delegated
 * subtree (systemd's Delegate=yes, a user session's user@UID.service) makes
 * directories of any name there and moves their own processes into them. So
 * a path says who runs a process only where no one but root could have made
 * or filled any directory on it.
 */
#pragma once

#include <stdbool.h>

#include "agent/targets/procfs.h"

/* Where cgroupfs is, in the agent's mount namespace (relative to its cgroup namespace, as /proc/PID/cgroup) */
#define CGROUPFS_MOUNT "/sys/fs/cgroup"

/**
 * cgroupfs_root_vouches() - is every directory from @c's cgroup up to its hierarchy's root root's alone?
 *
 * Looks in @c's hierarchy (the unified one at /sys/fs/cgroup or
 * /sys/fs/cgroup/unified, or a v1 one at /sys/fs/cgroup/NAME) at each
 * directory of @c->cgroup, the root included: each, and the files that move
 * a process or a thread into it (cgroup.procs, and cgroup.threads or tasks
 * where there are), must be owned by root and writable by no other user and
 * no group but root's. A delegated subtree's are its user's.
 *
 * Each component is opened on its own below the last, O_PATH, never following
 * a symlink nor crossing a mount (openat2 RESOLVE_BENEATH|RESOLVE_NO_XDEV); a
 * "." or ".." component (a path outside the agent's cgroup namespace), an
 * empty or cut path, a hierarchy not mounted where it belongs, or any failed
 * lookup is a "no". cgroupfs is served by the kernel: no lookup waits on a
 * user, though it is file system I/O, for a worker rather than the loop.
 *
 * Return: true only when root vouches for the whole path.
 */
bool cgroupfs_root_vouches(const ProcContainer *c);
