/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Targets opened lately, so that a burst of requests about one process costs
 * one worker job rather than one each (bench/README.md: the job is half of an
 * info request's time).
 *
 * An entry keeps a reference to a Target a worker opened whole: its pidfd, its
 * /proc/PID fd, the runtime's socket it found, and the facts the policy decides
 * on. A later request for the same pid, within the policy's [agent]
 * target_cache_ms, shares it instead of running a job, once the loop has
 * checked that what decides who may do what to it has not moved:
 *
 *  - the pidfd says the process still runs, so the pid still names it (a pid
 *    is given out again only after its process has been reaped);
 *  - the owners of /proc/PID and of its status file are what they were: the
 *    kernel gives the directory the process's effective uid and gid, always,
 *    and the files in it the same while the process is dumpable and root's
 *    otherwise, so a change of effective ids (setresuid(), a set-user-ID
 *    exec) or of dumpability shows;
 *  - its status file, read afresh through the pinned fd, shows the very ids
 *    and groups of the reading: real, effective, saved and filesystem uids
 *    and gids, and the supplementary groups (procfs_same_credentials()). A
 *    process with CAP_SETUID that takes root as its saved uid
 *    (setresuid(-1, -1, 0): "Uid: 987 987 0 987") stays dumpable and its
 *    files its user's; only this line shows it. A reading whose groups were
 *    not all kept (more than PROCFS_GROUPS_MAX) is not kept at all.
 *
 * Reading the status file is the one read of the process here, and the loop
 * may do it: the kernel fills it from the task's credentials and counters,
 * under RCU and spinlocks held for a few instructions, never the process's
 * mmap lock or exec lock, which a process can hold as long as it likes
 * (target_read_credentials()). The files that do take them, cmdline and
 * environ, a worker reads. Moving this check to a worker (JOB_RECHECK) would
 * cost every request the job the cache is there to save, for nothing the
 * loop could wait on.
 *
 * What can change unseen within that time is the process's own to change or
 * root's: its name and command line, its cgroup (moved by root, or within a
 * subtree delegated to its owner), its executable. A rule may select a
 * process by its name or its cgroup, so when one does, and for a dump, the
 * caller has a worker read those again through the entry's pinned fds before
 * it decides (commands.c, jobs_recheck_target()). An exec closes the old
 * runtime's listening socket, the one the entry holds, so the next connection
 * fails; any request about it that fails drops the entry (request.c). A
 * runtime registered on a port is never served from here: ports.c compares
 * its executable afresh. A dump's check of changed credentials reads the
 * status file again when the dump is whole (target_changed_credentials()),
 * whether its reading came from here or not. SECURITY.md, "Stale target
 * facts", has the tests.
 *
 * Only the loop uses this, and nothing here waits: poll() of a pidfd, fstat()
 * of /proc/PID, a lookup in it and a read of its status file through the fd
 * already open. A timer lets go of each entry's fds when its time is up.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "agent/targets/target.h"

/* Entries at most; each holds three fds (pidfd, /proc/PID, socket): broker.c counts them. */
#define TARGET_CACHE_MAX 8
#define TARGET_CACHE_FDS (3 * TARGET_CACHE_MAX)

typedef struct TargetCache TargetCache;

/* Return: 0 or a negative errno. */
int target_cache_new(sd_event *event, TargetCache **ret);
TargetCache *target_cache_free(TargetCache *c);

/*
 * target_cache_put() - remember @t, opened at @now_usec (CLOCK_MONOTONIC), for @ttl_usec
 *
 * Only a target whose socket was found is kept, by a reference of its own,
 * and nothing when @ttl_usec is 0. An entry for the same pid is replaced, else the oldest.
 * Failing to remember costs nothing but a later job, so nothing is returned.
 */
void target_cache_put(TargetCache *c, Target *t, uint64_t now_usec, uint64_t ttl_usec);

/*
 * target_cache_get() - the target last opened as @pid, if it still holds
 *
 * It holds until the time it was put for, while the checks above pass; an
 * entry that fails them is dropped.
 *
 * Return: 0 with *@ret (a reference for the caller to drop) and *@ret_age_usec,
 * or -ENOENT when there is nothing to reuse: ask a worker.
 */
int target_cache_get(TargetCache *c, pid_t pid, uint64_t now_usec, Target **ret, uint64_t *ret_age_usec);

/* Drops the entry for @pid, if any: a request about it failed. */
void target_cache_forget(TargetCache *c, pid_t pid);

/* Drops every entry: the policy changed, and with it perhaps target_cache_ms. */
void target_cache_clear(TargetCache *c);
