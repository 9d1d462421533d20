/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Targets opened lately, so that a burst of requests about one process costs
 * one worker job rather than one each (bench/README.md: the job is half of an
 * info request's time).
 *
 * An entry keeps a reference to a Target a worker opened whole: its pidfd, its
 * /proc/PID fd, the runtime's socket it found, and the facts the policy decides
 * on. A later request for the same pid, within the policy's [agent]
 * target_cache_ms, shares it instead of running a job, once the loop has checked, without reading
 * any of the process's files, that what it can see has not moved:
 *
 *  - the pidfd says the process still runs, so the pid still names it (a pid
 *    is given out again only after its process has been reaped);
 *  - fstat() of the pinned /proc/PID shows the owner the kernel gives that
 *    directory now: the effective ids of a dumpable process, root's for any
 *    other. A change of effective ids (setresuid(), a set-user-ID exec) or of
 *    dumpability changes it, and the entry is dropped.
 *
 * What can change unseen within that time is the process's own to change or
 * root's: its name and command line, its cgroup (moved by root, or within a
 * subtree delegated to its owner), its executable. An exec closes the old
 * runtime's listening socket, the one the entry holds, so the next connection
 * fails and request_reply_target_error() drops the entry. SECURITY.md, "Stale
 * target facts", has the test for each check.
 *
 * Only the loop uses this, and nothing here blocks: poll() of a pidfd, fstat()
 * of an fd already open.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "target.h"

/* Entries at most; each holds three fds (pidfd, /proc/PID, socket): broker.c counts them. */
#define TARGET_CACHE_MAX 8
#define TARGET_CACHE_FDS (3 * TARGET_CACHE_MAX)

typedef struct TargetCache TargetCache;

TargetCache *target_cache_new(void);
TargetCache *target_cache_free(TargetCache *c);

/*
 * target_cache_put() - remember @t, opened at @now_usec (CLOCK_MONOTONIC)
 *
 * Only a target whose socket was found is kept, by a reference of its own. An entry for the same pid is replaced, else the oldest.
 * Failing to remember costs nothing but a later job, so nothing is returned.
 */
void target_cache_put(TargetCache *c, Target *t, uint64_t now_usec);

/*
 * target_cache_get() - the target last opened as @pid, if it still holds
 *
 * It holds when it was opened less than @ttl_usec before @now_usec and the
 * checks above pass; an entry that fails them is dropped.
 *
 * Return: 0 with *@ret (a reference for the caller to drop) and *@ret_age_usec,
 * or -ENOENT when there is nothing to reuse: ask a worker.
 */
int target_cache_get(TargetCache *c, pid_t pid, uint64_t now_usec, uint64_t ttl_usec, Target **ret,
                     uint64_t *ret_age_usec);

/* Drops the entry for @pid, if any: its runtime did not answer as it should. */
void target_cache_forget(TargetCache *c, pid_t pid);

/* Drops every entry: the policy changed, and with it perhaps target_cache_ms. */
void target_cache_clear(TargetCache *c);
