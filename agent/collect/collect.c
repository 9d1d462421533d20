/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The [[collect]] watcher (collect.h): which processes a table covers, decided from cheap facts before
 * any capacity is spent; the watch slots and jobs shared in turn between the users whose processes
 * are covered; one counters session each; triggers.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "agent/audit/audit.h"
#include "agent/broker.h"
#include "common/cleanup.h"
#include "agent/collect/collect-dump.h"
#include "agent/collect/collect-ledger.h"
#include "agent/collect/collect-trace.h"
#include "agent/collect/collect-trigger.h"
#include "agent/collect/collect.h"
#include "agent/decide/decision.h"
#include "common/dotnet-ipc.h"
#include "agent/workers/jobs.h"
#include "eventpipe/monitor-config.h"
#include "eventpipe/monitor-events.h"
#include "eventpipe/nettrace.h"
#include "agent/runtime/runtime-call.h"
#include "eventpipe/session-config.h"
#include "agent/targets/target.h"
#include "agent/support/test-hooks.h"
#include "agent/loop/userns.h"
#include "agent/workers/worker-pool.h"

/* Its own charge is none of the others' (collect.h) */
_Static_assert(COLLECT_WATCHER_CHARGE != USERNS_CHARGE_UNKNOWN && COLLECT_WATCHER_CHARGE != (uid_t)-1,
               "the watcher's charge is its own");
#define COLLECT_PROVIDERS_MAX 16
#define COLLECT_BUFFER_MB 16

typedef enum WatchState {
        WATCH_OPENING,  /* a worker pins the process and finds its socket */
        WATCH_STARTING, /* CollectTracing sent */
        WATCH_WATCHING, /* the stream is read */
} WatchState;

typedef enum CandidateState {
        CANDIDATE_NEW,       /* listed by a walk: its facts are to be read */
        CANDIDATE_UNCOVERED, /* no table covers it: its facts are read again at due_usec */
        CANDIDATE_WAITING,   /* a table may cover it: in its owner's lane, for a watch from due_usec on */
        CANDIDATE_WATCHED,   /* its watch holds one of the slots */
} CandidateState;

typedef struct Watch Watch;
typedef struct Stopper Stopper;
typedef struct Candidate Candidate;
typedef struct Lane Lane;

/* A StopTracing on its way to a runtime whose watch has ended. */
struct Stopper {
        Collector *collector;
        Stopper *next;
        RuntimeCall *call;
};

/* A process the last walk listed: a socket named like a runtime's, for its own pid. */
struct Candidate {
        Collector *collector;
        Candidate *next;           /* in Collector.candidates */
        Candidate *lane_next;      /* WAITING: in its lane's queue, in the order they came */
        Lane *lane;                /* WAITING, WATCHED */
        pid_t pid;
        uint64_t start_time;       /* from its facts (0 before): with the pid, the process */
        uid_t owner;               /* whom its watch and its tables' work are charged to (userns.h) */
        uint64_t facts_hash;       /* of the facts its coverage was judged on */
        CandidateState state;
        uint64_t due_usec;
        bool seen;                 /* in the last walk */
        bool asked;                /* its facts are being read */
        bool by_name;              /* UNCOVERED by what only its pinned details tell (its name): judged again
                                    * once its facts change, or after COLLECT_NAME_RECHECK_USEC */
        Watch *watch;              /* WATCHED */
};

/* One owner's candidates waiting for a watch, and the watches they hold: served in turn with the others. */
struct Lane {
        Lane *next;                /* in Collector.lanes: the next to be served first */
        uid_t owner;
        Candidate *head, *tail;    /* WAITING */
        unsigned n_watches;        /* slots its candidates hold */
        unsigned n_opening;        /* of which a worker opens */
};

/* What dsctl collect says of a table beside its processes, by the table's name: its artifacts removed for want
 * of their record (collect_record_removed()), and how its action last ended, on whichever process. */
typedef struct CollectTableNote {
        struct CollectTableNote *next;
        char *table;
        unsigned removed;
        pid_t removed_pid;          /* the last one's process */
        CollectResult last_result;
} CollectTableNote;

/* What one batch of facts was asked about: a candidate, or a process the ledger keeps (to see it lives). */
typedef struct FactsAsked {
        pid_t pid;
        uint64_t start_time;       /* ledger: the process it keeps */
        bool ledger;
} FactsAsked;

struct Collector {
        Broker *broker;
        Policy *policy;            /* the one the watches were set up under */
        sd_event_source *timer;
        JobCall walk;
        JobCall facts;             /* one batch at a time */
        FactsAsked asked[JOBS_FACTS_MAX];
        size_t n_asked;
        Candidate *candidates;
        Lane *lanes;
        unsigned n_watches, n_opening;
        /* what the tables counted against their limits, per process and per table: it outlives the
         * watches, their re-binds and reloads, until the process is gone */
        CollectLedger *ledger;
        FactsAsked *ledger_due;    /* processes only the ledger keeps, to be looked at */
        size_t n_ledger_due;
        uint64_t ledger_looked_usec;
        CollectTraces *traces;     /* then.trace_profile actions running; they outlive watches and reloads */
        CollectDumps *dumps;       /* then.dump actions running; likewise */
        Stopper *stoppers;
        CollectTableNote *notes;
};

struct Watch {
        Collector *collector;
        Candidate *candidate;
        pid_t pid;
        uint64_t start_time;       /* of the process the triggers are about: with the pid, one process */
        WatchState state;
        JobCall open;
        Target *target;
        CollectTrigger *triggers;  /* one per table covering it; their limits are the ledger's */
        size_t n_triggers;
        size_t first_trigger;      /* where the next event's look at the triggers starts (watch_triggers_from()) */
        unsigned pointer_size;     /* the stream's, for exception events */
        RuntimeCall *call;
        AdmissionKey key;          /* STARTING and WATCHING: counted as one of the process's sessions */
        bool admitted;
        uint64_t session_id;       /* WATCHING: the runtime's, for the StopTracing at the end */
        int stream_fd;
        sd_event_source *io;
        NettraceParser *parser;
        uint64_t budget_start_usec, budget_bytes;
};

static uint64_t now_usec(const Collector *c) {
        uint64_t now = 0;

        (void)sd_event_now(c->broker->event, CLOCK_MONOTONIC, &now);
        return now;
}

