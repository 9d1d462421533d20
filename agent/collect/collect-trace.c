/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The trace action of a [[collect]] table (collect-trace.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "broker.h"
#include "cleanup.h"
#include "collect-trace.h"
#include "collect-trigger.h"
#include "collect.h"
#include "dotnet-ipc.h"
#include "dump-publish.h"
#include "dump-writer.h"
#include "jobs.h"
#include "monitor-config.h"
#include "runtime-call.h"
#include "session-config.h"
#include "target.h"
#include "worker-pool.h"

#define USEC_PER_SEC 1000000ULL
/* After StopTracing the runtime writes its rundown, then ends the stream (as on-start.c allows). */
#define COLLECT_STOP_GRACE_USEC (60 * USEC_PER_SEC)
/* then.gcdump: how long the heap dump may take to come, as dsctl gcdump's window (session.c); the
 * session is stopped as soon as the dump's GC has ended. Then the worker has this long to write it. */
#define COLLECT_GCDUMP_WINDOW_USEC (30 * USEC_PER_SEC)
#define COLLECT_GCDUMP_WRITE_USEC (120 * USEC_PER_SEC)
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
        Policy *policy;             /* a reference: the table lives in it */
        const PolicyCollect *table;
        Target *target;
        uid_t owner;                /* the process's: its jobs and its session are charged to it */
        RuntimeCall *call;
        JobCall job;
        uint64_t session_id;
        int stream_fd, dir_fd, file_fd;
        int text_fd;                /* then.stacks, then.exceptions: the text, an unnamed file of dump_dir too */
        MonitorThrown thrown;       /* then.exceptions: the exception that fired the table, as its watch saw it */
        bool have_thrown;
        int control_fd;             /* then.gcdump: the agent's end of the worker's control socket */
        sd_event_source *control_source;
        unsigned slot;
        AdmissionKey key;           /* one of the process's sessions (max_sessions_per_target) while admitted */
        bool admitted, have_slot, stop_sent, started;
        bool stopped_whole;         /* then.gcdump: stopped once the worker said the dump was whole */
        sd_event_source *stop_timer;
        char *providers_text;       /* as the runtime was asked, for the session records */
        uint64_t started_usec;
        bool start_recorded, end_recorded;
        /* the session's start and end, the file's record and the table's: held before the runtime is asked */
        AuditReservation audit_room;
};

static Broker *broker_of(const CollectTrace *t) {
        return t->set->broker;
}

/* The session is over (its stream ended, or it never started): its seat among the process's sessions is
 * free. Once only: then.stacks still renders its text after, and trace_free() comes at the end of every path. */
static void release_seat(CollectTrace *t) {
        if (t->admitted)
                admission_end(broker_of(t)->admission, ADMISSION_SESSION, &t->key);
        t->admitted = false;
}

static void trace_free(CollectTrace *t) {
        for (CollectTrace **i = &t->set->traces; *i; i = &(*i)->next)
                if (*i == t) {
                        *i = t->next;
                        break;
                }
        t->set->n--;
        release_seat(t);
        if (t->job.job)
                worker_job_cancel(t->job.job);
        runtime_call_free(t->call);
        sd_event_source_disable_unref(t->stop_timer);
        sd_event_source_disable_unref(t->control_source);
        safe_close(t->control_fd);
        if (t->have_slot)
                dump_slots_release(broker_of(t)->dump_slots, t->slot);
        safe_close(t->stream_fd);
        safe_close(t->file_fd);
        safe_close(t->text_fd);
        safe_close(t->dir_fd);
        audit_reservation_release(&t->audit_room);
        monitor_thrown_done(&t->thrown);
        target_unref(t->target);
        policy_unref(t->policy);
        free(t->providers_text);
        free(t);
}

static uint32_t buffer_mb(const Policy *p);

/* then.stacks: a stacks session, as dsctl stacks asks, whose nettrace becomes text (else a trace's). */
static bool is_stacks(const CollectTrace *t) {
        return t->table->then == POLICY_COLLECT_THEN_STACKS;
}

/* then.counters: a counters session, as dsctl counters asks, whose nettrace becomes its CSV. */
static bool is_counters(const CollectTrace *t) {
        return t->table->then == POLICY_COLLECT_THEN_COUNTERS;
}

/* then.gcdump: a heap dump session, as dsctl gcdump asks, whose stream a worker makes a .gcdump of. */
static bool is_gcdump(const CollectTrace *t) {
        return t->table->then == POLICY_COLLECT_THEN_GCDUMP;
}

