/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Collection from a runtime's first instruction (on-start.h): owns the startup traces of the
 * policy's [[on_start]]; ports.c calls it as a runtime connects in.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "broker-state.h"
#include "cleanup.h"
#include "decision.h"
#include "dotnet-ipc.h"
#include "dump-publish.h"
#include "dump-writer.h"
#include "jobs.h"
#include "on-start.h"
#include "ports.h"
#include "runtime-call.h"
#include "session-config.h"

#define USEC_PER_SEC 1000000ULL
/* After StopTracing the runtime writes its rundown, then ends the stream (as session.c allows). */
#define STARTUP_STOP_GRACE_USEC (60 * USEC_PER_SEC)
/* A startup trace's jobs are its runtime's owner's (StartupTrace.uid), one trace of each owner at a time:
 * its worker is one of the owner's BROKER_WORKERS_PER_USER. */
_Static_assert(BROKER_WORKERS_PER_USER >= 1, "an owner's startup trace has a worker");
/* Processes traced lately, each traced once: a runtime registered on two ports, re-advertised with a
 * new cookie, or exec'd (the same process) gets no second trace while it is remembered here. */
#define STARTUP_TRACED_REMEMBERED 256

typedef struct StartupTrace StartupTrace;

typedef struct TracedProcess {
        pid_t pid;
        uint64_t start_time; /* with the pid, one process for the whole boot */
} TracedProcess;

struct StartupTraces {
        Broker *broker;
        StartupTrace *traces;
        unsigned n_admitted;  /* traces past the limits, from the match to their end */
        TracedProcess traced[STARTUP_TRACED_REMEMBERED];
        size_t n_traced, next_traced;
};

struct StartupTrace {
        StartupTraces *set;
        StartupTrace *next;
        uint64_t runtime_id;      /* the registration (ports.h), looked up at every step: it may go */
        pid_t pid;
        uid_t uid;                /* whom it counts against: the runtime's charged uid (userns.h) */
        Policy *policy;           /* a reference: the rule lives in it */
        const PolicyOnStart *rule;
        Target *target;           /* pinned by a worker: the file's labels and the records */
        JobCall job;              /* pinning the process, then recording the stream */
        PortWaiter *waiter;
        RuntimeCall *call;
        EventPipeConfig config;
        char *providers_text;
        uint64_t session_id;
        int stream_fd, dir_fd, file_fd;
        unsigned slot;
        AdmissionKey key;         /* one of the process's sessions (max_sessions_per_target) while seated */
        bool have_slot, admitted, seated, recording, stop_sent;
        bool resume_only;         /* the process is traced through another registration: only resume this one */
        AuditReservation audit_room; /* for the session's start and end and the file's record, before it starts */
        sd_event_source *stop_timer;
        uint64_t started_usec;
};

static Broker *broker_of(const StartupTrace *t) {
        return t->set->broker;
}

static PortRuntime *runtime_of(const StartupTrace *t) {
        return ports_runtime_by_id(broker_of(t)->ports, t->runtime_id);
}

static void trace_free(StartupTrace *t) {
        if (!t)
                return;
        for (StartupTrace **i = &t->set->traces; *i; i = &(*i)->next)
                if (*i == t) {
                        *i = t->next;
                        break;
                }
        if (t->admitted)
                t->set->n_admitted--;
        if (t->seated)
                admission_end(broker_of(t)->admission, ADMISSION_SESSION, &t->key);
        if (t->job.job)
                worker_job_cancel(t->job.job);
        ports_waiter_cancel(t->waiter);
        runtime_call_free(t->call);
        sd_event_source_disable_unref(t->stop_timer);
        if (t->have_slot)
                dump_slots_release(broker_of(t)->dump_slots, t->slot);
        audit_reservation_release(&t->audit_room);
        safe_close(t->stream_fd);
        safe_close(t->file_fd);
        safe_close(t->dir_fd);
        eventpipe_config_done(&t->config);
        free(t->providers_text);
        target_unref(t->target);
        policy_unref(t->policy);
        free(t);
}

/* Tells the port how the runtime's start went, if it is still registered. */
static void startup_done(StartupTrace *t, bool resumed, const char *reason) {
        PortRuntime *rt = runtime_of(t);

        if (rt)
                port_runtime_startup_done(rt, resumed, reason);
}

