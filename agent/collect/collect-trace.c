/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The actions of a [[collect]] table that record a session (collect-trace.h): their limits, which
 * session each asks for and for how long, and the table's record of the outcome. The recorder
 * (recorder.h) holds the session, its seat, its file and its jobs, and publishes the artifact.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent/broker.h"
#include "common/cleanup.h"
#include "agent/collect/collect-trace.h"
#include "agent/collect/collect.h"
#include "eventpipe/monitor-config.h"
#include "agent/runtime/recorder.h"
#include "eventpipe/session-config.h"
#include "agent/targets/target.h"
#include "agent/workers/worker-pool.h"

#define USEC_PER_SEC 1000000ULL
/* then.gcdump: how long the heap dump may take to come, as dsctl gcdump's window (session.c); the
 * session is stopped as soon as the dump's GC has ended. */
#define COLLECT_GCDUMP_WINDOW_USEC (30 * USEC_PER_SEC)
_Static_assert(COLLECT_TRACES_MAX <= BROKER_WORKERS_PER_USER, "every collection trace has a worker at once");

typedef struct CollectTrace CollectTrace;

struct CollectTraces {
        Broker *broker;
        CollectTrace *traces;
        unsigned n;
};

struct CollectTrace {
        CollectTraces *set;
        CollectTrace *next;
        const PolicyCollect *table; /* lives in the recorder's policy reference */
        Target *target;             /* a reference: the table's records of the outcome */
        uid_t owner;                /* the process's: its jobs and its session are charged to it */
        Recorder *recorder;
};

static void trace_free(CollectTrace *t) {
        for (CollectTrace **i = &t->set->traces; *i; i = &(*i)->next)
                if (*i == t) {
                        *i = t->next;
                        break;
                }
        assert(t->set->n > 0);
        t->set->n--;
        recorder_free(t->recorder);
        target_unref(t->target);
        free(t);
}

static RecorderOutput output_of(const PolicyCollect *table) {
        switch (table->then) {
        case POLICY_COLLECT_THEN_STACKS: return RECORDER_STACKS;
        case POLICY_COLLECT_THEN_COUNTERS: return RECORDER_COUNTERS;
        case POLICY_COLLECT_THEN_GCDUMP: return RECORDER_GCDUMP;
        case POLICY_COLLECT_THEN_EXCEPTIONS: return RECORDER_EXCEPTIONS;
        default: return RECORDER_NETTRACE;
        }
}

/* What the records and the file call the action. */
static const char *action_of(const PolicyCollect *table) {
        switch (table->then) {
        case POLICY_COLLECT_THEN_STACKS: return "stacks";
        case POLICY_COLLECT_THEN_COUNTERS: return "counters";
        case POLICY_COLLECT_THEN_GCDUMP: return "gcdump";
        case POLICY_COLLECT_THEN_EXCEPTIONS: return "exceptions";
        default: return "trace";
        }
}

/* How long the session runs before StopTracing: stacks take a moment's samples, as dsctl stacks does;
 * a heap dump is stopped once it is whole, and at the end of dsctl gcdump's window at the latest. */
static uint64_t duration_of(const Policy *policy, const PolicyCollect *table) {
        uint64_t most = policy->agent.max_session_duration_usec;

        if (table->then == POLICY_COLLECT_THEN_GCDUMP)
                return COLLECT_GCDUMP_WINDOW_USEC < most ? COLLECT_GCDUMP_WINDOW_USEC : most;
        return table->then == POLICY_COLLECT_THEN_STACKS ? MONITOR_STACKS_SAMPLE_USEC : table->duration_usec;
}

/* The session's providers: the table's profile, dsctl stacks', gcdump's, exceptions' or counters' (every second). */
static int config_of(const PolicyCollect *table, EventPipeConfig *ret) {
        const PolicyStringList *names = &table->counters_providers;
        char session_id[TEXT_HEX_ID_SIZE];
        int r;

        switch (table->then) {
        case POLICY_COLLECT_THEN_STACKS: return monitor_stacks_config(ret);
        case POLICY_COLLECT_THEN_GCDUMP: return monitor_gcdump_config(ret);
        case POLICY_COLLECT_THEN_EXCEPTIONS: return monitor_exceptions_config(ret);
        case POLICY_COLLECT_THEN_COUNTERS: break;
        default: return eventpipe_profile_config(table->trace_profile, ret);
        }
        r = collect_session_id(session_id);
        if (r < 0)
                return r;
        return eventpipe_counters_config((const char *const *)names->items, names->n, 1, session_id, ret);
}

/* The process's own socket, for the session's start and its stop. */
static int connect_runtime(void *userdata, int *ret_fd, const char **ret_why) {
        CollectTrace *t = userdata;
        int r = target_connect(t->target, ret_fd, ret_why);

        return r <= 0 ? r : -ECONNREFUSED; /* target.h's reason is in *ret_why */
}