/* then.exceptions: an exceptions session, as dsctl exceptions asks, whose nettrace becomes text. */
static bool is_exceptions(const CollectTrace *t) {
        return t->table->then == POLICY_COLLECT_THEN_EXCEPTIONS;
}

/* Its nettrace is never named: a worker renders it, and the rendering is published. */
static bool is_rendered(const CollectTrace *t) {
        return is_stacks(t) || is_counters(t) || is_exceptions(t);
}

static const char *action_of(const CollectTrace *t) {
        return is_stacks(t)       ? "stacks"
               : is_counters(t)   ? "counters"
               : is_gcdump(t)     ? "gcdump"
               : is_exceptions(t) ? "exceptions"
                                  : "trace";
}

/* How long the session runs before StopTracing: stacks take a moment's samples, as dsctl stacks does;
 * a heap dump is stopped once it is whole, and at the end of dsctl gcdump's window at the latest. */
static uint64_t duration_of(const CollectTrace *t) {
        uint64_t most = t->policy->agent.max_session_duration_usec;

        if (is_gcdump(t))
                return COLLECT_GCDUMP_WINDOW_USEC < most ? COLLECT_GCDUMP_WINDOW_USEC : most;
        return is_stacks(t) ? MONITOR_STACKS_SAMPLE_USEC : t->table->duration_usec;
}

/* The session's start and end records, as a client's trace gets, with the table for its rule. */
static void record_session(CollectTrace *t, bool ended, uint64_t bytes, const char *how, bool complete) {
        Broker *b = broker_of(t);
        uint64_t now = 0;
        AuditSessionEvent e = {
                .ended = ended,
                .origin = "collect",
                .requester = 0,
                .target_pid = t->target->pid,
                .target_uid = target_euid(t->target),
                .target_unit = t->target->unit,
                .target_exe = t->target->exe,
                .target_container_id = t->target->container_id,
                .target_pod_uid = t->target->pod_uid,
                .target_cgroup = t->target->cgroup,
                .target_cgroup_vouched = t->target->cgroup_vouched,
                .rule = t->table->name,
                .kind = action_of(t),
                .profile = t->table->then == POLICY_COLLECT_THEN_TRACE ? t->table->trace_profile : NULL,
                .providers = t->providers_text,
                .buffer_mb = buffer_mb(t->policy),
                .duration_limit_usec = duration_of(t),
                .size_limit = t->policy->agent.max_trace_size,
                .bytes = bytes,
                .how = how,
                .complete = complete,
                .reservation = &t->audit_room,
        };

        (void)sd_event_now(b->event, CLOCK_MONOTONIC, &now);
        e.duration_usec = now - t->started_usec;
        if (ended)
                t->end_recorded = true;
        else
                t->start_recorded = true;
        (void)audit_log_session(b->config.audit_sink, &e);
}

/* The table's collect record of how the action ended: "failed" for @result's reason. */
static void trace_fail(CollectTrace *t, const char *result) {
        collect_record_result(broker_of(t), t->table, t->target, action_of(t), "failed", result, NULL, 0, &t->audit_room);
        trace_free(t);
}

/* ... or "collected": the file @path of @size bytes, which @result names. */
static void trace_collected(CollectTrace *t, const char *result, const char *path, uint64_t size) {
        collect_record_result(broker_of(t), t->table, t->target, action_of(t), "collected", result, path, size,
                              &t->audit_room);
        trace_free(t);
}

/* publish(): the artifact was named, but its record could not be written: it was removed again, and that
 * was told (collect_record_removed()) */
#define PUBLISH_E_REMOVED 2000

/* Root's, exactly the table's readers, labelled as a trace (or stacks) of the process that nobody asked for,
 * then recorded. Return: 0, DUMP_PUBLISH_E_*, PUBLISH_E_REMOVED, or a negative errno. */
