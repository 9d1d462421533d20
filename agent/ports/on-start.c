/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Collection from a runtime's first instruction (on-start.h): owns the startup traces of the
 * policy's [[on_start]]; ports.c calls it as a runtime connects in. Which rule, its limits, the
 * connections through the port and the resume are its own; the recorder (recorder.h) holds the
 * session, its seat, its file and its job, and publishes the trace.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/loop/broker-state.h"
#include "common/cleanup.h"
#include "agent/decide/decision.h"
#include "common/dotnet-ipc.h"
#include "agent/workers/jobs.h"
#include "agent/ports/on-start.h"
#include "agent/ports/ports.h"
#include "agent/runtime/recorder.h"
#include "agent/runtime/runtime-call.h"
#include "eventpipe/session-config.h"

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
        Target *target;           /* pinned by a worker: the rule's match, the file's labels and the records */
        JobCall job;              /* pinning the process */
        PortWaiter *waiter;       /* a connection through the port: the recorder's, or the resume's */
        RuntimeCall *call;        /* ResumeRuntime */
        bool admitted;
        bool resume_only;         /* the process is traced through another registration: only resume this one */
        Recorder *recorder;       /* the session, once the limits admitted it */
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
        if (t->admitted) {
                assert(t->set->n_admitted > 0);
                t->set->n_admitted--;
        }
        if (t->job.job)
                worker_job_cancel(t->job.job);
        ports_waiter_cancel(t->waiter);
        runtime_call_free(t->call);
        recorder_free(t->recorder); /* records the end of a session still running */
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

/* ---- the session, through the recorder ---- */

static void connected(int fd, int error, void *userdata) {
        StartupTrace *t = userdata;

        assert(t->recorder); /* only the recorder's connections wait through connected() */
        t->waiter = NULL;
        recorder_connected(t->recorder, fd, error);
}

/* The runtime's next connection through its port, for the session's start and its stop. */
static int connect_runtime(void *userdata, int *ret_fd, const char **ret_why) {
        StartupTrace *t = userdata;
        PortRuntime *rt = runtime_of(t);
        int r;

        if (!rt)
                return -ESRCH; /* the port went: the stream ends with the process, or is cut */
        if (t->waiter || t->call)
                return RECORDER_CONNECT_RETRY; /* the resume still goes on: the stop comes right after */
        r = ports_connect(rt, connected, t, ret_fd, &t->waiter);
        if (r == PORTS_WAITING)
                return RECORDER_CONNECT_LATER;
        if (r < 0)
                *ret_why = "the agent could not wait for the runtime's connection";
        return r;
}

static void resume(StartupTrace *t);

static void recorder_started(void *userdata) {
        resume(userdata);
}

static void recorder_removed(void *userdata, int r) {
        StartupTrace *t = userdata;

        fprintf(stderr, "dsagent: [[on_start]] %s: the trace of pid %d was removed: its audit record could not "
                "be written (%s)\n", t->rule->name, (int)t->pid, strerror(-r));
}

static void recorder_done(void *userdata, const RecorderResult *res) {
        StartupTrace *t = userdata;
        char why[512];

        switch (res->end) {
        case RECORDER_NOT_STARTED:
                if (res->error == -ESRCH) { /* the runtime went before it connected again */
                        trace_free(t);
                        return;
                }
                snprintf(why, sizeof(why), "[[on_start]] %s: %s", t->rule->name, res->text);
                startup_give_up(t, "on-start-failed", why);
                return;
        case RECORDER_EMPTY:
                fprintf(stderr, "dsagent: [[on_start]] %s: the trace of pid %d is empty (%s)%s%s\n", t->rule->name,
                        (int)t->pid, res->how, res->why ? ": " : "", res->why ? res->why : "");
                break;
        case RECORDER_NOT_STORED:
                fprintf(stderr, "dsagent: [[on_start]] %s: cannot store the trace of pid %d: %s\n", t->rule->name,
                        (int)t->pid, res->error < 0 ? strerror(-res->error) : "no space in dump_dir");
                break;
        default:
                break;
        }
        trace_free(t);
}

static const RecorderOps recorder_ops = {
        .connect = connect_runtime,
        .started = recorder_started,
        .removed = recorder_removed,
        .done = recorder_done,
};

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
 * may delay): STARTUP_TRACES_MAX at once, one of each user's at a time, one per process; the
 * recorder seats the session among the process's and its owner's (recorder.h): charged to the
 * runtime's owner, never to root or to anyone else.
 */
static bool admit(StartupTrace *t, char *why, size_t why_size) {
        StartupTraces *s = t->set;

        assert(!t->admitted);
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
        t->admitted = true;
        s->n_admitted++;
        return true;
}

/* The rule's session, through the recorder; the runtime is resumed once it runs (recorder_started()). */
static void start(StartupTrace *t) {
        _cleanup_(eventpipe_config_done) EventPipeConfig config = EVENTPIPE_CONFIG_NULL;
        const PolicyOnStart *rule = t->rule;
        RecorderSpec spec = {
                .origin = "on_start",
                .rule = rule->name,
                .kind = "trace",
                .profile = rule->trace_profile,
                .output = RECORDER_NETTRACE,
                .policy = t->policy,
                .target = t->target,
                .owner = t->uid,
                .readers = { .users = rule->reader_users.ids, .n_users = rule->reader_users.n,
                             .groups = rule->reader_groups.ids, .n_groups = rule->reader_groups.n },
                .config = &config,
                .duration_usec = rule->duration_usec,
                .max_bytes = rule->max_size,
                /* the session's start and end and its file's record */
                .audit_records = 3,
                .ops = &recorder_ops,
                .userdata = t,
        };
        char reason[256], why[320];
        int r;

        if (config_of(rule, &config) < 0) {
                startup_give_up(t, "on-start-failed", "out of memory");
                return;
        }
        r = recorder_start(broker_of(t), &spec, &t->recorder, reason, sizeof(reason));
        if (r != 0) {
                snprintf(why, sizeof(why), "[[on_start]] %s: %s", rule->name, reason);
                /* no room: nothing was asked of the runtime */
                startup_give_up(t, r == RECORDER_E_NO_ROOM ? "on-start-skipped" : "on-start-failed", why);
                return;
        }
        remember_traced(t->set, t->target);
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
        if (!admit(t, why, sizeof(why))) {
                startup_give_up(t, "on-start-skipped", why);
                return;
        }
        start(t);
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
                             .uid = port_runtime_charged_uid(rt), .policy = policy_ref(policy) };
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
        if (s) {
                /* each recorder records the end of its session, if it still runs */
                while (s->traces)
                        trace_free(s->traces);
                free(s);
        }
        return NULL;
}