static void stopper_free(Stopper *s) {
        for (Stopper **i = &s->collector->stoppers; *i; i = &(*i)->next)
                if (*i == s) {
                        *i = s->next;
                        break;
                }
        runtime_call_free(s->call);
        free(s);
}

/* Whatever the reply, or none: the stream is closed as well, and the runtime ends the session at its next
 * write at the latest. */
static void stopped(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        stopper_free(userdata);
}

/*
 * A session without events to write (exceptions that nobody throws) would stay in the runtime, one
 * of its 64, after its stream closed: the watch's end tells the runtime, as dsctl's sessions do.
 * The request goes at once, on a connection of its own; nothing waits for the answer.
 */
static void send_stop(Watch *w) {
        Collector *c = w->collector;
        uint8_t request[DOTNET_IPC_HEADER_SIZE + 8];
        const char *why = NULL;
        Stopper *s;
        size_t size;
        int fd;

        if (dotnet_ipc_stop_tracing_encode(w->session_id, request, sizeof(request), &size) != 0 ||
            target_connect(w->target, &fd, &why) != 0)
                return; /* the process went, and its sessions with it */
        s = calloc(1, sizeof(Stopper));
        if (!s) {
                safe_close(fd);
                return;
        }
        *s = (Stopper){ .collector = c, .next = c->stoppers };
        c->stoppers = s;
        if (runtime_call_start(c->broker->event, fd, request, size, c->broker->config.runtime_timeout_usec, stopped, s,
                               &s->call) != 0)
                stopper_free(s);
}

/* Ends whatever the watch does, before it goes. */
static void watch_stop(Watch *w) {
        if (w->state == WATCH_WATCHING && w->target)
                send_stop(w);
        if (w->open.job) {
                worker_job_cancel(w->open.job);
                w->open.job = NULL;
        }
        w->call = runtime_call_free(w->call);
        if (w->admitted) {
                admission_end(w->collector->broker->admission, ADMISSION_SESSION, &w->key);
                w->admitted = false;
        }
        w->io = sd_event_source_disable_unref(w->io);
        w->stream_fd = safe_close(w->stream_fd);
        if (w->parser)
                w->parser = nettrace_parser_free(w->parser);
        w->target = target_unref(w->target);
}

static void watch_forget_triggers(Watch *w) {
        for (size_t i = 0; i < w->n_triggers; i++) {
                collect_ledger_release(w->collector->ledger, w->triggers[i].process_limit);
                collect_ledger_release(w->collector->ledger, w->triggers[i].table_limit);
                collect_trigger_done(&w->triggers[i]);
        }
        free(w->triggers);
        w->triggers = NULL;
        w->n_triggers = 0;
        w->first_trigger = 0;
}

/* ---- lanes: each owner's candidates, served in turn ---- */

static Lane *lane_of(Collector *c, uid_t owner) {
        Lane **last = &c->lanes;

        for (Lane *l = c->lanes; l; l = l->next) {
                if (l->owner == owner)
                        return l;
                last = &l->next;
        }
        *last = calloc(1, sizeof(Lane)); /* a newcomer is served after those already waiting */
        if (*last)
                (*last)->owner = owner;
        return *last;
}

/* A lane with nothing waiting and no watch goes. */
static void lane_drop_if_empty(Collector *c, Lane *lane) {
        if (lane->head || lane->n_watches > 0)
                return;
        for (Lane **i = &c->lanes; *i; i = &(*i)->next)
                if (*i == lane) {
                        *i = lane->next;
                        break;
                }
        free(lane);
}

/* @lane was served: the others come first next time. */
static void lane_served(Collector *c, Lane *lane) {
        Lane **i = &c->lanes;

        while (*i != lane)
                i = &(*i)->next;
        *i = lane->next;
        while (*i)
                i = &(*i)->next;
        *i = lane;
        lane->next = NULL;
}

static void lane_unqueue(Candidate *cand) {
        Lane *lane = cand->lane;
        Candidate *prev = NULL;

        for (Candidate *i = lane->head; i; prev = i, i = i->lane_next)
                if (i == cand) {
                        if (prev)
                                prev->lane_next = cand->lane_next;
                        else
                                lane->head = cand->lane_next;
                        if (lane->tail == cand)
                                lane->tail = prev;
                        break;
                }
        cand->lane_next = NULL;
}

/* @cand waits in its owner's lane for a watch, from @due_usec on. */
static void candidate_wait(Candidate *cand, uint64_t due_usec) {
        Collector *c = cand->collector;
        Lane *lane = cand->lane ? cand->lane : lane_of(c, cand->owner);

        if (!lane) {
                /* no memory for a lane: its facts are read again later, and it tries again */
                cand->state = CANDIDATE_UNCOVERED;
                cand->due_usec = due_usec;
                return;
        }
        cand->lane = lane;
        cand->state = CANDIDATE_WAITING;
        cand->due_usec = due_usec;
        cand->lane_next = NULL;
        if (lane->tail)
                lane->tail->lane_next = cand;
        else
                lane->head = cand;
        lane->tail = cand;
}

/* @cand leaves its lane (it was waiting, or its watch ended): it is judged again from its facts. */
static void candidate_leave_lane(Candidate *cand) {
        Lane *lane = cand->lane;

        if (!lane)
                return;
        if (cand->state == CANDIDATE_WAITING)
                lane_unqueue(cand);
        cand->lane = NULL;
        lane_drop_if_empty(cand->collector, lane);
}

/* ---- a watch's end ---- */

/* Frees @w; its slot is free again. Its candidate is left as it was, for the caller to say what comes next. */
static void watch_free(Watch *w) {
        Collector *c = w->collector;
        Candidate *cand = w->candidate;
        Lane *lane = cand->lane;

        watch_stop(w);
        watch_forget_triggers(w);
        if (w->state == WATCH_OPENING) {
                lane->n_opening--;
                c->n_opening--;
        }
        lane->n_watches--;
        c->n_watches--;
        cand->watch = NULL;
        free(w);
}

/* The watch ends; its process is watched again from @retry_after_usec on (a stream that ended, a runtime
 * that cannot be reached or sends too much, sessions all taken). */