/* The artifact's record could not be written: it was removed, and the table's record says so. */
static void removed(void *userdata, int r) {
        CollectTrace *t = userdata;

        collect_record_removed(t->set->broker, t->table, t->target, action_of(t->table), r,
                               recorder_audit_room(t->recorder));
}

/* The table's collect record of how the action ended: "collected", with the file, or "failed", with why. */
static void recorder_done(void *userdata, const RecorderResult *res) {
        CollectTrace *t = userdata;
        bool collected = res->end == RECORDER_COLLECTED;

        /* the flame graph's first: the table's last result (collector_note_result()) stays its trace's */
        if (res->end == RECORDER_COLLECTED && res->flame.asked)
                collect_record_result(t->set->broker, t->table, t->target, "flame",
                                      res->flame.collected ? "collected" : "failed", res->flame.text, res->flame.path,
                                      res->flame.bytes, recorder_audit_room(t->recorder));
        if (res->end != RECORDER_REMOVED) /* that was told already (removed()) */
                collect_record_result(t->set->broker, t->table, t->target, action_of(t->table),
                                      collected ? "collected" : "failed", res->text, collected ? res->path : NULL,
                                      collected ? res->bytes : 0, recorder_audit_room(t->recorder));
        trace_free(t);
}

static const RecorderOps recorder_ops = {
        .connect = connect_runtime,
        .removed = removed,
        .done = recorder_done,
};

/* Does a trace of one of @owner's processes run? */
static bool owner_traced(const CollectTraces *s, uid_t owner) {
        for (const CollectTrace *t = s->traces; t; t = t->next)
                if (t->owner == owner)
                        return true;
        return false;
}

/* The recorder's session for @t's table. Return: 0, or a reason in @why. */
static int record(CollectTrace *t, Policy *policy, const MonitorThrown *thrown, char *why, size_t why_size) {
        _cleanup_(eventpipe_config_done) EventPipeConfig config = EVENTPIPE_CONFIG_NULL;
        const PolicyCollect *table = t->table;
        RecorderSpec spec = {
                .origin = "collect",
                .rule = table->name,
                .kind = action_of(table),
                .profile = table->then == POLICY_COLLECT_THEN_TRACE ? table->trace_profile : NULL,
                .output = output_of(table),
                .policy = policy,
                .target = t->target,
                .owner = t->owner,
                .readers = { .users = table->reader_users.ids, .n_users = table->reader_users.n,
                             .groups = table->reader_groups.ids, .n_groups = table->reader_groups.n },
                .egress = table->egress,
                .config = &config,
                .duration_usec = duration_of(policy, table),
                .max_bytes = policy->agent.max_trace_size,
                /* the session's start and end, the file's record and the table's; the flame graph's two more */
                .audit_records = table->flame ? 6 : 4,
                .flame = table->then == POLICY_COLLECT_THEN_TRACE && table->flame,
                .thrown = table->then == POLICY_COLLECT_THEN_EXCEPTIONS ? thrown : NULL,
                .ops = &recorder_ops,
                .userdata = t,
        };

        if (config_of(table, &config) != 0) {
                snprintf(why, why_size, "cannot set up the session");
                return 1;
        }
        return recorder_start(t->set->broker, &spec, &t->recorder, why, why_size) == 0 ? 0 : 1;
}

int collect_trace_start(CollectTraces *s, Policy *policy, const PolicyCollect *table, Target *target, uid_t owner,
                        const MonitorThrown *thrown, char *why, size_t why_size) {
        CollectTrace *t;

        if (s->n >= COLLECT_TRACES_MAX) {
                snprintf(why, why_size, "not traced: %d collection traces run already", COLLECT_TRACES_MAX);
                return 1;
        }
        if (owner_traced(s, owner)) {
                snprintf(why, why_size, "not traced: a collection trace of a process of uid %u runs already",
                         (unsigned)owner);
                return 1;
        }
        t = calloc(1, sizeof(CollectTrace));
        if (!t) {
                snprintf(why, why_size, "not traced: out of memory");
                return 1;
        }
        *t = (CollectTrace){ .set = s, .next = s->traces, .table = table, .target = target_ref(target), .owner = owner };
        s->traces = t;
        s->n++;
        if (record(t, policy, thrown, why, why_size) != 0) {
                trace_free(t);
                return 1;
        }
        return 0;
}

CollectTraces *collect_traces_new(Broker *b) {
        CollectTraces *s = calloc(1, sizeof(CollectTraces));

        if (s)
                s->broker = b;
        return s;
}

CollectTraces *collect_traces_free(CollectTraces *s) {
        if (!s)
                return NULL;
        while (s->traces)
                /* a published trace whose flame graph is still drawn is told as collected (its done() frees it);
                 * the recorder records the end of a session still running */
                if (!s->traces->recorder || !recorder_end_at_exit(s->traces->recorder))
                        trace_free(s->traces);
        free(s);
        return NULL;
}