static int publish(CollectTrace *t, int fd, uint64_t size, char *ret_path, size_t path_size) {
        AclGrant readers = { .users = t->table->reader_users.ids, .n_users = t->table->reader_users.n,
                             .groups = t->table->reader_groups.ids, .n_groups = t->table->reader_groups.n };
        DumpAttributes attrs = {
                .requester = 0,
                .target_pid = t->target->pid,
                .target_uid = target_euid(t->target),
                .target_unit = t->target->unit,
                .target_exe = t->target->exe,
                .target_name = t->target->name,
                .dump_type = action_of(t),
        };
        char name[256];
        int r;

        r = dump_publish_for_table(t->dir_fd, fd, &readers, &attrs, action_of(t), "collect", t->table->name,
                                   is_stacks(t) || is_exceptions(t) ? ".txt"
                                   : is_counters(t)                 ? ".csv"
                                   : is_gcdump(t)                   ? ".gcdump"
                                                                    : ".nettrace",
                                   name, sizeof(name));
        if (r != 0)
                return r;
        snprintf(ret_path, path_size, "%s/%s", t->policy->agent.dump_dir, name);
        r = collect_record_artifact(broker_of(t), t->policy, t->dir_fd, name, &(AuditDumpEvent){
                .origin = "collect", .requester = 0, .target_pid = t->target->pid, .target_uid = attrs.target_uid,
                .target_unit = attrs.target_unit, .target_exe = attrs.target_exe,
                .target_container_id = t->target->container_id, .target_pod_uid = t->target->pod_uid,
                .target_cgroup = t->target->cgroup, .target_cgroup_vouched = t->target->cgroup_vouched,
                .rule = t->table->name, .path = ret_path, .size = size, .dump_type = attrs.dump_type,
                .readable = readers.n_users + readers.n_groups > 0, .reservation = &t->audit_room });
        if (r < 0) {
                collect_record_removed(broker_of(t), t->table, t->target, action_of(t), r, &t->audit_room);
                return PUBLISH_E_REMOVED;
        }
        return 0;
}

/* then.stacks, then.counters: the text is written; it is published, or the record says why not. */
static void rendered(void *userdata, int r, uint64_t bytes, const char *why) {
        CollectTrace *t = userdata;
        char path[PATH_MAX] = "", result[PATH_MAX + 64];

        if (r == 0)
                r = publish(t, t->text_fd, bytes, path, sizeof(path));
        if (r == PUBLISH_E_REMOVED) {
                trace_free(t);
                return;
        }
        if (r == 0)
                snprintf(result, sizeof(result), "%s (%" PRIu64 " bytes)", path, bytes);
        else
                snprintf(result, sizeof(result), "cannot store the %s: %s", action_of(t),
                         r == JOBS_E_NO_SPACE || r == DUMP_PUBLISH_E_NO_SPACE ? (why ? why : "no space in dump_dir")
                         : r < 0                                             ? strerror(-r)
                                                                             : "the worker failed");
        if (r != 0) {
                trace_fail(t, result);
                return;
        }
        trace_collected(t, result, path, bytes);
}

/*
 * then.stacks: a worker turns the session's nettrace into the text dsctl stacks prints; then.counters:
 * into the CSV dsctl counters --format csv prints; then.exceptions: into the text dsctl exceptions
 * prints, with the exception that fired the table among them.
 */
static void render(CollectTrace *t) {
        DumpLimits limits = { .max_use = t->policy->agent.max_use, .keep_free = t->policy->agent.keep_free };
        char result[128];
        int r;

        t->text_fd = openat(t->dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        r = t->text_fd < 0 ? -errno
            : is_counters(t) ? jobs_counters_csv(broker_of(t), t->owner, t->file_fd, t->text_fd, t->dir_fd,
                                                 &limits, t->providers_text, rendered, t, &t->job)
            : is_exceptions(t) ? jobs_exceptions_text(broker_of(t), t->owner, t->file_fd, t->text_fd, t->dir_fd,
                                                      &limits, t->have_thrown ? &t->thrown : NULL, rendered, t,
                                                      &t->job)
                               : jobs_stacks_text(broker_of(t), t->owner, t->file_fd, t->text_fd, t->dir_fd,
                                                  &limits, rendered, t, &t->job);
        if (r != 0) {
                snprintf(result, sizeof(result), "cannot write the %s: %s", action_of(t),
                         r < 0 ? strerror(-r) : "no worker free");
                trace_fail(t, result);
        }
}

static void recorded(void *userdata, int r, bool ended, const char *why) {
        CollectTrace *t = userdata;
        char path[PATH_MAX] = "", result[PATH_MAX + 64];
        const char *how = jobs_trace_end(r, ended, t->stop_sent);
        struct stat st;
        uint64_t size;
        int p = -ENODATA;

        release_seat(t); /* the worker no longer reads the stream: the runtime has ended the session */
        size = fstat(t->file_fd, &st) == 0 ? (uint64_t)st.st_size : 0;
        if (is_rendered(t) && size > 0) {
                /* the session is over; what becomes of its bytes is the collect record's to say */
                record_session(t, true, size, how, r == 0 && ended && t->stop_sent);
                render(t);
                return;
        }
        if (size > 0)
                p = publish(t, t->file_fd, size, path, sizeof(path));
        /* the end record follows the file's, as a startup trace's does: it says whether it was stored */
        record_session(t, true, size, p == 0 || size == 0 ? how : "not-stored", p == 0 && r == 0 && ended && t->stop_sent);
        if (p == PUBLISH_E_REMOVED) {
                trace_free(t);
                return;
        }
        if (size == 0)
                snprintf(result, sizeof(result), "the trace is empty%s%s", why ? ": " : "", why ? why : "");
        else if (p != 0)
                snprintf(result, sizeof(result), "cannot store the trace: %s",
                         p > 0 ? "no space in dump_dir" : strerror(-p));
        else
                snprintf(result, sizeof(result), "%s (%" PRIu64 " bytes%s)", path, size,
                         r == JOBS_E_NO_SPACE ? ", cut: dump_dir is full"
                         : !ended                    ? ", cut at max_trace_size"
                                                     : "");
        if (p != 0) {
                trace_fail(t, result);
                return;
        }
        trace_collected(t, result, path, size);
}

/* A refused or lost StopTracing changes nothing: the stream still ends, with the process, at
 * max_trace_size or at the worker's deadline. */
static void stop_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        CollectTrace *t = userdata;

        t->call = runtime_call_free(t->call);
}

