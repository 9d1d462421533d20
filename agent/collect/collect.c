/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The [[collect]] watcher: covered processes, one counters session each, triggers (collect.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "audit.h"
#include "broker.h"
#include "cleanup.h"
#include "collect-dump.h"
#include "collect-trace.h"
#include "collect-trigger.h"
#include "collect.h"
#include "decision.h"
#include "dotnet-ipc.h"
#include "jobs.h"
#include "monitor-config.h"
#include "monitor-events.h"
#include "nettrace.h"
#include "runtime-call.h"
#include "session-config.h"
#include "target.h"
#include "test-hooks.h"
#include "worker-pool.h"

/* The worker pool counts jobs by owner: the watcher's are its own, apart from every user's and from
 * the startup traces' ((uid_t) -2). */
#define COLLECT_OWNER ((uint32_t)-3)
#define COLLECT_PROVIDERS_MAX 16
#define COLLECT_BUFFER_MB 16

typedef enum WatchState {
        WATCH_OPENING,  /* a worker pins the process and finds its socket */
        WATCH_STARTING, /* CollectTracing sent */
        WATCH_WATCHING, /* the stream is read */
        WATCH_IDLE,     /* nothing to do until retry_usec */
} WatchState;

typedef struct Watch Watch;
typedef struct Stopper Stopper;

/* A StopTracing on its way to a runtime whose watch has ended. */
struct Stopper {
        Collector *collector;
        Stopper *next;
        RuntimeCall *call;
};

struct Collector {
        Broker *broker;
        Policy *policy;            /* the one the watches were set up under */
        sd_event_source *timer;
        JobCall walk;
        Watch *watches;
        unsigned n_watches;
        /* the watches reloads ended, with their triggers, until a watch of the same process under the
         * policy in force takes what they counted against their limits (take_carried_limits()), or a
         * walk no longer lists the process: a second reload before that keeps them (carry()) */
        Watch *carried;
        unsigned n_carried;
        CollectTraces *traces;     /* then.trace_profile actions running; they outlive watches and reloads */
        CollectDumps *dumps;       /* then.dump actions running; likewise */
        Stopper *stoppers;
};

struct Watch {
        Collector *collector;
        Watch *next;
        pid_t pid;
        bool seen;                 /* in the last walk */
        WatchState state;
        uint64_t retry_usec;       /* IDLE until then */
        JobCall open;
        Target *target;
        uint64_t start_time;       /* of the process the triggers are about: with the pid, one process */
        CollectTrigger *triggers;  /* one per table covering it; kept while the watch rests, so that
                                    * a runtime that ends its stream gets no fresh limit */
        size_t n_triggers;
        unsigned pointer_size;     /* the stream's, for exception events */
        RuntimeCall *call;
        AdmissionKey key;          /* STARTING and WATCHING: counted as one of the process's sessions */
        bool admitted;
        uint64_t session_id;       /* WATCHING: the runtime's, for the StopTracing at the end */
        int stream_fd;
        sd_event_source *io;
        NettraceParser *parser;
        uint64_t budget_start_usec, budget_bytes;
        Policy *carried_policy;    /* carried: the policy whose tables its triggers borrow */
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

/* Ends whatever the watch does; it stays in the list as IDLE, or goes with watch_free(). */
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
        for (size_t i = 0; i < w->n_triggers; i++)
                collect_trigger_done(&w->triggers[i]);
        free(w->triggers);
        w->triggers = NULL;
        w->n_triggers = 0;
}

static void watch_idle(Watch *w, uint64_t retry_after_usec) {
        watch_stop(w);
        w->state = WATCH_IDLE;
        w->retry_usec = now_usec(w->collector) + test_hook_collect_retry(retry_after_usec);
}

static void watch_free(Watch *w) {
        Collector *c = w->collector;

        watch_stop(w);
        watch_forget_triggers(w);
        for (Watch **p = &c->watches; *p; p = &(*p)->next)
                if (*p == w) {
                        *p = w->next;
                        break;
                }
        c->n_watches--;
        free(w);
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
                                                      .limited = t->n_limited });
}