/* The trace will not run: the port goes on as for a runtime no [[on_start]] covers, after a record. */
static void startup_give_up(StartupTrace *t, const char *event, const char *reason) {
        PortRuntime *rt = runtime_of(t);

        if (rt) {
                port_runtime_record(rt, event, reason);
                port_runtime_startup_done(rt, false, NULL);
        }
        trace_free(t);
}

static uint32_t buffer_mb(const StartupTrace *t);

static void record_session(StartupTrace *t, bool ended, uint64_t bytes, const char *how, bool complete) {
        Broker *b = broker_of(t);
        uint64_t now = 0;
        AuditSessionEvent e = {
                .ended = ended,
                .origin = "on_start",
                .requester = 0,
                .target_pid = t->pid,
                .target_uid = target_euid(t->target),
                .target_unit = t->target->unit,
                .target_exe = t->target->exe,
                .target_container_id = t->target->container_id,
                .target_pod_uid = t->target->pod_uid,
                .target_cgroup = t->target->cgroup,
                .target_cgroup_vouched = t->target->cgroup_vouched,
                .rule = t->rule->name,
                .kind = "trace",
                .profile = t->rule->trace_profile,
                .providers = t->providers_text,
                .buffer_mb = buffer_mb(t),
                .duration_limit_usec = t->rule->duration_usec,
                .size_limit = t->rule->max_size,
                .bytes = bytes,
                .how = how,
                .complete = complete,
                .reservation = &t->audit_room,
        };

        (void)sd_event_now(b->event, CLOCK_MONOTONIC, &now);
        e.duration_usec = now - t->started_usec;
        (void)audit_log_session(b->config.audit_sink, &e);
}

/* ---- the end: the file is published, or dropped ---- */

/* publish(): the trace was named, but its record could not be written: it was removed again */
#define PUBLISH_E_REMOVED 2000

/* Root's, exactly the rule's readers, labelled as a trace of the process; the agent asked for it. Recorded,
 * or removed again when its record cannot be written (unless audit_failure = "allow"), as a client's dump is.
 * Return: 0, DUMP_PUBLISH_E_*, PUBLISH_E_REMOVED (the record's errno in *@ret_audit_r), or a negative errno. */
static int publish(StartupTrace *t, uint64_t size, char *ret_path, size_t path_size, int *ret_audit_r) {
        Broker *b = broker_of(t);
        AclGrant readers = { .users = t->rule->reader_users.ids, .n_users = t->rule->reader_users.n,
                             .groups = t->rule->reader_groups.ids, .n_groups = t->rule->reader_groups.n };
        DumpAttributes attrs = {
                .requester = 0,
                .target_pid = t->pid,
                .target_uid = target_euid(t->target),
                .target_unit = t->target->unit,
                .target_exe = t->target->exe,
                .target_name = t->target->name,
                .dump_type = "trace",
        };
        char name[256];
        int r;

        /* an existing file is never replaced: another name, as a second dump of the same second gets */
        r = dump_publish_trace(t->dir_fd, t->file_fd, &readers, &attrs, "on_start", t->rule->name, name, sizeof(name));
        if (r != 0)
                return r;
        snprintf(ret_path, path_size, "%s/%s", t->policy->agent.dump_dir, name);
        r = audit_log_dump(b->config.audit_sink, &(AuditDumpEvent){
                .origin = "on_start", .requester = 0, .target_pid = t->pid, .target_uid = attrs.target_uid,
                .target_unit = attrs.target_unit, .target_exe = attrs.target_exe,
                .target_container_id = t->target->container_id, .target_pod_uid = t->target->pod_uid,
                .target_cgroup = t->target->cgroup, .target_cgroup_vouched = t->target->cgroup_vouched,
                .rule = t->rule->name, .path = ret_path, .size = size,
                .dump_type = "trace", .readable = readers.n_users + readers.n_groups > 0,
                .duration_usec = 0, .reservation = &t->audit_room });
        if (r < 0 && !t->policy->agent.audit_failure_allow) {
                (void)unlinkat(t->dir_fd, name, 0);
                *ret_audit_r = r;
                return PUBLISH_E_REMOVED;
        }
        return 0;
}

