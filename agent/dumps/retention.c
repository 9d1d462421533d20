/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Retention of dump_dir, the loop's side: when passes run, and their records (retention.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/audit/audit.h"
#include "agent/loop/broker-state.h"
#include "common/cleanup.h"
#include "agent/workers/jobs.h"
#include "agent/dumps/retention-pass.h"
#include "agent/dumps/retention-plan.h"
#include "agent/dumps/retention.h"
#include "agent/support/test-hooks.h"
#include "common/text.h"

/* A pass that could not run (no worker yet, or none free) is tried again this much later. */
#define RETENTION_RETRY_USEC (1000000ULL)

struct RetentionWaiter {
        Retention *retention;
        RetentionWaiter *next;
        RetentionAsk ask;
        RetentionDone done;
        void *userdata;
};

struct Retention {
        Broker *broker;
        sd_event_source *timer;         /* the next pass */
        JobCall job;                    /* the pass running: job.job is NULL when none */
        int control_fd;                 /* its control socket, the agent's end */
        sd_event_source *control_source;
        RetentionWaiter *served;        /* those the pass running serves */
        RetentionWaiter *waiting;       /* those the next one will */
        RetentionWaiter *telling;       /* those a pass that ended is telling, one after the other */
        RetentionAsk ask;               /* the pass running's room, and whom it is for */
        bool said_broken;               /* the log says no pass runs under a broken policy */
        bool policy_changed;            /* since the pass running began: another follows it at once */
};

static uint64_t now_usec(const Retention *r) {
        uint64_t now = 0;

        (void)sd_event_now(r->broker->event, CLOCK_MONOTONIC, &now);
        return now;
}

static void schedule(Retention *r, uint64_t delay_usec) {
        if (sd_event_source_set_time(r->timer, now_usec(r) + delay_usec) >= 0)
                (void)sd_event_source_set_enabled(r->timer, SD_EVENT_ONESHOT);
}

/* "3.2 days old, max_age 3.0 days" and the like: what the rule saw, for the record. */
static void detail_of(const RetentionNote *n, char *buf, size_t size) {
        char limit[32], total[32];

        switch ((RetentionReason)n->reason) {
        case RETENTION_MAX_AGE:
                text_format_span(n->limit, limit, sizeof(limit));
                snprintf(buf, size, "older than max_age (%s)", limit);
                return;
        case RETENTION_MAX_FILES:
                snprintf(buf, size, "%llu files, max_files %llu", (unsigned long long)n->total,
                         (unsigned long long)n->limit);
                return;
        case RETENTION_USER_BUDGET:
        case RETENTION_TABLE_BUDGET:
                text_format_size(n->limit, limit, sizeof(limit));
                text_format_size(n->total, total, sizeof(total));
                snprintf(buf, size, "%s take %s, %s %s; the oldest go first, the newest stays",
                         n->reason == RETENTION_USER_BUDGET ? "the user's dumps" : "the table's artifacts", total,
                         n->reason == RETENTION_USER_BUDGET ? "max_use_per_user" : "its max_use", limit);
                return;
        case RETENTION_MAKE_ROOM:
                text_format_size(n->limit, limit, sizeof(limit));
                text_format_size(n->total, total, sizeof(total));
                snprintf(buf, size, "the table yields to dumps: %s to free, %s freed before it", limit, total);
                return;
        default:
                snprintf(buf, size, "unknown rule");
        }
}

/* Records one removal the worker is about to make (or failed to). Return: whether it was recorded. */
static bool record(Retention *r, const RetentionNote *n) {
        char detail[160];
        bool room = n->reason == RETENTION_MAKE_ROOM;

        detail_of(n, detail, sizeof(detail));
        return audit_log_retention(r->broker->config.audit_sink, &(AuditRetentionEvent){
                .event = n->kind == RETENTION_NOTE_REMOVING ? "removing" : "not-removed",
                .reason = retention_reason_to_string(n->reason), .detail = detail, .path = n->path,
                .size = n->bytes, .age_usec = n->age_usec, .dump_type = n->dump_type[0] ? n->dump_type : NULL,
                .requester = n->requester == UINT32_MAX ? (uid_t)-1 : n->requester,
                .origin = n->origin[0] ? n->origin : NULL, .table = n->origin[0] ? n->table : NULL,
                .target_pid = n->target_pid, .target_uid = n->target_uid == UINT32_MAX ? (uid_t)-1 : n->target_uid,
                .for_request_id = room ? r->ask.request_id : 0, .for_uid = r->ask.requester,
                .error_errno = n->kind == RETENTION_NOTE_NOT_REMOVED ? n->error : 0 }) == 0;
}