void collect_record_result(Broker *b, const PolicyCollect *table, const Target *target, const char *action,
                           const char *event, const char *result, AuditReservation *room) {
        char what[2 * POLICY_COLLECT_TEXT_MAX];

        collect_table_what(table, what, sizeof(what));
        (void)audit_log_collect(b->config.audit_sink,
                                &(AuditCollectEvent){ .event = event, .table = table->name,
                                                      .trigger = table->when == POLICY_COLLECT_WHEN_COUNTER
                                                                         ? "counter" : "exception",
                                                      .what = what, .pid = target->pid,
                                                      .uid = target_euid(target), .unit = target->unit,
                                                      .action = action, .result = result, .reservation = room });
}

/* The table's action: the trace starts (its end is recorded then), or the record says why not. */
static void act(Watch *w, CollectTrigger *t, bool has_value, double value, const char *exception) {
        Collector *c = w->collector;
        char why[256];

        switch (t->table->then) {
        case POLICY_COLLECT_THEN_TRACE:
                if (collect_trace_start(c->traces, c->policy, t->table, w->target, why, sizeof(why)) == 0)
                        snprintf(why, sizeof(why), "a trace of profile %s begins", t->table->trace_profile);
                break;
        case POLICY_COLLECT_THEN_DUMP:
                if (collect_dump_start(c->dumps, c->policy, t->table, w->target, why, sizeof(why)) == 0)
                        snprintf(why, sizeof(why), "a %s dump begins", policy_dump_type_to_string(t->table->dump_type));
                break;
        case POLICY_COLLECT_THEN_STACKS:
                if (collect_trace_start(c->traces, c->policy, t->table, w->target, why, sizeof(why)) == 0)
                        snprintf(why, sizeof(why), "a stacks session begins");
                break;
        case POLICY_COLLECT_THEN_COUNTERS:
                if (collect_trace_start(c->traces, c->policy, t->table, w->target, why, sizeof(why)) == 0)
                        snprintf(why, sizeof(why), "a counters session begins");
                break;
        case POLICY_COLLECT_THEN_GCDUMP: /* a session as then.stacks', counted with the traces */
                if (collect_trace_start(c->traces, c->policy, t->table, w->target, why, sizeof(why)) == 0)
                        snprintf(why, sizeof(why), "a heap dump session begins");
                break;
        default:
                snprintf(why, sizeof(why), "the action is not built yet: nothing was collected");
                break;
        }
        record(w, t, "fired", has_value, value, exception, why);
        t->n_limited = 0; /* told in that record */
}

static void watch_sample(Watch *w, const NettraceCounter *counter) {
        uint64_t now = now_usec(w->collector);

        for (size_t i = 0; i < w->n_triggers; i++) {
                CollectTrigger *t = &w->triggers[i];
                double value = 0;

                if (collect_trigger_counter(t, counter, now, &value) == COLLECT_FIRE)
                        act(w, t, true, value, NULL);
        }
}