static void watch_idle(Watch *w, uint64_t retry_after_usec) {
        Candidate *cand = w->candidate;

        watch_free(w);
        cand->state = CANDIDATE_WAITING; /* for candidate_wait(): not queued */
        candidate_wait(cand, now_usec(cand->collector) + test_hook_collect_retry(retry_after_usec));
}

static void record(const Watch *w, const CollectTrigger *t, const char *event, bool has_value, double value,
                   const char *exception, const char *result) {
        const PolicyCollect *table = t->table;
        char what[2 * POLICY_COLLECT_TEXT_MAX];
        static const char *const actions[] = {
                [POLICY_COLLECT_THEN_DUMP] = "dump",
                [POLICY_COLLECT_THEN_STACKS] = "stacks",
                [POLICY_COLLECT_THEN_TRACE] = "trace",
                [POLICY_COLLECT_THEN_COUNTERS] = "counters",
                [POLICY_COLLECT_THEN_GCDUMP] = "gcdump",
                [POLICY_COLLECT_THEN_EXCEPTIONS] = "exceptions",
        };

        collect_table_what(table, what, sizeof(what));
        (void)audit_log_collect(w->collector->broker->config.audit_sink,
                                &(AuditCollectEvent){ .event = event,
                                                      .table = table->name,
                                                      .trigger = table->when == POLICY_COLLECT_WHEN_COUNTER ? "counter"
                                                                                                            : "exception",
                                                      .what = what,
                                                      .pid = w->pid,
                                                      .uid = w->target ? target_euid(w->target) : (uid_t)-1,
                                                      .unit = w->target ? w->target->unit : NULL,
                                                      .has_value = has_value,
                                                      .value = value,
                                                      .exception = exception,
                                                      .action = actions[table->then],
                                                      .result = result,
                                                      .limited = t->process_limit ? t->process_limit->n_limited
                                                                                  : 0 });
}

/* The note of the table named @table, made when missing; NULL without memory. */
static CollectTableNote *table_note(Collector *c, const char *table) {
        CollectTableNote *n;

        for (n = c->notes; n; n = n->next)
                if (strcmp(n->table, table) == 0)
                        return n;
        n = calloc(1, sizeof(CollectTableNote));
        if (!n || !(n->table = strdup(table))) {
                free(n);
                return NULL;
        }
        n->next = c->notes;
        c->notes = n;
        return n;
}

void collector_note_result(Collector *c, const PolicyCollect *table, pid_t pid, uint64_t start_time, bool failed,
                           const char *text, uint64_t size) {
        CollectTableNote *n = c ? table_note(c, table->name) : NULL;
        CollectLimit *l = c ? collect_ledger_find_process_limit(c->ledger, pid, start_time, table) : NULL;
        uint64_t now = c ? now_usec(c) : 0;

        /* without memory the result is left out, never shown wrong: the record says it all the same */
        if (n)
                (void)collect_result_set(&n->last_result, failed, text, size, now, pid);
        if (l)
                (void)collect_result_set(&l->last_result, failed, text, size, now, pid);
}

const CollectResult *collector_last_result(const Collector *c, const char *table) {
        for (const CollectTableNote *n = c ? c->notes : NULL; n; n = n->next)
                if (strcmp(n->table, table) == 0)
                        return n->last_result.text ? &n->last_result : NULL;
        return NULL;
}

void collect_record_result(Broker *b, const PolicyCollect *table, const Target *target, const char *action,
                           const char *event, const char *result, const char *path, uint64_t size,
                           AuditReservation *room) {
        char what[2 * POLICY_COLLECT_TEXT_MAX];
        bool failed = strcmp(event, "collected") != 0;

        collector_note_result(b->collector, table, target->pid, target->start_time, failed,
                              !failed && path ? path : result, size);
        collect_table_what(table, what, sizeof(what));
        (void)audit_log_collect(b->config.audit_sink,
                                &(AuditCollectEvent){ .event = event, .table = table->name,
                                                      .trigger = table->when == POLICY_COLLECT_WHEN_COUNTER
                                                                         ? "counter" : "exception",
                                                      .what = what, .pid = target->pid,
                                                      .uid = target_euid(target), .unit = target->unit,
                                                      .action = action, .result = result, .reservation = room });
}

void collect_record_removed(Broker *b, const PolicyCollect *table, const Target *target, const char *action, int r,
                            AuditReservation *room) {
        Collector *c = b->collector;
        CollectTableNote *n;
        char result[256];

        snprintf(result, sizeof(result), "the %s's audit record could not be written (%s): it was removed", action,
                 strerror(-r));
        fprintf(stderr, "dsagent: [[collect]] %s, pid %d: %s\n", table->name, (int)target->pid, result);
        collect_record_result(b, table, target, action, "failed", result, NULL, 0, room);
        n = c ? table_note(c, table->name) : NULL;
        if (n) {
                n->removed++;
                n->removed_pid = target->pid;
        }
}

unsigned collector_removed(const Collector *c, const char *table, pid_t *ret_pid) {
        for (const CollectTableNote *n = c ? c->notes : NULL; n; n = n->next)
                if (strcmp(n->table, table) == 0 && n->removed > 0) {
                        *ret_pid = n->removed_pid;
                        return n->removed;
                }
        return 0;
}

/* The table's action: the trace starts (its end is recorded then), or the record says why not. @thrown: the
 * exception that fired it, with its stack (then.exceptions shows it), or NULL. */
static void act(Watch *w, CollectTrigger *t, bool has_value, double value, const char *exception,
                const MonitorThrown *thrown) {
        Collector *c = w->collector;
        uid_t owner = w->candidate->owner; /* the action is charged to the process's owner */
        const PolicyCollect *table = t->table;
        char why[256];
        bool started;

        if (table->then == POLICY_COLLECT_THEN_DUMP) {
                started = collect_dump_start(c->dumps, c->policy, table, w->target, owner, why, sizeof(why)) == 0;
                if (started)
                        snprintf(why, sizeof(why), "a %s dump begins", policy_dump_type_to_string(table->dump_type));
        } else {
                /* a session, counted with the traces: a trace, stacks, counters, a heap dump, exceptions */
                started = collect_trace_start(c->traces, c->policy, table, w->target, owner, thrown, why,
                                              sizeof(why)) == 0;
                if (started && table->then == POLICY_COLLECT_THEN_TRACE)
                        snprintf(why, sizeof(why), "a trace of profile %s begins", table->trace_profile);
                else if (started)
                        snprintf(why, sizeof(why), "%s session begins",
                                 table->then == POLICY_COLLECT_THEN_GCDUMP       ? "a heap dump"
                                 : table->then == POLICY_COLLECT_THEN_STACKS     ? "a stacks"
                                 : table->then == POLICY_COLLECT_THEN_EXCEPTIONS ? "an exceptions"
                                                                                 : "a counters");
        }
        record(w, t, "fired", has_value, value, exception, why);
        if (!started) /* no collect record follows: the firing's words are its result */
                collector_note_result(c, table, w->pid, w->start_time, true, why, 0);
        t->process_limit->n_limited = 0; /* told in that record (a firing had both limits) */
}