/*
 * The worker's notes: each removal is recorded, and only then made (RETENTION_GO). @running: the
 * worker still waits for answers; once its job has ended, a removal it asked about was never made
 * (it waits for the answer first), so only the failures it told of are recorded.
 */
static void read_notes(Retention *r, bool running) {
        RetentionNote n;

        while (r->control_fd >= 0 && recv(r->control_fd, &n, sizeof(n), MSG_DONTWAIT) == (ssize_t)sizeof(n)) {
                bool recorded;

                if (!running && n.kind == RETENTION_NOTE_REMOVING)
                        continue;
                n.path[sizeof(n.path) - 1] = n.origin[sizeof(n.origin) - 1] = n.table[sizeof(n.table) - 1] =
                        n.dump_type[sizeof(n.dump_type) - 1] = '\0';
                recorded = record(r, &n);
                if (n.kind != RETENTION_NOTE_REMOVING)
                        continue;
                /* not recorded, not removed: the pass stops here, and the next one tries again */
                if (!recorded)
                        fprintf(stderr, "dsagent: retention: the audit output takes no records now: %s and what else "
                                "is due stay until it does\n", n.path);
                (void)send(r->control_fd, &(char){ recorded ? RETENTION_GO : RETENTION_STOP }, 1,
                           MSG_DONTWAIT | MSG_NOSIGNAL);
        }
}

static int on_control(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        read_notes(userdata, true);
        return 0;
}

static void pass_close(Retention *r) {
        r->control_source = sd_event_source_disable_unref(r->control_source);
        r->control_fd = safe_close(r->control_fd);
}

/*
 * Tells every waiter of @list, each once. Each is taken off the list before its callback, and the
 * rest wait in r->telling, where retention_waiter_cancel() finds them: a callback may ask again, or
 * free what another waiter was for.
 */
static void tell_waiters(Retention *r, RetentionWaiter *list, int error, uint64_t removed, uint64_t room_left) {
        r->telling = list;
        while (r->telling) {
                RetentionWaiter *w = r->telling;

                r->telling = w->next;
                w->done(w->userdata, error, removed, room_left);
                free(w);
        }
}

static void pass_done(void *userdata, int error, const RetentionPassResult *res, const char *why) {
        Retention *r = userdata;
        RetentionWaiter *served = TAKE_PTR(r->served);
        bool again = r->waiting || r->policy_changed || (res && res->more && !res->stopped);

        read_notes(r, false); /* what it said before it ended (a failed removal's note is not waited for) */
        pass_close(r);
        r->policy_changed = false;
        if (test_hook_retention_notes())
                test_hook_note("retention: a pass ended: %" PRIu32 " files removed", res ? res->removed : 0);
        if (error != 0)
                fprintf(stderr, "dsagent: retention: the pass over dump_dir failed: %s\n",
                        why ? why : error < 0 ? strerror(-error) : "its worker did not finish");
        schedule(r, again ? 0 : test_hook_retention_period(RETENTION_PERIOD_USEC));
        tell_waiters(r, served, error, res ? res->bytes : 0, res ? res->room_left : r->ask.room);
}