static void recorded(void *userdata, int r, bool ended, const char *why) {
        StartupTrace *t = userdata;
        const char *how = jobs_trace_end(r, ended, t->stop_sent);
        char path[PATH_MAX] = "";
        struct stat st;
        uint64_t size;
        int p = 0, audit_r = 0;

        t->recording = false;
        size = fstat(t->file_fd, &st) == 0 ? (uint64_t)st.st_size : 0;
        if (size == 0)
                fprintf(stderr, "dsagent: [[on_start]] %s: the trace of pid %d is empty (%s)%s%s\n", t->rule->name,
                        (int)t->pid, how, why ? ": " : "", why ? why : "");
        else
                p = publish(t, size, path, sizeof(path), &audit_r);
        if (p == PUBLISH_E_REMOVED)
                fprintf(stderr, "dsagent: [[on_start]] %s: the trace of pid %d was removed: its audit record could not "
                        "be written (%s)\n", t->rule->name, (int)t->pid, strerror(-audit_r));
        else if (p != 0)
                fprintf(stderr, "dsagent: [[on_start]] %s: cannot store the trace of pid %d: %s\n", t->rule->name,
                        (int)t->pid, p > 0 ? "no space in dump_dir" : strerror(-p));
        if (p != 0)
                how = "not-stored"; /* the end record says the bytes were lost, not how the session ended */
        record_session(t, true, size, how, p == 0 && r == 0 && ended && t->stop_sent);
        trace_free(t);
}

/* ---- the stop, once the rule's duration is over ---- */

/* A refused or lost StopTracing changes nothing: the stream still ends, with the process, at max_size
 * or at the worker's deadline. (Its reply and the stream's end come on two connections, in either order.) */
static void stop_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        StartupTrace *t = userdata;

        t->call = runtime_call_free(t->call);
}

static void stop_connected(int fd, int error, void *userdata) {
        StartupTrace *t = userdata;
        uint8_t request[DOTNET_IPC_HEADER_SIZE + 8];
        size_t size;

        t->waiter = NULL;
        if (fd < 0)
                return; /* the process went, or its port: its stream ends with it */
        if (dotnet_ipc_stop_tracing_encode(t->session_id, request, sizeof(request), &size) != 0 ||
            runtime_call_start(broker_of(t)->event, fd, request, size, broker_of(t)->config.runtime_timeout_usec,
                               stop_done, t, &t->call) != 0) {
                safe_close(fd);
                return;
        }
        t->stop_sent = true;
}

static int on_duration_over(sd_event_source *s, uint64_t usec, void *userdata) {
        StartupTrace *t = userdata;
        PortRuntime *rt = runtime_of(t);
        int fd = -EBADF, r;

        if (rt && (t->waiter || t->call)) /* the resume still goes on: the stop comes right after */
                return sd_event_source_set_time_relative(s, USEC_PER_SEC) < 0 ? 0
                                                                              : sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        t->stop_timer = sd_event_source_disable_unref(t->stop_timer);
        if (!rt)
                return 0;
        r = ports_connect(rt, stop_connected, t, &fd, &t->waiter);
        if (r == 0)
                stop_connected(fd, 0, t);
        return 0;
}

/* ---- the resume ---- */

static void resume_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        StartupTrace *t = userdata;
        PortRuntime *rt = runtime_of(t);
        char why[160];

        t->call = runtime_call_free(t->call);
        if (!rt) {
                if (t->resume_only)
                        trace_free(t);
                return;
        }
        if (error != 0 || !reply->ok) {
                snprintf(why, sizeof(why), "[[on_start]] %s: the runtime did not take the agent's ResumeRuntime: %s",
                         t->rule->name, error != 0 ? runtime_call_error_text(error) : "it refused the command");
                port_runtime_record(rt, "resume-failed", why);
                port_runtime_startup_done(rt, false, NULL);
        } else {
                port_runtime_resumed(rt);
                snprintf(why, sizeof(why), "running: resumed by the agent once [[on_start]] %s had started its trace",
                         t->rule->name);
                port_runtime_startup_done(rt, true, why);
        }
        if (t->resume_only)
                trace_free(t);
}