/*
 * The @i-th trigger to look at for one event. Tables that fire on one event may find room for one action only
 * (one collection session of an owner's processes at a time): the look starts after the table that acted last,
 * so that each gets its turn, where a fixed order had the first table take every turn and starve the others.
 */
static CollectTrigger *watch_triggers_from(Watch *w, size_t i) {
        return &w->triggers[(w->first_trigger + i) % w->n_triggers];
}

static void watch_acted(Watch *w, const CollectTrigger *t) {
        w->first_trigger = (size_t)(t - w->triggers + 1) % w->n_triggers;
}

static void watch_sample(Watch *w, const NettraceCounter *counter) {
        uint64_t now = now_usec(w->collector);
        const CollectTrigger *acted = NULL;

        for (size_t i = 0; i < w->n_triggers; i++) {
                CollectTrigger *t = watch_triggers_from(w, i);
                double value = 0;

                if (collect_trigger_counter(t, counter, now, &value) == COLLECT_FIRE) {
                        act(w, t, true, value, NULL, NULL);
                        acted = acted ? acted : t;
                }
        }
        if (acted)
                watch_acted(w, acted);
}

/*
 * An exception @x, thrown as @e says: a table it fires whose action is then.exceptions gets it with its stack
 * (the watch's session has no rundown: the action's session names its frames).
 */
static void watch_exception(Watch *w, MonitorException *x, const NettraceEvent *e) {
        _cleanup_(monitor_thrown_done) MonitorThrown thrown = {};
        uint64_t now = now_usec(w->collector);
        const CollectTrigger *acted = NULL;
        const char *type = x->type;
        bool taken = false;

        for (size_t i = 0; i < w->n_triggers; i++) {
                CollectTrigger *t = watch_triggers_from(w, i);

                if (collect_trigger_exception(t, type, now) != COLLECT_FIRE)
                        continue;
                if (t->table->then == POLICY_COLLECT_THEN_EXCEPTIONS && !taken && monitor_thrown_take(x, e, &thrown) == 0) {
                        taken = true;
                        type = thrown.x.type; /* moved there */
                }
                /* without memory for its stack, the action still runs: the exceptions after the firing */
                act(w, t, false, 0, type, taken ? &thrown : NULL);
                acted = acted ? acted : t;
        }
        if (acted)
                watch_acted(w, acted);
}

static int on_header(const NettraceHeader *header, void *userdata) {
        Watch *w = userdata;

        w->pointer_size = header->pointer_size;
        return 0;
}

static int on_event(const NettraceEvent *event, void *userdata) {
        _cleanup_(nettrace_counter_done) NettraceCounter counter = {};
        _cleanup_(monitor_exception_done) MonitorException exception = {};
        Watch *w = userdata;

        /* an event that is neither, or does not decode as one, is the runtime's business */
        if (nettrace_counter_extract(event, &counter) == 0)
                watch_sample(w, &counter);
        else if (w->pointer_size && monitor_exception_extract(event, w->pointer_size, &exception) == 0 &&
                 exception.type)
                watch_exception(w, &exception, event);
        return 0;
}

/* Within COLLECT_BYTES_PER_SEC? Counted by the loop's clock in windows of a second. */
static bool within_budget(Watch *w, size_t n) {
        uint64_t now = now_usec(w->collector);

        if (now - w->budget_start_usec >= 1000000ULL) {
                w->budget_start_usec = now;
                w->budget_bytes = 0;
        }
        w->budget_bytes += n;
        return w->budget_bytes <= COLLECT_BYTES_PER_SEC;
}

static int on_stream(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Watch *w = userdata;
        static uint8_t buf[COLLECT_READ_MAX]; /* the loop is one thread, and the parser copies what it keeps */
        ssize_t n;

        n = read(fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0) {
                watch_idle(w, COLLECT_RETRY_USEC); /* the runtime ended the stream, or the process exited */
                return 0;
        }
        if (!within_budget(w, (size_t)n)) {
                watch_idle(w, COLLECT_RETRY_USEC);
                return 0;
        }
        if (nettrace_feed(w->parser, buf, (size_t)n) != 0)
                watch_idle(w, COLLECT_RETRY_USEC); /* not a stream the agent can read: not watched */
        return 0;
}

/* Does a table of @w take the exception that fires it (then.exceptions)? Its stream is then parsed with stacks. */
static bool wants_stacks(const Watch *w) {
        for (size_t i = 0; i < w->n_triggers; i++)
                if (w->triggers[i].table->when == POLICY_COLLECT_WHEN_EXCEPTION &&
                    w->triggers[i].table->then == POLICY_COLLECT_THEN_EXCEPTIONS)
                        return true;
        return false;
}

static void started(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        static const NettraceCallbacks callbacks = { .header = on_header, .event = on_event };
        static const NettraceCallbacks with_stacks = { .header = on_header, .event = on_event, .stacks = true,
                                                       .stack_frames_max = COLLECT_STACK_FRAMES_MAX };
        Watch *w = userdata;
        if (error != 0 || !reply->ok || dotnet_ipc_session_id_decode(reply, &w->session_id) != 0) {
                watch_idle(w, COLLECT_RETRY_USEC);
                return;
        }
        w->stream_fd = runtime_call_take_fd(call);
        w->call = runtime_call_free(call);
        if (nettrace_parser_new(wants_stacks(w) ? &with_stacks : &callbacks, w, &w->parser) < 0 ||
            sd_event_add_io(w->collector->broker->event, &w->io, w->stream_fd, EPOLLIN, on_stream, w) < 0) {
                watch_idle(w, COLLECT_RETRY_USEC);
                return;
        }
        w->state = WATCH_WATCHING;
}

