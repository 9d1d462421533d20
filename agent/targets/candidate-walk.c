/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ps's shared walks of /proc (candidate-walk.h): owns the walk groups and their waiters; the ps
 * command joins one, the broker owns them all.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/loop/broker-state.h"
#include "agent/targets/candidate-walk.h"
#include "common/cleanup.h"
#include "agent/decide/decision.h"
#include "agent/targets/discover.h"
#include "agent/workers/jobs.h"
#include "agent/support/test-hooks.h"

typedef struct WalkGroup WalkGroup;

struct CandidateWaiter {
        WalkGroup *group;
        CandidateWaiter **list;         /* the list it is on: its group's waiting, walking or answering */
        CandidateWaiter *prev, *next;
        Request *req;
        CandidateWalkDone done;
};

/* The listings that look for the same processes (one filter), and their walk. */
struct WalkGroup {
        CandidateWalks *walks;
        WalkGroup *prev, *next;
        JobWalk filter;                 /* what its walks look for (discover.h); uids sorted */
        JobCall call;                   /* the walk under way, while call.job is set */
        CandidateWaiter *waiting;       /* for the next walk */
        CandidateWaiter *walking;       /* served by the walk under way */
        CandidateWaiter *answering;     /* taken off walking, their callbacks running */
        bool in_answer;                 /* walk_answer() runs: the group stays, whoever leaves */
};

