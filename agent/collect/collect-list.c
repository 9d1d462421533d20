/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl collect: the tables the caller reads, what they watch and how their actions ended (collect-list.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/loop/broker-state.h"
#include "common/cleanup.h"
#include "agent/collect/collect-list.h"
#include "agent/collect/collect-trigger.h"
#include "agent/collect/collect.h"
#include "agent/runtime/command-steps.h"
#include "agent/loop/connection.h"
#include "agent/crashes/crash-collect.h"

#define USEC_PER_SEC 1000000ULL

typedef struct ListState {
        Request *req;
        WireWriter *w;
        const PolicyCollect *table;
        uint64_t mono_now, real_now; /* to tell a firing's monotonic time on the wall clock */
        unsigned count;
        int r;
} ListState;

static bool in_ids(const PolicyIdList *l, uint32_t id) {
        for (size_t i = 0; i < l->n; i++)
                if (l->ids[i] == id)
                        return true;
        return false;
}

/* Root, or a reader of @table: the user, or one of the groups the kernel says the caller has. */
static bool reads_table(const PeerCreds *peer, const PolicyCollect *table) {
        if (peer->uid == 0 || in_ids(&table->reader_users, peer->uid) || in_ids(&table->reader_groups, peer->gid))
                return true;
        for (size_t i = 0; i < peer->n_groups; i++)
                if (in_ids(&table->reader_groups, peer->groups[i]))
                        return true;
        return false;
}

static const char *action_of(const PolicyCollect *table) {
        switch (table->then) {
        case POLICY_COLLECT_THEN_DUMP: return "dump";
        case POLICY_COLLECT_THEN_STACKS: return "stacks";
        case POLICY_COLLECT_THEN_COUNTERS: return "counters";
        case POLICY_COLLECT_THEN_GCDUMP: return "gcdump";
        case POLICY_COLLECT_THEN_CORE: return "core";
        case POLICY_COLLECT_THEN_EXCEPTIONS: return "exceptions";
        default: return "trace";
        }
}

/* A monotonic time as the wall clock told it, by the listing's two readings of now; 0 when it is not in the past. */
static uint64_t wall_of(const ListState *s, uint64_t mono_usec) {
        return mono_usec <= s->mono_now ? s->real_now - (s->mono_now - mono_usec) : 0;
}

/* How the action last ended: RESULT, RESULT_TIME, and PATH and SIZE of what it collected or REASON why it failed. */
static void put_result(const ListState *s, const CollectResult *result) {
        WireWriter *w = s->w;

        if (!result)
                return;
        wire_writer_put_string(w, WIRE_TAG_RESULT, result->failed ? "failed" : "collected");
        wire_writer_put_u64(w, WIRE_TAG_RESULT_TIME, wall_of(s, result->usec));
        if (result->failed)
                commands_put_untrusted_string(w, WIRE_TAG_REASON, result->text);
        else {
                wire_writer_put_string(w, WIRE_TAG_PATH, result->text);
                wire_writer_put_u64(w, WIRE_TAG_SIZE, result->size);
        }
}

static void put_process(const CollectWatchView *v, void *userdata) {
        ListState *s = userdata;
        WireWriter *w = s->w;

        if (s->r < 0)
                return;
        wire_writer_begin(w, WIRE_REPLY_COLLECT);
        wire_writer_put_string(w, WIRE_TAG_RULE, s->table->name);
        wire_writer_put_u32(w, WIRE_TAG_PID, (uint32_t)v->target->pid);
        wire_writer_put_u32(w, WIRE_TAG_UID, target_euid(v->target));
        wire_writer_put_string(w, WIRE_TAG_UNIT, v->target->unit);
        if (v->fired && v->last_fired_usec <= s->mono_now)
                wire_writer_put_u64(w, WIRE_TAG_TIME, wall_of(s, v->last_fired_usec));
        put_result(s, v->last_result);
        commands_put_untrusted_string(w, WIRE_TAG_NAME, v->target->name); /* cut to what room is left */
        s->r = connection_queue_frame(s->req->connection, w);
}

/* A core a crash table stored (crash-collect.h): the process that died, and when its core was stored. */
static void put_crash(const CrashCollectView *v, void *userdata) {
        ListState *s = userdata;
        WireWriter *w = s->w;

        if (s->r < 0)
                return;
        wire_writer_begin(w, WIRE_REPLY_COLLECT);
        wire_writer_put_string(w, WIRE_TAG_RULE, s->table->name);
        wire_writer_put_u32(w, WIRE_TAG_PID, v->pid);
        wire_writer_put_u32(w, WIRE_TAG_UID, v->uid);
        if (v->unit && wire_unit_name_is_valid(v->unit, strlen(v->unit)))
                wire_writer_put_string(w, WIRE_TAG_UNIT, v->unit);
        commands_put_untrusted_string(w, WIRE_TAG_NAME, v->name);
        wire_writer_put_u64(w, WIRE_TAG_TIME, v->stored_usec);
        s->r = connection_queue_frame(s->req->connection, w);
}

static int put_table(ListState *s, const Collector *c, const PolicyCollect *table) {
        char what[2 * POLICY_COLLECT_TEXT_MAX], removed[160];
        pid_t last_pid = 0;
        unsigned n_removed = collector_removed(c, table->name, &last_pid);
        const CollectResult *last = collector_last_result(c, table->name);

        collect_table_what(table, what, sizeof(what));
        wire_writer_begin(s->w, WIRE_REPLY_COLLECT);
        wire_writer_put_string(s->w, WIRE_TAG_RULE, table->name);
        wire_writer_put_string(s->w, WIRE_TAG_COMMAND, action_of(table));
        wire_writer_put_string(s->w, WIRE_TAG_PROVIDERS, what);
        commands_put_egress(s->w, table->egress);
        if (n_removed > 0) {
                /* no artifact without its record: those whose record could not be written were removed */
                snprintf(removed, sizeof(removed), "%u artifact%s removed: %s audit record could not be written "
                         "(the last of pid %d)", n_removed, n_removed == 1 ? "" : "s", n_removed == 1 ? "its" : "their",
                         (int)last_pid);
                wire_writer_put_string(s->w, WIRE_TAG_MESSAGE, removed);
        }
        if (last) {
                wire_writer_put_u32(s->w, WIRE_TAG_RESULT_PID, (uint32_t)last->pid);
                put_result(s, last);
        }
        s->r = connection_queue_frame(s->req->connection, s->w);
        s->table = table;
        s->count++;
        if (table->when == POLICY_COLLECT_WHEN_CRASH)
                crash_collector_visit(s->req->broker->crash_collector, table, put_crash, s);
        else
                collector_visit(c, table, put_process, s);
        return s->r;
}

void collect_list(Request *req) {
        _cleanup_free_ WireWriter *w = malloc(sizeof(*w));
        const Collector *c = req->broker->collector;
        const Policy *p = collector_policy(c);
        ListState s = { .req = req, .w = w };
        struct timespec now;

        if (!w) {
                request_reply_oom(req);
                return;
        }
        s.mono_now = request_now_usec(req);
        (void)clock_gettime(CLOCK_REALTIME, &now);
        s.real_now = (uint64_t)now.tv_sec * USEC_PER_SEC + (uint64_t)now.tv_nsec / 1000;
        for (size_t i = 0; p && i < p->n_collect && s.r >= 0; i++)
                if (reads_table(req->peer, &p->collect[i]))
                        (void)put_table(&s, c, &p->collect[i]);
        if (s.r < 0) {
                request_reply_errno(req, s.r, "cannot list the collection tables");
                return;
        }
        req->audit.have_result_count = true;
        req->audit.result_count = s.count;
        request_reply_done(req, NULL, "listed the collection tables the requester reads");
}