int collect_session_id(char ret[TEXT_HEX_ID_SIZE]) {
        uint8_t bytes[16];

        if (getrandom(bytes, sizeof(bytes), GRND_NONBLOCK) != sizeof(bytes))
                return -EIO;
        text_hex_id(bytes, ret);
        return 0;
}

/* Moves @more's providers to the end of @c's. */
static int config_append(EventPipeConfig *c, EventPipeConfig *more) {
        EventPipeProvider *grown = realloc(c->providers, (c->n_providers + more->n_providers) * sizeof(EventPipeProvider));

        if (!grown)
                return -ENOMEM;
        c->providers = grown;
        memcpy(grown + c->n_providers, more->providers, more->n_providers * sizeof(EventPipeProvider));
        c->n_providers += more->n_providers;
        free(more->providers);
        more->providers = NULL;
        more->n_providers = 0;
        return 0;
}

/*
 * One session for all of @w's tables: the distinct counter providers of its counter tables, every
 * second, and the runtime's exception events (as dsctl exceptions asks, without the rundown) when
 * an exception table covers it.
 */
static int config_of(const Watch *w, EventPipeConfig *ret) {
        _cleanup_(eventpipe_config_done) EventPipeConfig c = EVENTPIPE_CONFIG_NULL, exceptions = EVENTPIPE_CONFIG_NULL;
        const char *names[COLLECT_PROVIDERS_MAX];
        bool want_exceptions = false;
        char session_id[TEXT_HEX_ID_SIZE];
        size_t n = 0;
        int r;

        for (size_t i = 0; i < w->n_triggers; i++) {
                const PolicyCollect *table = w->triggers[i].table;
                bool known = false;

                if (table->when == POLICY_COLLECT_WHEN_EXCEPTION) {
                        want_exceptions = true;
                        continue;
                }
                for (size_t j = 0; j < n; j++)
                        known = known || strcmp(names[j], table->counter_provider) == 0;
                if (!known && n < COLLECT_PROVIDERS_MAX)
                        names[n++] = table->counter_provider;
        }
        if (n > 0) {
                r = collect_session_id(session_id);
                if (r < 0)
                        return r;
                r = eventpipe_counters_config(names, n, 1, session_id, &c);
                if (r != 0)
                        return r > 0 ? -EINVAL : r;
        }
        if (want_exceptions) {
                r = monitor_exceptions_config(&exceptions);
                if (r == 0)
                        r = config_append(&c, &exceptions);
                if (r != 0)
                        return r > 0 ? -EINVAL : r;
        }
        c.rundown = false; /* a watch ends when the process does, or at a reload: no one reads a rundown */
        *ret = c;
        c = (EventPipeConfig)EVENTPIPE_CONFIG_NULL;
        return 0;
}

/*
 * A watch is one of the process's sessions, as a client's is: it counts against max_sessions_per_target
 * (admission.h), so that clients and watches together never hold more of the runtime's sessions than
 * the policy allows, charged to the process's owner but against no one's max_sessions_per_user. A
 * process whose sessions are all taken is watched once one ends (the next retry).
 */
static int admit(Watch *w) {
        Collector *c = w->collector;
        const char *why;
        int r;

        r = admission_begin_watch(c->broker->admission, w->pid, w->start_time, w->candidate->owner,
                                  c->policy->agent.max_sessions_per_target, &w->key, &why);
        w->admitted = r == 0;
        return r;
}

static void start(Watch *w) {
        _cleanup_(eventpipe_config_done) EventPipeConfig config = EVENTPIPE_CONFIG_NULL;
        _cleanup_free_ uint8_t *collect = malloc(DOTNET_IPC_MESSAGE_MAX);
        const char *why = NULL;
        size_t size;
        int fd, r;

        r = !collect ? -ENOMEM : admit(w);
        if (r == 0)
                r = config_of(w, &config);
        if (r == 0)
                r = dotnet_ipc_collect_tracing_encode(&config, COLLECT_BUFFER_MB, collect, DOTNET_IPC_MESSAGE_MAX, &size);
        if (r == 0)
                r = target_connect(w->target, &fd, &why);
        if (r == 0)
                r = runtime_call_start(w->collector->broker->event, fd, collect, size,
                                       w->collector->broker->config.runtime_timeout_usec, started, w, &w->call);
        if (r != 0) {
                watch_idle(w, COLLECT_RETRY_USEC);
                return;
        }
        w->state = WATCH_STARTING;
}

/* The tables whose targets cover the pinned process, a trigger each, counting against the ledger's limits. */
static int triggers_of(Watch *w, const Policy *p) {
        PolicyTarget pt = policy_target_of(w->target);

        for (size_t i = 0; i < p->n_collect; i++) {
                const PolicyCollect *table = &p->collect[i];
                CollectTrigger *grown;

                /* crash tables watch no live process: agent/crashes/crash-collect.c reads what died */
                if (table->when == POLICY_COLLECT_WHEN_CRASH || !policy_collect_covers(table, &pt))
                        continue;
                grown = realloc(w->triggers, (w->n_triggers + 1) * sizeof(CollectTrigger));
                if (!grown)
                        return -ENOMEM;
                w->triggers = grown;
                /* a limit the ledger has no room for is NULL: the table does not fire on the process */
                collect_trigger_init(&w->triggers[w->n_triggers++], table,
                                     collect_ledger_process_limit(w->collector->ledger, w->pid, w->start_time, table),
                                     collect_ledger_table_limit(w->collector->ledger, table, w->candidate->owner));
        }
        return 0;
}

static void schedule(Collector *c);

/* The open is over (a worker pinned the process and looked for its socket): the watch's slot stays taken
 * only for a process a table covers, judged on it as a rule's targets are. */