struct CandidateWalks {
        Broker *broker;
        sd_event_source *start;         /* begins the walks due, from the loop */
        WalkGroup *groups;
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

static bool group_idle(const WalkGroup *g) {
        return !g->waiting && !g->walking && !g->answering && !g->call.job && !g->in_answer;
}

/* A group nobody waits in and with no walk goes; false while it is in use. */
static bool group_free_if_idle(WalkGroup *g) {
        if (!group_idle(g))
                return false;
        if (g->prev)
                g->prev->next = g->next;
        else
                g->walks->groups = g->next;
        if (g->next)
                g->next->prev = g->prev;
        free(g);
        return true;
}

static void group_schedule(WalkGroup *g) {
        if (g->waiting && !g->call.job)
                (void)sd_event_source_set_enabled(g->walks->start, SD_EVENT_ONESHOT);
}

/* Answers every waiter of the walk that ended: each gets what the group's filter passes. */
static void walk_answer(WalkGroup *g, int r, const DiscoverCandidate *found, size_t n) {
        DiscoverFilter f = { .any_uid = g->filter.any_uid, .uids = g->filter.uids, .n_uids = g->filter.n_uids };
        _cleanup_free_ pid_t *pids = n > 0 ? malloc(n * sizeof(pid_t)) : NULL;
        size_t kept = 0;

        if (n > 0 && !pids && r == 0)
                r = -ENOMEM;
        for (size_t i = 0; r == 0 && i < n; i++)
                if (discover_filter_allows(&f, found[i].owner))
                        pids[kept++] = found[i].pid;
        /* answered from a list of their own: a callback may end any request, and with it its waiter */
        g->in_answer = true;
        while (g->walking) {
                CandidateWaiter *x = g->walking;
                waiter_unlink(x);
                waiter_push(&g->answering, x);
        }
        while (g->answering) {
                CandidateWaiter *x = g->answering;
                CandidateWalkDone done = x->done;
                Request *req = x->req;

                waiter_unlink(x);
                free(x);
                done(req, r, r == 0 ? pids : NULL, kept);
        }
        g->in_answer = false;
        group_schedule(g);
        (void)group_free_if_idle(g);
}

static void walk_done(void *userdata, int r, const DiscoverCandidate *found, size_t n) {
        walk_answer(userdata, r, found, n);
}

/*
 * Submits the walk as the job of one of its listings' users, the first to ask first: a user
 * whose worker queue is full (JOBS_E_WORKER) must not make the others' listings busy too.
 */
static int group_submit(WalkGroup *g, const JobWalk *walk) {
        int r = JOBS_E_WORKER;

        for (CandidateWaiter *x = g->walking; x && r == JOBS_E_WORKER; x = x->next) {
                uid_t owner = x->req->peer->charged_uid; /* whose worker share it costs (userns.h) */
                bool tried = false;

                for (CandidateWaiter *y = g->walking; y != x && !tried; y = y->next)
                        tried = y->req->peer->charged_uid == owner;
                if (tried)
                        continue;
                r = jobs_walk_candidates(g->walks->broker, walk, owner, walk_done, g, &g->call);
                test_hook_note("walk as uid %u: %s", (unsigned)owner, r == 0 ? "started" : "not started");
        }
        return r;
}

/* Starts the group's next walk, for all who wait; or answers them all, if it cannot start. */
static void group_start(WalkGroup *g) {
        int r;

        /* waiting has the newest first; walking gets them oldest first */
        while (g->waiting) {
                CandidateWaiter *x = g->waiting;
                waiter_unlink(x);
                waiter_push(&g->walking, x);
        }
        r = group_submit(g, &g->filter);
        if (r != 0)
                walk_answer(g, r, NULL, 0);
}

/* Every group with listings waiting and no walk under way starts one. */
static int on_start(sd_event_source *s, void *userdata) {
        CandidateWalks *w = userdata;

        for (;;) {
                WalkGroup *g = w->groups;

                /* from the top each time: a walk that cannot start is answered, and its group may go */
                while (g && (!g->waiting || g->call.job))
                        g = g->next;
                if (!g)
                        return 0;
                group_start(g);
        }
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
        while (w->groups) {
                WalkGroup *g = w->groups;
                worker_job_cancel(g->call.job);
                g->call.job = NULL;
                waiters_free(&g->waiting);
                waiters_free(&g->walking);
                waiters_free(&g->answering);
                w->groups = g->next;
                if (w->groups)
                        w->groups->prev = NULL;
                free(g);
        }
        sd_event_source_disable_unref(w->start);
        free(w);
        return NULL;
}

static int compare_uid(const void *a, const void *b) {
        uid_t x = *(const uid_t *)a, y = *(const uid_t *)b;
        return x < y ? -1 : x > y;
}

/* The group of listings with @req's filter, made if there is none yet. */
static WalkGroup *group_for(CandidateWalks *w, const Request *req) {
        PolicyRequester who = requester_of(req);
        JobWalk f = {};
        WalkGroup *g;

        f.any_uid = policy_visible_uids(req->policy, &who, f.uids, JOBS_WALK_UIDS_MAX, &f.n_uids);
        if (f.any_uid)
                f.n_uids = 0;
        qsort(f.uids, f.n_uids, sizeof(uid_t), compare_uid);
        for (g = w->groups; g; g = g->next)
                if (g->filter.any_uid == f.any_uid && g->filter.n_uids == f.n_uids &&
                    memcmp(g->filter.uids, f.uids, f.n_uids * sizeof(uid_t)) == 0)
                        return g;
        g = calloc(1, sizeof(*g));
        if (!g)
                return NULL;
        *g = (WalkGroup){ .walks = w, .filter = f, .next = w->groups };
        if (w->groups)
                w->groups->prev = g;
        w->groups = g;
        return g;
}

int candidate_walks_join(CandidateWalks *w, Request *req, CandidateWalkDone done, CandidateWaiter **ret_waiter) {
        CandidateWaiter *x = calloc(1, sizeof(*x));
        WalkGroup *g = x ? group_for(w, req) : NULL;

        if (!g) {
                free(x);
                return -ENOMEM;
        }
        *x = (CandidateWaiter){ .group = g, .req = req, .done = done };
        waiter_push(&g->waiting, x);
        test_hook_note("listing of uid %u waits for a walk", (unsigned)req->peer->uid);
        group_schedule(g);
        *ret_waiter = x;
        return 0;
}

CandidateWaiter *candidate_waiter_cancel(CandidateWaiter *x) {
        WalkGroup *g;

        if (!x)
                return NULL;
        g = x->group;
        waiter_unlink(x);
        free(x);
        /* nobody wants the walk under way any more: its worker goes, and the next one can begin */
        if (!g->walking && g->call.job) {
                worker_job_cancel(g->call.job);
                g->call.job = NULL;
                group_schedule(g);
        }
        (void)group_free_if_idle(g);
        return NULL;
}