/* Starts a pass for those waiting now. Return: 0, or a negative errno (the caller says so to them). */
static int pass_start(Retention *r) {
        int sv[2], k;

        r->ask = (RetentionAsk){};
        for (RetentionWaiter *w = r->waiting; w; w = w->next)
                if (w->ask.room > 0) {
                        if (r->ask.room == 0)
                                r->ask = w->ask; /* the records name the first dump it is for */
                        else
                                r->ask.room += w->ask.room;
                }
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        r->control_fd = sv[0];
        k = sd_event_add_io(r->broker->event, &r->control_source, r->control_fd, EPOLLIN, on_control, r);
        if (k >= 0)
                k = jobs_retain(r->broker, sv[1], r->ask.room, pass_done, r, &r->job);
        safe_close(sv[1]); /* the worker holds its own copy */
        if (k != 0) {
                pass_close(r);
                return k < 0 ? k : -EBUSY;
        }
        r->served = TAKE_PTR(r->waiting);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Retention *r = userdata;
        int k;

        if (r->job.job)
                return 0; /* its end schedules the next */
        if (!r->broker->workers) {
                schedule(r, RETENTION_RETRY_USEC);
                return 0;
        }
        /*
         * Under a broken policy the agent runs on the built-in settings, whose max_age and dump_dir
         * are not what the administrator wrote (who may keep files longer, elsewhere): nothing is
         * removed until a policy loads. What waits goes on without a pass.
         */
        if (r->broker->policy_problem) {
                if (!r->said_broken)
                        fprintf(stderr, "dsagent: retention: the policy is broken: nothing is removed from a "
                                "dump_dir until one loads\n");
                r->said_broken = true;
                tell_waiters(r, TAKE_PTR(r->waiting), -ENOENT, 0, 0);
                schedule(r, test_hook_retention_period(RETENTION_PERIOD_USEC));
                return 0;
        }
        r->said_broken = false;
        k = pass_start(r);
        if (k < 0) {
                /* those waiting go on without it: a dump is still bound by the guards */
                tell_waiters(r, TAKE_PTR(r->waiting), k, 0, 0);
                schedule(r, RETENTION_RETRY_USEC);
        }
        return 0;
}

int retention_new(Broker *b, Retention **ret) {
        Retention *r = calloc(1, sizeof(Retention));
        int k;

        if (!r)
                return -ENOMEM;
        *r = (Retention){ .broker = b, .control_fd = -EBADF };
        /* the first pass as soon as there are workers */
        k = sd_event_add_time(b->event, &r->timer, CLOCK_MONOTONIC, 0, 0, on_timer, r);
        if (k < 0) {
                free(r);
                return k;
        }
        *ret = r;
        return 0;
}

static void free_list(RetentionWaiter *list) {
        while (list) {
                RetentionWaiter *w = list;

                list = w->next;
                free(w);
        }
}

Retention *retention_free(Retention *r) {
        if (!r)
                return NULL;
        if (r->job.job)
                worker_job_cancel(r->job.job); /* its worker is killed: what it asked about stays */
        pass_close(r);
        sd_event_source_disable_unref(r->timer);
        free_list(r->served);
        free_list(r->waiting);
        free_list(r->telling);
        free(r);
        return NULL;
}

void retention_policy_changed(Retention *r) {
        if (!r)
                return;
        if (r->job.job)
                r->policy_changed = true; /* the pass running read the policy before: the next one reads this */
        else
                schedule(r, 0);
}

int retention_ask(Retention *r, const RetentionAsk *ask, RetentionDone done, void *userdata, RetentionWaiter **ret) {
        RetentionWaiter *w = calloc(1, sizeof(RetentionWaiter));

        if (!w)
                return -ENOMEM;
        *w = (RetentionWaiter){ .retention = r, .ask = *ask, .done = done, .userdata = userdata };
        if (r->job.job && ask->room == 0) {
                w->next = r->served; /* what the pass running finds serves it as well as a fresh one */
                r->served = w;
        } else {
                w->next = r->waiting;
                r->waiting = w;
                if (!r->job.job)
                        schedule(r, 0);
        }
        *ret = w;
        return 0;
}

static bool unlink_from(RetentionWaiter **list, RetentionWaiter *w) {
        for (RetentionWaiter **i = list; *i; i = &(*i)->next)
                if (*i == w) {
                        *i = w->next;
                        return true;
                }
        return false;
}

RetentionWaiter *retention_waiter_cancel(RetentionWaiter *w) {
        if (w && (unlink_from(&w->retention->served, w) || unlink_from(&w->retention->waiting, w) ||
                  unlink_from(&w->retention->telling, w)))
                free(w);
        return NULL;
}