static void opened(void *userdata, int r, Target *target) {
        Watch *w = userdata;
        Collector *c = w->collector;
        Candidate *cand = w->candidate;

        w->target = target;
        w->state = WATCH_STARTING; /* no longer opening: its lane may open another */
        cand->lane->n_opening--;
        c->n_opening--;
        if (r != 0)
                watch_idle(w, COLLECT_RETRY_USEC); /* gone (the next walk tells), or its worker was busy */
        else if (target->start_time != w->start_time) {
                /* another process took the pid since its facts were read: they are read again */
                watch_free(w);
                candidate_leave_lane(cand);
                cand->state = CANDIDATE_NEW;
        } else if (triggers_of(w, c->policy) < 0)
                watch_idle(w, COLLECT_RETRY_USEC);
        else if (w->n_triggers == 0) {
                /* its facts said a table may cover it; its name says none does: judged again when its facts
                 * change, or much later (a process may rename itself) */
                watch_free(w);
                candidate_leave_lane(cand);
                cand->state = CANDIDATE_UNCOVERED;
                cand->by_name = true;
                cand->due_usec = now_usec(c) + test_hook_collect_retry(COLLECT_NAME_RECHECK_USEC);
        } else if (target->socket_path_fd < 0)
                watch_idle(w, COLLECT_RETRY_USEC);
        else
                start(w);
        schedule(c);
}

/* ---- slots: at most COLLECT_WATCHES_MAX watches, shared fairly between the lanes ---- */

/* The lane holding the most watches. */
static Lane *largest_lane(const Collector *c) {
        Lane *most = NULL;

        for (Lane *l = c->lanes; l; l = l->next)
                if (!most || l->n_watches > most->n_watches)
                        most = l;
        return most;
}

/* A watch of @lane to give up: one that is being opened only when the lane has no other. */
static Watch *watch_to_give_up(const Collector *c, const Lane *lane) {
        Watch *pick = NULL;

        for (Candidate *cand = c->candidates; cand; cand = cand->next)
                if (cand->watch && cand->lane == lane && (!pick || pick->state == WATCH_OPENING))
                        pick = cand->watch;
        return pick;
}

/*
 * A slot for one more watch of @lane: a free one, or, when all are taken, one of the lane that holds
 * the most, if it holds at least two more than @lane (so that the slots end up shared evenly between
 * the owners who want them, and no owner's crowd keeps another owner's process unwatched).
 */
static bool slot_for(Collector *c, Lane *lane) {
        Lane *most;
        Watch *w;

        if (c->n_watches < COLLECT_WATCHES_MAX)
                return true;
        most = largest_lane(c);
        if (!most || most->n_watches < lane->n_watches + 2 || !(w = watch_to_give_up(c, most)))
                return false;
        watch_idle(w, 0); /* back in its lane, behind the others */
        return true;
}

/* A waiting candidate of @lane whose time has come, the first in the lane's order. */
static Candidate *lane_next_due(const Lane *lane, uint64_t now) {
        for (Candidate *cand = lane->head; cand; cand = cand->lane_next)
                if (cand->due_usec <= now)
                        return cand;
        return NULL;
}

/* @cand gets a slot and its watch begins: a worker, charged to its owner, pins it and finds its socket.
 * Return: false when there is no memory for it (it stays waiting). */
static bool watch_begin(Candidate *cand) {
        Collector *c = cand->collector;
        Lane *lane = cand->lane;
        Watch *w = calloc(1, sizeof(Watch));

        if (!w)
                return false;
        *w = (Watch){ .collector = c, .candidate = cand, .pid = cand->pid, .start_time = cand->start_time,
                      .state = WATCH_OPENING, .stream_fd = -EBADF };
        lane_unqueue(cand);
        cand->state = CANDIDATE_WATCHED;
        cand->watch = w;
        lane->n_watches++;
        lane->n_opening++;
        c->n_watches++;
        c->n_opening++;
        if (jobs_open_runtime(c->broker, cand->pid, cand->owner, opened, w, &w->open) != 0)
                watch_idle(w, COLLECT_RETRY_USEC); /* its owner's worker queue is full: later */
        return true;
}

/*
 * Hands the watcher's capacity out: at most COLLECT_OPENS_MAX opens at once, COLLECT_OPENS_PER_OWNER of
 * one owner's, the lanes in turn (one served goes behind the others), and a slot each (slot_for()).
 * Only candidates a table may cover are in lanes: the others cost nothing here.
 */
static void schedule(Collector *c) {
        uint64_t now = now_usec(c);
        bool served = true;

        if (!c->policy)
                return;
        while (served && c->n_opening < COLLECT_OPENS_MAX) {
                served = false;
                for (Lane *lane = c->lanes; lane; lane = lane->next) {
                        Candidate *cand;

                        if (lane->n_opening >= COLLECT_OPENS_PER_OWNER || !(cand = lane_next_due(lane, now)) ||
                            !slot_for(c, lane))
                                continue;
                        lane_served(c, lane);
                        if (!watch_begin(cand))
                                return; /* no memory: the next walk tries again */
                        served = true;
                        break; /* the order changed: from the first again */
                }
        }
}

/* ---- candidates: coverage from their facts ---- */

static Candidate *candidate_find(const Collector *c, pid_t pid) {
        for (Candidate *cand = c->candidates; cand; cand = cand->next)
                if (cand->pid == pid)
                        return cand;
        return NULL;
}

static void candidate_free(Candidate *cand) {
        Collector *c = cand->collector;

        if (cand->watch)
                watch_free(cand->watch);
        candidate_leave_lane(cand);
        for (Candidate **i = &c->candidates; *i; i = &(*i)->next)
                if (*i == cand) {
                        *i = cand->next;
                        break;
                }
        free(cand);
}

/* FNV-1a over the facts coverage is judged on: a change says judge again. */
static uint64_t facts_hash(const JobProcessFacts *f) {
        uint64_t h = 14695981039346656037ULL;
        const uint32_t ids[2] = { f->euid, f->charged_uid };
        const void *parts[] = { ids, f->unit, f->container_id, f->cgroup, &f->cgroup_vouched };
        const size_t sizes[] = { sizeof(ids), strlen(f->unit), strlen(f->container_id), strlen(f->cgroup), 1 };

        for (size_t i = 0; i < ELEMENTSOF(parts); i++)
                for (size_t j = 0; j < sizes[i]; j++) {
                        h ^= ((const uint8_t *)parts[i])[j];
                        h *= 1099511628211ULL;
                }
        return h;
}

