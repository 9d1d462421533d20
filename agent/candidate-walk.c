/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>

#include "broker.h"
#include "candidate-walk.h"
#include "cleanup.h"
#include "decision.h"
#include "discover.h"
#include "jobs.h"

struct CandidateWaiter {
        CandidateWalks *walks;
        CandidateWaiter **list;         /* the list it is on: waiting, walking or being answered */
        CandidateWaiter *prev, *next;
        Request *req;
        CandidateWalkDone done;
        bool any_uid;                   /* its own filter (discover.h) */
        size_t n_uids;
        uid_t uids[JOBS_WALK_UIDS_MAX];
};

struct CandidateWalks {
        Broker *broker;
        sd_event_source *start;         /* begins the next walk, from the loop */
        JobCall call;                   /* the walk under way, while call.job is set */
        CandidateWaiter *waiting;       /* for the next walk */
        CandidateWaiter *walking;       /* served by the walk under way */
        CandidateWaiter *answering;     /* taken off walking, their callbacks running */
};

static void waiter_unlink(CandidateWaiter *x) {
        if (x->prev)
                x->prev->next = x->next;
        else
                *x->list = x->next;
        if (x->next)
                x->next->prev = x->prev;
        x->prev = x->next = NULL;
        x->list = NULL;
}

static void waiter_push(CandidateWaiter **list, CandidateWaiter *x) {
        x->list = list;
        x->prev = NULL;
        x->next = *list;
        if (*list)
                (*list)->prev = x;
        *list = x;
}

static void walks_schedule(CandidateWalks *w) {
        if (w->waiting && !w->call.job)
                (void)sd_event_source_set_enabled(w->start, SD_EVENT_ONESHOT);
}

/* Answers every waiter of the walk that ended: each gets what its own filter passes. */
static void walk_answer(CandidateWalks *w, int r, const DiscoverCandidate *found, size_t n) {
        _cleanup_free_ pid_t *pids = n > 0 ? malloc(n * sizeof(pid_t)) : NULL;

        if (n > 0 && !pids && r == 0)
                r = -ENOMEM;
        /* answered from a list of their own: a callback may end any request, and with it its waiter */
        while (w->walking) {
                CandidateWaiter *x = w->walking;
                waiter_unlink(x);
                waiter_push(&w->answering, x);
        }
        while (w->answering) {
                CandidateWaiter *x = w->answering;
                DiscoverFilter f = { .any_uid = x->any_uid, .uids = x->uids, .n_uids = x->n_uids };
                CandidateWalkDone done = x->done;
                Request *req = x->req;
                size_t kept = 0;

                waiter_unlink(x);
                free(x);
                for (size_t i = 0; r == 0 && i < n; i++)
                        if (discover_filter_allows(&f, found[i].owner))
                                pids[kept++] = found[i].pid;
                done(req, r, r == 0 ? pids : NULL, kept);
        }
        walks_schedule(w);
}

static void walk_done(void *userdata, int r, const DiscoverCandidate *found, size_t n) {
        walk_answer(userdata, r, found, n);
}

/* Widens @walk's filter to pass what @x's passes; past JOBS_WALK_UIDS_MAX users, anybody's. */
static void filter_add(JobWalk *walk, const CandidateWaiter *x) {
        walk->any_uid = walk->any_uid || x->any_uid;
        for (size_t i = 0; i < x->n_uids && !walk->any_uid; i++) {
                bool have = false;
                for (size_t k = 0; k < walk->n_uids && !have; k++)
                        have = walk->uids[k] == x->uids[i];
                if (have)
                        continue;
                if (walk->n_uids == JOBS_WALK_UIDS_MAX)
                        walk->any_uid = true;
                else
                        walk->uids[walk->n_uids++] = x->uids[i];
        }
}

static int on_start(sd_event_source *s, void *userdata) {
        CandidateWalks *w = userdata;
        _cleanup_free_ JobWalk *walk = calloc(1, sizeof(*walk));
        CandidateWaiter *next;
        int r;

        if (w->call.job || !w->waiting)
                return 0;
        if (!walk) {
                walks_schedule(w); /* try again next time around */
                return 0;
        }
        for (CandidateWaiter *x = w->waiting; x; x = next) {
                next = x->next;
                filter_add(walk, x);
                waiter_unlink(x);
                waiter_push(&w->walking, x);
        }
        r = jobs_walk_candidates(w->broker, walk, walk_done, w, &w->call);
        if (r != 0)
                walk_answer(w, r, NULL, 0);
        return 0;
}

int candidate_walks_new(Broker *b, CandidateWalks **ret) {
        CandidateWalks *w = calloc(1, sizeof(*w));
        int r;

        if (!w)
                return -ENOMEM;
        w->broker = b;
        r = sd_event_add_defer(b->event, &w->start, on_start, w);
        if (r >= 0)
                r = sd_event_source_set_enabled(w->start, SD_EVENT_OFF);
        if (r < 0) {
                candidate_walks_free(w);
                return r;
        }
        *ret = w;
        return 0;
}

static void waiters_free(CandidateWaiter **list) {
        while (*list) {
                CandidateWaiter *x = *list;
                waiter_unlink(x);
                free(x);
        }
}

CandidateWalks *candidate_walks_free(CandidateWalks *w) {
        if (!w)
                return NULL;
        worker_job_cancel(w->call.job);
        waiters_free(&w->waiting);
        waiters_free(&w->walking);
        waiters_free(&w->answering);
        sd_event_source_disable_unref(w->start);
        free(w);
        return NULL;
}

int candidate_walks_join(CandidateWalks *w, Request *req, CandidateWalkDone done, CandidateWaiter **ret_waiter) {
        PolicyRequester who = requester_of(req);
        CandidateWaiter *x = calloc(1, sizeof(*x));

        if (!x)
                return -ENOMEM;
        *x = (CandidateWaiter){ .walks = w, .req = req, .done = done };
        x->any_uid = policy_visible_uids(req->policy, &who, x->uids, JOBS_WALK_UIDS_MAX, &x->n_uids);
        waiter_push(&w->waiting, x);
        walks_schedule(w);
        *ret_waiter = x;
        return 0;
}

CandidateWaiter *candidate_waiter_cancel(CandidateWaiter *x) {
        CandidateWalks *w;

        if (!x)
                return NULL;
        w = x->walks;
        waiter_unlink(x);
        free(x);
        /* nobody wants the walk under way any more: its worker goes, and the next one can begin */
        if (!w->walking && w->call.job) {
                worker_job_cancel(w->call.job);
                w->call.job = NULL;
                walks_schedule(w);
        }
        return NULL;
}