/* StopTracing, once: the runtime writes its rundown and ends the stream. */
static void stop_session(CollectTrace *t) {
        uint8_t request[DOTNET_IPC_HEADER_SIZE + 8];
        const char *why = NULL;
        size_t size;
        int fd;

        t->stop_timer = sd_event_source_disable_unref(t->stop_timer);
        if (t->stop_sent || t->call)
                return;
        if (dotnet_ipc_stop_tracing_encode(t->session_id, request, sizeof(request), &size) != 0 ||
            target_connect(t->target, &fd, &why) != 0)
                return; /* the process went: its stream ends with it */
        if (runtime_call_start(broker_of(t)->event, fd, request, size, broker_of(t)->config.runtime_timeout_usec,
                               stop_done, t, &t->call) == 0)
                t->stop_sent = true;
}

static int on_duration_over(sd_event_source *s, uint64_t usec, void *userdata) {
        stop_session(userdata);
        return 0;
}

/* then.gcdump: the worker says the dump's GC has ended; its end (or its death) ends the socket. */
static int on_control(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        CollectTrace *t = userdata;
        char c = 0;
        ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0) {
                t->control_source = sd_event_source_disable_unref(t->control_source);
                return 0;
        }
        if (c == JOBS_GCDUMP_DUMPED && !t->stop_sent) {
                stop_session(t);
                t->stopped_whole = t->stop_sent;
        }
        return 0;
}

/* then.gcdump: the session is over and the worker wrote the .gcdump, or says why not. */
static void gcdump_recorded(void *userdata, int r, const JobGcdumpResult *res, const char *why) {
        CollectTrace *t = userdata;
        char path[PATH_MAX] = "", result[PATH_MAX + 320];
        /* the session's end: what the heap came to is the collect record's to say */
        int stream_r = r == JOBS_E_NO_HEAP ? 0 : r;
        /* "stopped" as a client's session that dsctl gcdump stops once the dump is whole; "duration": the
         * window ran out first */
        const char *how = stream_r == 0 && res->ended && t->stopped_whole ? "stopped"
                                                                           : jobs_trace_end(stream_r, res->ended, t->stop_sent);

        release_seat(t); /* the worker no longer reads the stream: the session is over */
        record_session(t, true, res->stream_bytes, how, stream_r == 0 && res->ended && t->stop_sent);
        if (r == 0)
                r = publish(t, t->file_fd, res->bytes, path, sizeof(path));
        if (r == PUBLISH_E_REMOVED) {
                trace_free(t);
                return;
        }
        if (r == 0) {
                snprintf(result, sizeof(result), "%s (%" PRIu64 " bytes)", path, res->bytes);
                trace_collected(t, result, path, res->bytes);
                return;
        }
        if (r == JOBS_E_NO_HEAP)
                snprintf(result, sizeof(result), "no heap dump: %s", why ? why : "the stream made none");
        else if (r == JOBS_E_NO_SPACE || r == DUMP_PUBLISH_E_NO_SPACE)
                snprintf(result, sizeof(result), "cannot store the heap dump: %s", why ? why : "no space in dump_dir");
        else if (r == JOBS_E_TIMEOUT)
                snprintf(result, sizeof(result), "cannot take the heap dump: the worker did not finish in time");
        else
                snprintf(result, sizeof(result), "cannot take the heap dump: %s",
                         r < 0 ? strerror(-r) : "the worker failed");
        trace_fail(t, result);
}