/*
 * May a table of @p cover the process @f describes? Judged as a rule's targets are, on every selector
 * the facts hold (user, unit, cgroup, container); a table that selects by name may: only the pinned
 * process's details tell its name (opened() decides then).
 */
static bool may_be_covered(const Policy *p, const JobProcessFacts *f) {
        PolicyTarget pt = {
                .uid = { f->euid, f->euid, f->euid, f->euid },
                .unit = f->unit[0] ? f->unit : NULL,
                .cgroup = f->cgroup_vouched && f->cgroup[0] ? f->cgroup : NULL,
                .container_id = f->cgroup_vouched && f->container_id[0] ? f->container_id : NULL,
        };

        for (size_t i = 0; i < p->n_collect; i++) {
                PolicyCollect without_names = p->collect[i];

                without_names.targets.names = (PolicyStringList){};
                if (policy_collect_covers(&without_names, &pt))
                        return true;
        }
        return false;
}

/* What @cand's facts, read now, say about it. */
static void candidate_judge(Candidate *cand, const JobProcessFacts *f, uint64_t now) {
        Collector *c = cand->collector;
        uint64_t hash = facts_hash(f);

        if (!f->alive) {
                candidate_free(cand); /* gone since the walk */
                return;
        }
        if (cand->start_time != f->start_time || cand->facts_hash != hash)
                cand->by_name = false; /* another process, or its facts changed: its name is asked again */
        cand->start_time = f->start_time;
        cand->facts_hash = hash;
        cand->owner = f->charged_uid;
        if (cand->by_name && now < cand->due_usec) {
                cand->state = CANDIDATE_UNCOVERED;
                return;
        }
        cand->by_name = false;
        if (may_be_covered(c->policy, f))
                candidate_wait(cand, now);
        else {
                cand->state = CANDIDATE_UNCOVERED;
                cand->due_usec = now + test_hook_collect_retry(COLLECT_RETRY_USEC);
        }
}

/* ---- the facts: read in batches, a job at a time, of the candidates and of the ledger's processes ---- */

static void ask_facts(Collector *c);

static void facts_read(void *userdata, int r, const JobProcessFacts *facts, size_t n) {
        Collector *c = userdata;
        uint64_t now = now_usec(c);

        for (size_t i = 0; i < c->n_asked; i++) {
                const FactsAsked *a = &c->asked[i];
                const JobProcessFacts *f = r == 0 && i < n && facts[i].pid == a->pid ? &facts[i] : NULL;
                Candidate *cand;

                if (a->ledger) {
                        /* gone, or the pid is another process's: what the ledger kept for it goes */
                        if (f && (!f->alive || f->start_time != a->start_time))
                                collect_ledger_forget_process(c->ledger, a->pid, a->start_time);
                        continue;
                }
                cand = candidate_find(c, a->pid);
                if (!cand || !cand->asked)
                        continue; /* gone from the walk meanwhile */
                cand->asked = false;
                if (f)
                        candidate_judge(cand, f, now);
                else if (cand->state == CANDIDATE_NEW) {
                        /* no answer (the worker failed): asked again after a while */
                        cand->state = CANDIDATE_UNCOVERED;
                        cand->due_usec = now + test_hook_collect_retry(COLLECT_RETRY_USEC);
                }
        }
        c->n_asked = 0;
        ask_facts(c);
        schedule(c);
}

/* Does the last walk list the process @pid started at @start_time (so that it lives)? */
static bool listed(const Collector *c, pid_t pid, uint64_t start_time) {
        const Candidate *cand = candidate_find(c, pid);

        return cand && cand->start_time == start_time;
}

static void ledger_due_add(pid_t pid, uint64_t start_time, void *userdata) {
        Collector *c = userdata;
        FactsAsked *grown;

        if (listed(c, pid, start_time))
                return;
        grown = realloc(c->ledger_due, (c->n_ledger_due + 1) * sizeof(FactsAsked));
        if (!grown)
                return; /* looked at next time */
        c->ledger_due = grown;
        c->ledger_due[c->n_ledger_due++] = (FactsAsked){ .pid = pid, .start_time = start_time, .ledger = true };
}

/* The next batch: candidates first (new ones, then those due again), then the ledger's processes no walk lists. */
static void ask_facts(Collector *c) {
        uint64_t now = now_usec(c);
        pid_t pids[JOBS_FACTS_MAX];

        if (c->facts.job || !c->policy || !c->broker->workers)
                return;
        if (c->n_ledger_due == 0 && now - c->ledger_looked_usec >= test_hook_collect_retry(COLLECT_RETRY_USEC)) {
                c->ledger_looked_usec = now;
                collect_ledger_visit_processes(c->ledger, ledger_due_add, c);
        }
        c->n_asked = 0;
        for (int pass = 0; pass < 2; pass++)
                for (Candidate *cand = c->candidates; cand && c->n_asked < JOBS_FACTS_MAX; cand = cand->next)
                        if (!cand->asked && (pass == 0 ? cand->state == CANDIDATE_NEW
                                                       : cand->state == CANDIDATE_UNCOVERED && cand->due_usec <= now)) {
                                cand->asked = true;
                                c->asked[c->n_asked++] = (FactsAsked){ .pid = cand->pid };
                        }
        while (c->n_ledger_due > 0 && c->n_asked < JOBS_FACTS_MAX)
                c->asked[c->n_asked++] = c->ledger_due[--c->n_ledger_due];
        if (c->n_asked == 0)
                return;
        for (size_t i = 0; i < c->n_asked; i++)
                pids[i] = c->asked[i].pid;
        if (jobs_process_facts(c->broker, pids, c->n_asked, COLLECT_WATCHER_CHARGE, facts_read, c, &c->facts) != 0) {
                /* the watcher's own worker queue is full: the next walk asks again */
                for (size_t i = 0; i < c->n_asked; i++) {
                        Candidate *cand = c->asked[i].ledger ? NULL : candidate_find(c, c->asked[i].pid);

                        if (cand)
                                cand->asked = false;
                }
                c->n_asked = 0;
        }
}

/* ---- walks ---- */

