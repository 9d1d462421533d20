/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ps's walk of /proc (discover.h), shared by the listings waiting for one.
 *
 * A walk costs what the host runs, whoever asks. Listings that look for the
 * same processes (the same filter: anybody's, as root's do, or one set of
 * users) form a group, and a group has at most one walk at a time: listings
 * that ask while it runs wait for the next one, which begins after all of
 * them asked and serves them all. No listing is answered from a walk that
 * began before it asked. So eight root ps loops cost one walk at a time, not
 * two each. Listings with different filters never share a walk: what one
 * user's listing makes a walk read (its own processes, namespaces and socket
 * tables) costs only the listings that look at that user's processes anyway.
 * A walk counts against the per-user worker limit of the first to ask (of
 * the next, if that user's worker queue is full).
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "agent/loop/request.h"

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
 * @req's filter, policy_visible_uids() of its policy and requester, is taken now. @done runs from
 * the event loop (never from inside this call), once, unless candidate_waiter_cancel() comes first;
 * the waiter is freed when @done runs.
 *
 * Return: 0 with *@ret_waiter, or -ENOMEM.
 */
int candidate_walks_join(CandidateWalks *w, Request *req, CandidateWalkDone done, CandidateWaiter **ret_waiter);

/* @req no longer waits (it ended): its callback will not run. NULL is fine. Returns NULL. */
CandidateWaiter *candidate_waiter_cancel(CandidateWaiter *waiter);
