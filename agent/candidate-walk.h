/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ps's walk of /proc (discover.h), shared by every listing waiting for one.
 *
 * A walk costs what the host runs, whoever asks, so at most one runs at a
 * time, host-wide: listings that ask while it runs wait, and the next walk,
 * begun after all of them asked, serves them all. No listing is answered
 * from a walk that began before it asked. A walk looks for the union of its
 * listings' filters; each listing keeps what its own filter passes, by the
 * owner of each find's /proc entry. So N users looping ps cost one walk at
 * a time (before: up to two per user at once), and the CPUs stay with
 * everyone else's short requests. What a walk reads cannot be held up by
 * any user (/proc's own files of each process, and its network namespace's
 * table of sockets), so sharing one worker's walk shares no user's stall.
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "request.h"

typedef struct CandidateWalks CandidateWalks;
typedef struct CandidateWaiter CandidateWaiter;

/* @pids (@n of them, in pid order) are the candidates @req may see; NULL with @r non-zero (JobDone's codes). */
typedef void (*CandidateWalkDone)(Request *req, int r, const pid_t *pids, size_t n);

int candidate_walks_new(Broker *b, CandidateWalks **ret);
/* Cancels the walk under way; the waiters' callbacks are not called. */
CandidateWalks *candidate_walks_free(CandidateWalks *w);

/**
 * candidate_walks_join() - have @req's candidates from the next walk
 *
 * @req's filter is policy_visible_uids() of its policy and requester, taken now. @done runs from
 * the event loop (never from inside this call), once, unless candidate_waiter_cancel() comes first;
 * the waiter is freed when @done runs.
 *
 * Return: 0 with *@ret_waiter, or -ENOMEM.
 */
int candidate_walks_join(CandidateWalks *w, Request *req, CandidateWalkDone done, CandidateWaiter **ret_waiter);

/* @req no longer waits (it ended): its callback will not run. NULL is fine. Returns NULL. */
CandidateWaiter *candidate_waiter_cancel(CandidateWaiter *waiter);