static void resume_connected(int fd, int error, void *userdata) {
        StartupTrace *t = userdata;
        uint8_t request[DOTNET_IPC_HEADER_SIZE];
        size_t size;

        t->waiter = NULL;
        if (fd < 0) {
                if (error != -ESRCH)
                        startup_done(t, false, NULL); /* the port's own suspend_timeout takes over */
                if (t->resume_only)
                        trace_free(t);
                return;
        }
        if (dotnet_ipc_request_encode(DOTNET_IPC_RESUME_RUNTIME, NULL, 0, request, sizeof(request), &size) != 0 ||
            runtime_call_start(broker_of(t)->event, fd, request, size, broker_of(t)->config.runtime_timeout_usec,
                               resume_done, t, &t->call) != 0) {
                safe_close(fd);
                startup_done(t, false, NULL);
                if (t->resume_only)
                        trace_free(t);
        }
}

/* Resumes the runtime through @t's registration; a @t that only resumes is freed once that is done. */
static void resume(StartupTrace *t) {
        PortRuntime *rt = runtime_of(t);
        int fd = -EBADF, r;

        if (!rt) {
                if (t->resume_only)
                        trace_free(t);
                return;
        }
        r = ports_connect(rt, resume_connected, t, &fd, &t->waiter);
        if (r == 0)
                resume_connected(fd, 0, t);
        else if (r < 0) {
                port_runtime_startup_done(rt, false, NULL);
                if (t->resume_only)
                        trace_free(t);
        }
}

/* ---- the session's start ---- */