/* then.gcdump: the worker reads the stream, tells when the dump is whole, and writes the .gcdump. */
static int start_gcdump(CollectTrace *t, const DumpLimits *limits, uint64_t timeout) {
        Broker *b = broker_of(t);
        _cleanup_close_ int theirs = -EBADF;
        int sv[2], r;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
                return -errno;
        t->control_fd = sv[0];
        theirs = sv[1];
        r = sd_event_add_io(b->event, &t->control_source, t->control_fd, EPOLLIN, on_control, t);
        if (r < 0)
                return r;
        return jobs_record_gcdump(b, t->owner, t->stream_fd, t->file_fd, t->dir_fd, theirs, limits, t->slot,
                                  t->policy->agent.max_trace_size, timeout + COLLECT_GCDUMP_WRITE_USEC, gcdump_recorded,
                                  t, &t->job);
}

/* The unnamed file in dump_dir, a slot for its bytes, and the worker that writes it. */
static int start_recording(CollectTrace *t) {
        Broker *b = broker_of(t);
        DumpLimits limits = { .max_use = t->policy->agent.max_use, .keep_free = t->policy->agent.keep_free };
        uint64_t timeout = duration_of(t) + COLLECT_STOP_GRACE_USEC + b->config.runtime_timeout_usec;
        int r;

        r = dump_slots_claim(b->dump_slots, &t->slot);
        if (r < 0)
                return r;
        t->have_slot = true;
        r = is_gcdump(t) ? start_gcdump(t, &limits, timeout)
                         : jobs_record_trace(b, t->owner, t->stream_fd, t->file_fd, t->dir_fd, &limits,
                                             t->slot, t->policy->agent.max_trace_size, timeout, recorded, t, &t->job);
        if (r != 0)
                return r;
        /* the worker holds the stream now: when it stops reading, the runtime ends the session */
        t->stream_fd = safe_close(t->stream_fd);
        return sd_event_add_time_relative(b->event, &t->stop_timer, CLOCK_MONOTONIC, duration_of(t), 0,
                                          on_duration_over, t);
}

static void started(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        CollectTrace *t = userdata;
        char text[192];
        int r;

        if (error != 0 || !reply->ok) {
                snprintf(text, sizeof(text), "the runtime did not start the session: %s",
                         error != 0 ? runtime_call_error_text(error) : "it refused it");
                trace_fail(t, text);
                return;
        }
        t->stream_fd = runtime_call_take_fd(call);
        r = dotnet_ipc_session_id_decode(reply, &t->session_id);
        t->call = runtime_call_free(t->call);
        if (r != 0) {
                trace_fail(t, "the runtime sent a malformed session reply");
                return;
        }
        (void)sd_event_now(broker_of(t)->event, CLOCK_MONOTONIC, &t->started_usec);
        r = start_recording(t);
        if (r != 0) {
                snprintf(text, sizeof(text), "cannot record the trace: %s", r < 0 ? strerror(-r) : "no worker free");
                trace_fail(t, text); /* the stream closes: the session ends */
                return;
        }
        record_session(t, false, 0, NULL, false);
}

static uint32_t buffer_mb(const Policy *p) {
        unsigned most = p->agent.max_trace_buffer_mb;

        return most < EVENTPIPE_BUFFER_MB_DEFAULT ? most : EVENTPIPE_BUFFER_MB_DEFAULT;
}

/* The session's providers: the table's profile, dsctl stacks', gcdump's, exceptions' or counters' (every second). */
static int config_of(const CollectTrace *t, EventPipeConfig *ret) {
        const PolicyStringList *names = &t->table->counters_providers;
        char session_id[TEXT_HEX_ID_SIZE];
        int r;

        if (is_stacks(t))
                return monitor_stacks_config(ret);
        if (is_gcdump(t))
                return monitor_gcdump_config(ret);
        if (is_exceptions(t))
                return monitor_exceptions_config(ret);
        if (!is_counters(t))
                return eventpipe_profile_config(t->table->trace_profile, ret);
        r = collect_session_id(session_id);
        if (r < 0)
                return r;
        return eventpipe_counters_config((const char *const *)names->items, names->n, 1, session_id, ret);
}