static void watch_exception(Watch *w, const char *type) {
        uint64_t now = now_usec(w->collector);

        for (size_t i = 0; i < w->n_triggers; i++)
                if (collect_trigger_exception(&w->triggers[i], type, now) == COLLECT_FIRE)
                        act(w, &w->triggers[i], false, 0, type);
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
                watch_exception(w, exception.type);
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

static void started(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        static const NettraceCallbacks callbacks = { .header = on_header, .event = on_event };
        Watch *w = userdata;
        if (error != 0 || !reply->ok || dotnet_ipc_session_id_decode(reply, &w->session_id) != 0) {
                watch_idle(w, COLLECT_RETRY_USEC);
                return;
        }
        w->stream_fd = runtime_call_take_fd(call);
        w->call = runtime_call_free(call);
        if (nettrace_parser_new(&callbacks, w, &w->parser) < 0 ||
            sd_event_add_io(w->collector->broker->event, &w->io, w->stream_fd, EPOLLIN, on_stream, w) < 0) {
                watch_idle(w, COLLECT_RETRY_USEC);
                return;
        }
        w->state = WATCH_WATCHING;
}

int collect_session_id(char ret[33]) {
        uint8_t bytes[16];

        if (getrandom(bytes, sizeof(bytes), GRND_NONBLOCK) != sizeof(bytes))
                return -EIO;
        for (size_t i = 0; i < sizeof(bytes); i++)
                snprintf(ret + 2 * i, 3, "%02x", bytes[i]);
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
        char session_id[33];
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
 * the policy allows. A process whose sessions are all taken is watched once one ends (the next retry).
 * The watch charges no user: its requester is the collector's own.
 */
static int admit(Watch *w) {
        Collector *c = w->collector;
        const char *why;
        int r;

        r = admission_begin_agent_session(c->broker->admission, w->pid, w->start_time, COLLECT_OWNER,
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

/* The tables whose targets cover the pinned process, a trigger each. */
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
                collect_trigger_init(&w->triggers[w->n_triggers++], table);
        }
        return 0;
}

/* Unlinks the carried watch at *@p and frees it, with its triggers and its policy. */
static void carried_free(Collector *c, Watch **p) {
        Watch *old = *p;

        *p = old->next;
        c->n_carried--;
        watch_forget_triggers(old);
        policy_unref(old->carried_policy);
        free(old);
}

/* What the watch of this very process under a policy before a reload counted against each table's
 * limit, taken table by table (collect_trigger_take_limit()); that watch is then freed. */
static void take_carried_limits(Watch *w) {
        Collector *c = w->collector;

        for (Watch **p = &c->carried; *p; p = &(*p)->next) {
                Watch *old = *p;

                if (old->pid != w->pid || old->start_time != w->start_time)
                        continue;
                for (size_t i = 0; i < w->n_triggers; i++)
                        for (size_t j = 0; j < old->n_triggers; j++)
                                if (collect_trigger_take_limit(&w->triggers[i], &old->triggers[j]))
                                        break;
                carried_free(c, p);
                return;
        }
}

/* Drops what was carried for a process the last walk did not list (@seen marks those it did): it exited. */
static void drop_carried_unseen(Collector *c) {
        for (Watch **p = &c->carried; *p;)
                if (!(*p)->seen)
                        carried_free(c, p);
                else
                        p = &(*p)->next;
}

/* The walk listed @pid: what was carried for it stays (every entry: a pid taken again has two). */
static void carried_seen(Collector *c, pid_t pid) {
        for (Watch *w = c->carried; w; w = w->next)
                if (w->pid == pid)
                        w->seen = true;
}

static void opened(void *userdata, int r, Target *target) {
        Watch *w = userdata;

        w->target = target;
        if (r != 0) {
                watch_idle(w, COLLECT_RETRY_USEC); /* gone, or not ours to read: the next walk tells */
                return;
        }
        /* the same process again (its stream ended, its runtime could not be reached): the triggers it
         * had, limits and all; a process that took its pid gets its own */
        if (w->n_triggers > 0 && w->start_time != target->start_time)
                watch_forget_triggers(w);
        w->start_time = target->start_time;
        if (w->n_triggers == 0) {
                if (triggers_of(w, w->collector->policy) < 0) {
                        watch_idle(w, COLLECT_RETRY_USEC);
                        return;
                }
                take_carried_limits(w);
        }
        if (w->n_triggers == 0) {
                /* no table covers it now; its name, unit or cgroup may change, so it is judged again */
                watch_idle(w, COLLECT_RETRY_USEC);
                return;
        }
        if (target->socket_path_fd < 0) {
                watch_idle(w, COLLECT_RETRY_USEC);
                return;
        }
        start(w);
}

static void watch_open(Watch *w) {
        w->state = WATCH_OPENING;
        w->seen = true;
        if (jobs_open_runtime(w->collector->broker, w->pid, COLLECT_OWNER, opened, w, &w->open) != 0)
                watch_free(w); /* the watcher's workers are busy: the next walk tries again */
}

static Watch *watch_find(const Collector *c, pid_t pid) {
        for (Watch *w = c->watches; w; w = w->next)
                if (w->pid == pid)
                        return w;
        return NULL;
}

static void walked(void *userdata, int r, const DiscoverCandidate *found, size_t n) {
        Collector *c = userdata;
        uint64_t now = now_usec(c);
        Watch *next;

        if (r != 0)
                return;
        for (Watch *w = c->watches; w; w = w->next)
                w->seen = false;
        for (Watch *w = c->carried; w; w = w->next)
                w->seen = false;
        for (size_t i = 0; i < n; i++) {
                Watch *w = watch_find(c, found[i].pid);

                carried_seen(c, found[i].pid);
                if (w) {
                        w->seen = true;
                        if (w->state == WATCH_IDLE && now >= w->retry_usec)
                                watch_open(w);
                        continue;
                }
                if (c->n_watches >= COLLECT_WATCHES_MAX)
                        continue;
                w = calloc(1, sizeof(Watch));
                if (!w)
                        return;
                *w = (Watch){ .collector = c, .pid = found[i].pid, .stream_fd = -EBADF, .next = c->watches };
                c->watches = w;
                c->n_watches++;
                watch_open(w);
        }
        /* a process no longer listed has exited (or closed its socket): its watch goes, and what was
         * carried for it */
        for (Watch *w = c->watches; w; w = next) {
                next = w->next;
                if (!w->seen)
                        watch_free(w);
        }
        drop_carried_unseen(c);
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
        if (!c->broker->workers || c->walk.job || !c->policy || c->policy->n_collect == 0)
                return 0;
        walk_of(c->policy, &walk);
        if (!walk.any_uid && walk.n_uids == 0)
                return 0; /* crash tables alone */
        (void)jobs_walk_candidates(c->broker, &walk, COLLECT_OWNER, walked, c, &c->walk);
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
        r = c->traces && c->dumps ? 0 : -ENOMEM;
        if (r == 0)
                r = sd_event_add_time_relative(b->event, &c->timer, CLOCK_MONOTONIC, COLLECT_WALK_USEC, 0, on_timer, c);
        if (r < 0) {
                collect_traces_free(c->traces);
                collect_dumps_free(c->dumps);
                return r;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

static void drop_watches(Collector *c) {
        while (c->watches)
                watch_free(c->watches);
        if (c->walk.job) {
                worker_job_cancel(c->walk.job);
                c->walk.job = NULL;
        }
}

static void drop_carried(Collector *c) {
        while (c->carried)
                carried_free(c, &c->carried);
}

/*
 * Carries @w, which a reload ended, for what its triggers counted: it replaces what an earlier
 * reload carried for the same process, since @w took that when it was opened. A watch not opened
 * yet (no triggers) carries nothing, and what was carried for its process stays carried: two
 * reloads before the next walk opens it lose nothing. At most COLLECT_WATCHES_MAX are kept, the
 * newest, so that reloads amid many short-lived processes cannot grow the list without bound.
 */
static void carry(Collector *c, Watch *w) {
        if (w->n_triggers == 0) {
                watch_forget_triggers(w);
                free(w);
                return;
        }
        for (Watch **p = &c->carried; *p; p = &(*p)->next)
                if ((*p)->pid == w->pid && (*p)->start_time == w->start_time) {
                        carried_free(c, p);
                        break;
                }
        w->carried_policy = policy_ref(c->policy);
        w->next = c->carried;
        c->carried = w;
        c->n_carried++;
        if (c->n_carried > COLLECT_WATCHES_MAX) {
                Watch **last = &c->carried;

                while ((*last)->next)
                        last = &(*last)->next;
                carried_free(c, last);
        }
}

Collector *collector_free(Collector *c) {
        if (!c)
                return NULL;
        drop_watches(c);
        drop_carried(c);
        while (c->stoppers)
                stopper_free(c->stoppers);
        collect_traces_free(c->traces);
        collect_dumps_free(c->dumps);
        sd_event_source_disable_unref(c->timer);
        policy_unref(c->policy);
        free(c);
        return NULL;
}

void collector_apply(Collector *c) {
        /* every watch ends (its session stops); its triggers are carried, for what they counted against
         * their limits, until a watch of the same process takes them or the process is gone */
        while (c->watches) {
                Watch *w = c->watches;

                watch_stop(w);
                c->watches = w->next;
                c->n_watches--;
                carry(c, w);
        }
        drop_watches(c); /* none is left: it cancels the walk */
        policy_unref(c->policy);
        c->policy = policy_ref(c->broker->policy);
        (void)sd_event_source_set_time_relative(c->timer, 0);
        (void)sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
}

const Policy *collector_policy(const Collector *c) {
        return c ? c->policy : NULL;
}

void collector_visit(const Collector *c, const PolicyCollect *table,
                     void (*visit)(const CollectWatchView *v, void *userdata), void *userdata) {
        for (const Watch *w = c ? c->watches : NULL; w; w = w->next) {
                if (!w->target || (w->state != WATCH_STARTING && w->state != WATCH_WATCHING))
                        continue;
                for (size_t i = 0; i < w->n_triggers; i++)
                        if (w->triggers[i].table == table)
                                visit(&(CollectWatchView){ .target = w->target, .fired = w->triggers[i].n_fired > 0,
                                                           .last_fired_usec = w->triggers[i].last_fired_usec },
                                      userdata);
        }
}