/* dump_dir, the unnamed file, a slot for its bytes, and the worker that writes it. */
static int start_recording(StartupTrace *t, const char **ret_why) {
        Broker *b = broker_of(t);
        DumpLimits limits = { .max_use = t->policy->agent.max_use, .keep_free = t->policy->agent.keep_free };
        uint64_t timeout = t->rule->duration_usec + STARTUP_STOP_GRACE_USEC + b->config.runtime_timeout_usec;
        int r;

        r = dump_dir_open(t->policy->agent.dump_dir, &t->dir_fd, ret_why);
        if (r != 0)
                return r;
        t->file_fd = openat(t->dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (t->file_fd < 0)
                return -errno;
        r = dump_slots_claim(b->dump_slots, &t->slot);
        if (r < 0)
                return r;
        t->have_slot = true;
        r = jobs_record_trace(b, t->uid, t->stream_fd, t->file_fd, t->dir_fd, &limits, t->slot,
                              t->rule->max_size, timeout, recorded, t, &t->job);
        if (r != 0)
                return r;
        /* the worker holds the stream now: when it stops reading, the runtime ends the session */
        t->stream_fd = safe_close(t->stream_fd);
        t->recording = true;
        return sd_event_add_time_relative(b->event, &t->stop_timer, CLOCK_MONOTONIC, t->rule->duration_usec, 0,
                                          on_duration_over, t);
}

static void started(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        StartupTrace *t = userdata;
        const char *why = NULL;
        char text[256];
        int r;

        if (error != 0 || !reply->ok) {
                t->call = runtime_call_free(t->call);
                snprintf(text, sizeof(text), "[[on_start]] %s: the runtime did not start the session: %s", t->rule->name,
                         error != 0 ? runtime_call_error_text(error) : "it refused it");
                startup_give_up(t, "on-start-failed", text);
                return;
        }
        t->stream_fd = runtime_call_take_fd(call);
        r = dotnet_ipc_session_id_decode(reply, &t->session_id);
        t->call = runtime_call_free(t->call);
        if (r != 0) {
                startup_give_up(t, "on-start-failed", "the runtime sent a malformed session reply");
                return;
        }
        (void)sd_event_now(broker_of(t)->event, CLOCK_MONOTONIC, &t->started_usec);
        r = start_recording(t, &why);
        if (r != 0) {
                snprintf(text, sizeof(text), "[[on_start]] %s: cannot record the trace: %s%s%s", t->rule->name,
                         why ? why : "", why ? ": " : "", r < 0 ? strerror(-r) : "no room in dump_dir");
                startup_give_up(t, "on-start-failed", text); /* the stream closes: the session ends */
                return;
        }
        record_session(t, false, 0, NULL, false);
        resume(t);
}

/* The runtime's buffer for the session: its default, within the agent's max_trace_buffer_mb. */
static uint32_t buffer_mb(const StartupTrace *t) {
        unsigned most = t->policy->agent.max_trace_buffer_mb;

        return most < EVENTPIPE_BUFFER_MB_DEFAULT ? most : EVENTPIPE_BUFFER_MB_DEFAULT;
}

static void start_connected(int fd, int error, void *userdata) {
        StartupTrace *t = userdata;
        _cleanup_free_ uint8_t *collect = malloc(DOTNET_IPC_MESSAGE_MAX);
        size_t size;
        int r;

        t->waiter = NULL;
        if (fd < 0) {
                if (error == -ESRCH)
                        trace_free(t);
                else
                        startup_give_up(t, "on-start-failed", "the runtime did not connect again to be traced");
                return;
        }
        r = !collect ? -ENOMEM
                     : dotnet_ipc_collect_tracing_encode(&t->config, buffer_mb(t), collect, DOTNET_IPC_MESSAGE_MAX, &size);
        if (r == 0)
                r = runtime_call_start(broker_of(t)->event, fd, collect, size, broker_of(t)->config.runtime_timeout_usec,
                                       started, t, &t->call);
        else
                safe_close(fd);
        if (r != 0)
                startup_give_up(t, "on-start-failed", "the agent could not ask the runtime for the session");
}

/* The rule's providers as EventPipe asks for them: all keywords unless named, Verbose, with rundown. */
static int config_of(const PolicyOnStart *rule, EventPipeConfig *ret) {
        if (rule->trace_profile)
                return eventpipe_profile_config(rule->trace_profile, ret) == 0 ? 0 : -EINVAL;
        ret->providers = calloc(rule->n_trace_providers, sizeof(EventPipeProvider));
        if (!ret->providers)
                return -ENOMEM;
        ret->rundown = true;
        for (size_t i = 0; i < rule->n_trace_providers; i++) {
                ret->providers[i] = (EventPipeProvider){ .name = strdup(rule->trace_providers[i].name),
                                                         .keywords = rule->trace_providers[i].keywords,
                                                         .level = EVENTPIPE_LEVEL_MAX };
                ret->n_providers++;
                if (!ret->providers[i].name)
                        return -ENOMEM;
        }
        return 0;
}

static void start(StartupTrace *t, PortRuntime *rt) {
        int fd = -EBADF, r;

        if (config_of(t->rule, &t->config) < 0 || !(t->providers_text = eventpipe_config_to_string(&t->config))) {
                startup_give_up(t, "on-start-failed", "out of memory");
                return;
        }
        r = ports_connect(rt, start_connected, t, &fd, &t->waiter);
        if (r == 0)
                start_connected(fd, 0, t);
        else if (r < 0)
                startup_give_up(t, "on-start-failed", "the agent could not wait for the runtime's connection");
}

static bool traced_before(const StartupTraces *s, const Target *target) {
        for (size_t i = 0; i < s->n_traced; i++)
                if (s->traced[i].pid == target->pid && s->traced[i].start_time == target->start_time)
                        return true;
        return false;
}

static void remember_traced(StartupTraces *s, const Target *target) {
        s->traced[s->next_traced] = (TracedProcess){ .pid = target->pid, .start_time = target->start_time };
        s->next_traced = (s->next_traced + 1) % STARTUP_TRACED_REMEMBERED;
        if (s->n_traced < STARTUP_TRACED_REMEMBERED)
                s->n_traced++;
}

/*
 * The limits, counted from here to the trace's end (not from the runtime's answer, which a runtime
 * may delay): STARTUP_TRACES_MAX at once, one of each user's at a time, one per process, and the
 * session is one of the process's under max_sessions_per_target and one of its owner's under
 * max_sessions_per_user, as the owner's own sessions are (admission.h): charged to the runtime's
 * owner, never to root or to anyone else.
 */
static bool admit(StartupTrace *t, char *why, size_t why_size) {
        StartupTraces *s = t->set;
        const char *busy = NULL;
        int r;

        if (s->n_admitted >= STARTUP_TRACES_MAX) {
                snprintf(why, why_size, "[[on_start]] %s: not traced, %d startup traces run already", t->rule->name,
                         STARTUP_TRACES_MAX);
                return false;
        }
        for (const StartupTrace *o = s->traces; o; o = o->next)
                if (o->admitted && o->uid == t->uid) {
                        snprintf(why, why_size, "[[on_start]] %s: not traced, a startup trace of this user runs already",
                                 t->rule->name);
                        return false;
                }
        r = admission_begin_agent_session(broker_of(t)->admission, t->target->pid, t->target->start_time, t->uid,
                                          t->policy->agent.max_sessions_per_target,
                                          t->policy->agent.max_sessions_per_user, &t->key, &busy);
        if (r != 0) {
                snprintf(why, why_size, "[[on_start]] %s: not traced, %s", t->rule->name,
                         r == ADMISSION_E_BUSY && busy ? busy : strerror(-r));
                return false;
        }
        t->seated = true;
        t->admitted = true;
        s->n_admitted++;
        remember_traced(s, t->target);
        return true;
}

/* The process, pinned: is it the registered runtime, and which [[on_start]] covers it? */
static void opened(void *userdata, int r, Target *target) {
        StartupTrace *t = userdata;
        PortRuntime *rt = runtime_of(t);
        PolicyTarget pt;
        char why[256];

        t->target = target;
        if (!rt) {
                trace_free(t);
                return;
        }
        if (r != 0 || !port_runtime_is_target(rt, target)) {
                trace_free(t); /* exited, or ran exec: the port's own checks see to it */
                port_runtime_startup_done(rt, false, NULL);
                return;
        }
        pt = policy_target_of(target);
        t->rule = policy_on_start_match(t->policy, &pt);
        if (!t->rule) {
                trace_free(t);
                port_runtime_startup_done(rt, false, NULL);
                return;
        }
        if (traced_before(t->set, target)) {
                /* on two ports, or advertised again: its one trace started before any resume, and the
                 * runtime waits for every port it is suspended on, so this one resumes it as well */
                snprintf(why, sizeof(why), "[[on_start]] %s: not traced again, the process was traced at its start "
                         "already", t->rule->name);
                port_runtime_record(rt, "on-start-skipped", why);
                t->resume_only = true;
                resume(t);
                return;
        }
        /* the session's start and end and its file's record: room for them before the runtime is asked */
        if (audit_reserve(broker_of(t)->config.audit_sink, 3, &t->audit_room) != 0) {
                snprintf(why, sizeof(why), "[[on_start]] %s: not traced, the audit output takes no records now "
                         "(its reader stopped): nothing was asked of the runtime", t->rule->name);
                startup_give_up(t, "on-start-skipped", why);
                return;
        }
        if (!admit(t, why, sizeof(why))) {
                startup_give_up(t, "on-start-skipped", why);
                return;
        }
        start(t, rt);
}

int startup_trace_begin(StartupTraces *s, PortRuntime *rt) {
        Policy *policy = s->broker->policy;
        StartupTrace *t;
        int r;

        if (!policy || policy->n_on_start == 0)
                return 1;
        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        *t = (StartupTrace){ .set = s, .runtime_id = port_runtime_id(rt), .pid = port_runtime_pid(rt),
                             .uid = port_runtime_charged_uid(rt), .policy = policy_ref(policy), .stream_fd = -EBADF,
                             .dir_fd = -EBADF, .file_fd = -EBADF };
        t->next = s->traces;
        s->traces = t;
        /* a lookup like any of this user's requests: it costs the user's own workers, never the loop */
        r = jobs_open_process(s->broker, t->pid, t->uid, opened, t, &t->job);
        if (r != 0) {
                trace_free(t);
                return r < 0 ? r : -EBUSY;
        }
        return 0;
}

int startup_traces_new(Broker *b, StartupTraces **ret) {
        StartupTraces *s = calloc(1, sizeof(*s));

        if (!s)
                return -ENOMEM;
        s->broker = b;
        *ret = s;
        return 0;
}

StartupTraces *startup_traces_free(StartupTraces *s) {
        if (!s)
                return NULL;
        while (s->traces) {
                StartupTrace *t = s->traces;
                struct stat st;

                /* its start was recorded: so is its end, though the bytes go unnamed with the agent */
                if (t->recording)
                        record_session(t, true, fstat(t->file_fd, &st) == 0 ? (uint64_t)st.st_size : 0,
                                       "agent-stopped", false);
                trace_free(t);
        }
        free(s);
        return NULL;
}