/* dump_dir, the file, and the session's request sent. Return: 0, or a reason in @why. */
static int begin(CollectTrace *t, char *why, size_t why_size) {
        _cleanup_(eventpipe_config_done) EventPipeConfig config = EVENTPIPE_CONFIG_NULL;
        _cleanup_free_ uint8_t *collect = malloc(DOTNET_IPC_MESSAGE_MAX);
        const char *detail = NULL;
        size_t size;
        int fd, r;

        r = dump_dir_open(t->policy->agent.dump_dir, &t->dir_fd, &detail);
        if (r == 0) {
                t->file_fd = openat(t->dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
                r = t->file_fd < 0 ? -errno : 0;
        }
        if (r != 0) {
                snprintf(why, why_size, "cannot use dump_dir: %s%s%s", detail ? detail : "", detail ? ": " : "",
                         r < 0 ? strerror(-r) : "unsafe");
                return 1;
        }
        if (!collect || config_of(t, &config) != 0 ||
            !(t->providers_text = eventpipe_config_to_string(&config)) ||
            dotnet_ipc_collect_tracing_encode(&config, buffer_mb(t->policy), collect, DOTNET_IPC_MESSAGE_MAX, &size) != 0) {
                snprintf(why, why_size, "cannot set up the session");
                return 1;
        }
        /* the session's start and end, the file's record and the table's: room for them before the runtime is asked */
        if (audit_reserve(broker_of(t)->config.audit_sink, 4, &t->audit_room) != 0) {
                snprintf(why, why_size, "not started: the audit output takes no records now (its reader stopped)");
                return 1;
        }
        r = target_connect(t->target, &fd, &detail);
        if (r == 0)
                r = runtime_call_start(broker_of(t)->event, fd, collect, size, broker_of(t)->config.runtime_timeout_usec,
                                       started, t, &t->call);
        if (r != 0) {
                snprintf(why, why_size, "cannot reach the runtime%s%s", detail ? ": " : "", detail ? detail : "");
                return 1;
        }
        return 0;
}

/*
 * The session is one of the process's, as a client's and the watch's are: it counts against
 * max_sessions_per_target, and against its owner's max_sessions_per_user with the owner's own.
 * Return: 0 (admitted), or a reason in @why.
 */
static int admit(CollectTrace *t, char *why, size_t why_size) {
        const char *busy = NULL;
        int r;

        r = admission_begin_agent_session(broker_of(t)->admission, t->target->pid, t->target->start_time,
                                          t->owner, t->policy->agent.max_sessions_per_target,
                                          t->policy->agent.max_sessions_per_user, &t->key, &busy);
        if (r != 0) {
                snprintf(why, why_size, "not traced: %s", r == ADMISSION_E_BUSY && busy ? busy : strerror(-r));
                return 1;
        }
        t->admitted = true;
        return 0;
}

/* Does a trace of one of @owner's processes run? */
static bool owner_traced(const CollectTraces *s, uid_t owner) {
        for (const CollectTrace *t = s->traces; t; t = t->next)
                if (t->owner == owner)
                        return true;
        return false;
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
        *t = (CollectTrace){ .set = s, .next = s->traces, .policy = policy_ref(policy), .table = table,
                             .target = target_ref(target), .owner = owner, .stream_fd = -EBADF, .dir_fd = -EBADF,
                             .file_fd = -EBADF, .text_fd = -EBADF, .control_fd = -EBADF };
        s->traces = t;
        s->n++;
        if (thrown && is_exceptions(t)) {
                if (monitor_thrown_copy(thrown, &t->thrown) < 0) {
                        snprintf(why, why_size, "not traced: out of memory");
                        trace_free(t);
                        return 1;
                }
                t->have_thrown = true;
        }
        if (admit(t, why, why_size) != 0 || begin(t, why, why_size) != 0) {
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
        while (s->traces) {
                /* its start was recorded: so is its end, though what it had collected goes with the agent */
                struct stat st;

                if (s->traces->start_recorded && !s->traces->end_recorded)
                        record_session(s->traces, true, fstat(s->traces->file_fd, &st) == 0 ? (uint64_t)st.st_size : 0,
                                       "agent-stopped", false);
                trace_free(s->traces);
        }
        free(s);
        return NULL;
}