static void walked(void *userdata, int r, const DiscoverCandidate *found, size_t n) {
        Collector *c = userdata;
        uint64_t now = now_usec(c);
        Candidate *next;

        if (r != 0)
                return;
        for (Candidate *cand = c->candidates; cand; cand = cand->next)
                cand->seen = false;
        for (size_t i = 0; i < n; i++) {
                Candidate *cand = candidate_find(c, found[i].pid);

                if (cand) {
                        cand->seen = true;
                        continue;
                }
                cand = calloc(1, sizeof(Candidate));
                if (!cand)
                        break;
                *cand = (Candidate){ .collector = c, .next = c->candidates, .pid = found[i].pid, .seen = true,
                                     .state = CANDIDATE_NEW };
                c->candidates = cand;
        }
        /* a process no longer listed has exited or closed its socket: its watch goes; what its tables counted
         * stays in the ledger while it lives */
        for (Candidate *cand = c->candidates; cand; cand = next) {
                next = cand->next;
                if (!cand->seen)
                        candidate_free(cand);
        }
        collect_ledger_prune(c->ledger, c->policy, now);
        ask_facts(c);
        schedule(c);
}

/* Whose processes the walk looks at: the tables' targets.users when every table names some, else anybody's. */
static void walk_of(const Policy *p, JobWalk *ret) {
        *ret = (JobWalk){};
        for (size_t i = 0; i < p->n_collect; i++) {
                const PolicyIdList *users = &p->collect[i].targets.users;

                if (p->collect[i].when == POLICY_COLLECT_WHEN_CRASH)
                        continue; /* about the dead: no walk for them */
                if (users->n == 0 || ret->n_uids + users->n > JOBS_WALK_UIDS_MAX) {
                        *ret = (JobWalk){ .any_uid = true };
                        return;
                }
                for (size_t j = 0; j < users->n; j++)
                        ret->uids[ret->n_uids++] = users->ids[j];
        }
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Collector *c = userdata;
        JobWalk walk;

        (void)sd_event_source_set_time(s, usec + COLLECT_WALK_USEC);
        (void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        if (!c->broker->workers || !c->policy || c->policy->n_collect == 0)
                return 0;
        schedule(c); /* retries whose time came */
        if (c->walk.job)
                return 0;
        walk_of(c->policy, &walk);
        if (!walk.any_uid && walk.n_uids == 0)
                return 0; /* crash tables alone */
        (void)jobs_walk_candidates(c->broker, &walk, COLLECT_WATCHER_CHARGE, walked, c, &c->walk);
        return 0;
}

int collector_new(Broker *b, Collector **ret) {
        _cleanup_free_ Collector *c = calloc(1, sizeof(Collector));
        int r;

        if (!c)
                return -ENOMEM;
        c->broker = b;
        c->traces = collect_traces_new(b);
        c->dumps = collect_dumps_new(b);
        c->ledger = collect_ledger_new();
        r = c->traces && c->dumps && c->ledger ? 0 : -ENOMEM;
        if (r == 0)
                r = sd_event_add_time_relative(b->event, &c->timer, CLOCK_MONOTONIC, COLLECT_WALK_USEC, 0, on_timer, c);
        if (r < 0) {
                collect_traces_free(c->traces);
                collect_dumps_free(c->dumps);
                collect_ledger_free(c->ledger);
                return r;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

static void cancel_job(JobCall *call) {
        if (call->job) {
                worker_job_cancel(call->job);
                call->job = NULL;
        }
}

/* Every watch ends and every candidate goes (the walk, the batch of facts with them). */
static void drop_candidates(Collector *c) {
        while (c->candidates)
                candidate_free(c->candidates);
        cancel_job(&c->walk);
        cancel_job(&c->facts);
        c->n_asked = 0;
        c->n_ledger_due = 0;
}

/* The notes of tables @p no longer has go: dsctl collect lists only the policy's tables, and so the notes stay as
 * many as its tables (and the actions still running under an older policy). */
static void drop_notes_of_gone_tables(Collector *c, const Policy *p) {
        for (CollectTableNote **i = &c->notes; *i;) {
                CollectTableNote *n = *i;
                bool kept = false;

                for (size_t k = 0; p && k < p->n_collect && !kept; k++)
                        kept = strcmp(p->collect[k].name, n->table) == 0;
                if (kept) {
                        i = &n->next;
                        continue;
                }
                *i = n->next;
                collect_result_done(&n->last_result);
                free(n->table);
                free(n);
        }
}

Collector *collector_free(Collector *c) {
        if (!c)
                return NULL;
        drop_candidates(c); /* each lane goes with its last candidate */
        while (c->stoppers)
                stopper_free(c->stoppers);
        collect_traces_free(c->traces);
        collect_dumps_free(c->dumps);
        collect_ledger_free(c->ledger);
        free(c->ledger_due);
        drop_notes_of_gone_tables(c, NULL);
        sd_event_source_disable_unref(c->timer);
        policy_unref(c->policy);
        free(c);
        return NULL;
}

void collector_apply(Collector *c) {
        /* every watch ends (its session stops), and every process is judged again under the new tables;
         * what the tables counted stays in the ledger, for the same tables (by name and limit) */
        drop_candidates(c);
        policy_unref(c->policy);
        c->policy = policy_ref(c->broker->policy);
        drop_notes_of_gone_tables(c, c->policy);
        collect_ledger_prune(c->ledger, c->policy, now_usec(c));
        (void)sd_event_source_set_time_relative(c->timer, 0);
        (void)sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
}

const Policy *collector_policy(const Collector *c) {
        return c ? c->policy : NULL;
}

void collector_visit(const Collector *c, const PolicyCollect *table,
                     void (*visit)(const CollectWatchView *v, void *userdata), void *userdata) {
        for (const Candidate *cand = c ? c->candidates : NULL; cand; cand = cand->next) {
                const Watch *w = cand->watch;

                if (!w || !w->target || (w->state != WATCH_STARTING && w->state != WATCH_WATCHING))
                        continue;
                for (size_t i = 0; i < w->n_triggers; i++) {
                        const CollectLimit *l = w->triggers[i].process_limit;

                        if (w->triggers[i].table == table)
                                visit(&(CollectWatchView){ .target = w->target, .fired = l && l->n_fired > 0,
                                                           .last_fired_usec = l ? l->last_fired_usec : 0,
                                                           .last_result = l && l->last_result.text ? &l->last_result
                                                                                                   : NULL },
                                      userdata);
                }
        }
}
