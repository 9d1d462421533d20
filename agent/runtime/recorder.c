/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the agent records on its own behalf (recorder.h): the seat, the room for the records, the
 * file, the slot, the runtime calls, the worker jobs, the timer and publishing of one session.
 */
#include <assert.h>
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

#include "agent/loop/broker-state.h"
#include "common/cleanup.h"
#include "common/dotnet-ipc.h"
#include "agent/dumps/dump-publish.h"
#include "agent/dumps/dump-writer.h"
#include "agent/workers/jobs.h"
#include "agent/runtime/recorder.h"
#include "agent/egress/egress-upload.h"
#include "agent/runtime/runtime-call.h"
#include "agent/targets/target.h"

#define USEC_PER_SEC 1000000ULL
/* After StopTracing the runtime writes its rundown, then ends the stream (as session.c allows). */
#define RECORDER_STOP_GRACE_USEC (60 * USEC_PER_SEC)
/* A heap dump's session is over: the worker has this long more to write the .gcdump. */
#define RECORDER_GCDUMP_WRITE_USEC (120 * USEC_PER_SEC)
/* A stop that cannot connect now (RECORDER_CONNECT_RETRY) is tried again this much later. */
#define RECORDER_STOP_RETRY_USEC USEC_PER_SEC

typedef enum RecorderState {
        RECORDER_CONNECTING,    /* the session's request waits for a connection */
        RECORDER_STARTING,      /* CollectTracing sent, its reply awaited */
        RECORDER_RECORDING,     /* a worker reads the stream */
        RECORDER_RENDERING,     /* the session is over; a worker renders its nettrace (or draws the published
                                 * trace's flame graph) */
        RECORDER_ENDED,         /* done() was called */
} RecorderState;

struct Recorder {
        Broker *broker;
        RecorderSpec spec;          /* its policy and target: references of the recorder's own */
        RecorderState state;
        RuntimeCall *call;          /* CollectTracing, then StopTracing */
        JobCall job;                /* the recording, then the rendering */
        uint8_t *request;           /* CollectTracing, encoded, until it is sent */
        size_t request_size;
        char *providers_text;       /* as the runtime was asked, for the session records */
        uint64_t session_id;
        int stream_fd, dir_fd, file_fd;
        int text_fd;                /* stacks, counters, exceptions: the rendering, an unnamed file of dump_dir too */
        int control_fd;             /* the agent's end of the worker's control socket */
        sd_event_source *control_source;
        sd_event_source *stop_timer;
        MonitorThrown thrown;
        bool have_thrown;
        unsigned slot;
        bool have_slot;
        AdmissionKey key;           /* one of the process's sessions while seated */
        bool seated;
        bool stop_sent, stop_waiting;
        bool stopped_whole;         /* gcdump: stopped once the worker said the dump was whole */
        bool start_recorded, end_recorded;
        uint64_t started_usec;
        AuditReservation audit_room;
        char name[256];             /* the artifact's, in dump_dir */
        char path[PATH_MAX];
        char text[PATH_MAX + 320];
        struct {
                int fd;             /* an unnamed file of dump_dir while the worker draws it */
                bool asked, collected;
                uint64_t bytes;
                char path[PATH_MAX];
                char text[PATH_MAX + 320];
        } flame;                    /* RecorderSpec.flame */
        struct {
                const char *how;
                uint64_t bytes;
                char why[256];
                bool has_why;
        } published;                /* the trace, published, while its flame graph is drawn */
};

static bool is_rendered(const Recorder *r) {
        return r->spec.output == RECORDER_STACKS || r->spec.output == RECORDER_COUNTERS ||
               r->spec.output == RECORDER_EXCEPTIONS;
}

static const char *suffix_of(RecorderOutput output) {
        switch (output) {
        case RECORDER_STACKS:
        case RECORDER_EXCEPTIONS: return ".txt";
        case RECORDER_COUNTERS: return ".csv";
        case RECORDER_GCDUMP: return ".gcdump";
        default: return ".nettrace";
        }
}

/* The runtime's buffer for the session: its default, within the agent's max_trace_buffer_mb. */
static uint32_t buffer_mb(const Recorder *r) {
        unsigned most = r->spec.policy->agent.max_trace_buffer_mb;

        return most < EVENTPIPE_BUFFER_MB_DEFAULT ? most : EVENTPIPE_BUFFER_MB_DEFAULT;
}

static DumpLimits limits_of(const Recorder *r) {
        return (DumpLimits){ .max_use = r->spec.policy->agent.max_use, .keep_free = r->spec.policy->agent.keep_free };
}

/* The session is over (its stream ended, or it never started): its seat among the process's sessions is free. */
static void release_seat(Recorder *r) {
        if (r->seated)
                admission_end(r->broker->admission, ADMISSION_SESSION, &r->key);
        r->seated = false;
}

/* The session's start and end records, as a client's trace gets, with the table or rule for its rule. */
static void record_session(Recorder *r, bool ended, uint64_t bytes, const char *how, bool complete) {
        const Target *t = r->spec.target;
        uint64_t now = 0;
        AuditSessionEvent e = {
                .ended = ended,
                .origin = r->spec.origin,
                .requester = 0,
                .target_pid = t->pid,
                .target_uid = target_euid(t),
                .target_unit = t->unit,
                .target_exe = t->exe,
                .target_container_id = t->container_id,
                .target_pod_uid = t->pod_uid,
                .target_cgroup = t->cgroup,
                .target_cgroup_vouched = t->cgroup_vouched,
                .rule = r->spec.rule,
                .kind = r->spec.kind,
                .profile = r->spec.profile,
                .providers = r->providers_text,
                .buffer_mb = buffer_mb(r),
                .duration_limit_usec = r->spec.duration_usec,
                .size_limit = r->spec.max_bytes,
                .bytes = bytes,
                .how = how,
                .complete = complete,
                .reservation = &r->audit_room,
        };

        assert(ended ? r->start_recorded && !r->end_recorded : !r->start_recorded);
        (void)sd_event_now(r->broker->event, CLOCK_MONOTONIC, &now);
        e.duration_usec = now - r->started_usec;
        if (ended)
                r->end_recorded = true;
        else
                r->start_recorded = true;
        (void)audit_log_session(r->broker->config.audit_sink, &e);
}

/* The end: told once; the caller frees the recorder. */
static void end(Recorder *r, RecorderEnd how_it_ended, const char *how, uint64_t bytes, const char *why, int error) {
        RecorderResult res = { .end = how_it_ended, .text = r->text, .path = r->path[0] ? r->path : NULL,
                               .bytes = bytes, .how = how, .why = why, .error = error,
                               .flame = { .asked = r->flame.asked, .collected = r->flame.collected,
                                          .text = r->flame.text, .path = r->flame.collected ? r->flame.path : NULL,
                                          .bytes = r->flame.bytes } };

        assert(r->state != RECORDER_ENDED);
        r->state = RECORDER_ENDED;
        r->spec.ops->done(r->spec.userdata, &res);
}

/* The runtime was not reached, or did not start the session: @text says why. */
static void not_started(Recorder *r, int error, const char *text) {
        snprintf(r->text, sizeof(r->text), "%s", text);
        end(r, RECORDER_NOT_STARTED, NULL, 0, NULL, error);
}

/* publish()'s codes */
enum {
        PUBLISH_E_NO_SPACE = 1,         /* dump_dir's guards, or the disk, refuse it */
        PUBLISH_E_REMOVED,              /* named, but its record could not be written: removed again */
};

/* What the words call the artifact: "cannot store the heap dump", "cannot store the stacks". */
static const char *noun_of(const Recorder *r) {
        return r->spec.output == RECORDER_GCDUMP ? "heap dump" : r->spec.kind;
}

/* What an artifact of @kind is labelled with, besides the origin and the table. */
static DumpAttributes attributes_of(const Recorder *r, const char *kind) {
        const Target *t = r->spec.target;

        return (DumpAttributes){ .requester = 0, .target_pid = t->pid, .target_uid = target_euid(t),
                                 .target_unit = t->unit, .target_exe = t->exe, .target_name = t->name,
                                 .dump_type = kind };
}

/* The dump record of the artifact just published as @name (@path, of @size bytes, labelled @attrs). Without it
 * the file goes again, unless audit_failure = "allow". Return: 0, or the record's negative errno (removed). */
static int record_artifact(Recorder *r, const DumpAttributes *attrs, const char *name, const char *path,
                           uint64_t size) {
        const Target *t = r->spec.target;

        return audit_log_artifact(r->broker->config.audit_sink, r->spec.policy->agent.audit_failure_allow, r->dir_fd,
                                  name, &(AuditDumpEvent){
                .origin = r->spec.origin, .requester = 0, .target_pid = t->pid, .target_uid = attrs->target_uid,
                .target_unit = attrs->target_unit, .target_exe = attrs->target_exe,
                .target_container_id = t->container_id, .target_pod_uid = t->pod_uid,
                .target_cgroup = t->cgroup, .target_cgroup_vouched = t->cgroup_vouched,
                .rule = r->spec.rule, .path = path, .size = size, .dump_type = attrs->dump_type,
                .readable = r->spec.readers.n_users + r->spec.readers.n_groups > 0, .reservation = &r->audit_room });
}

/* Root's, exactly the readers, labelled with the origin and the table, named, then recorded (or removed again).
 * Return: 0 with r->name and r->path, PUBLISH_E_NO_SPACE, PUBLISH_E_REMOVED, or a negative errno. */
static int publish(Recorder *r, int fd, uint64_t size) {
        DumpAttributes attrs = attributes_of(r, r->spec.kind);
        int e;

        /* an existing file is never replaced: another name, as a second dump of the same second gets */
        e = dump_publish_for_table(r->dir_fd, fd, &r->spec.readers, &attrs, r->spec.kind, r->spec.origin, r->spec.rule,
                                   suffix_of(r->spec.output), r->name, sizeof(r->name));
        if (e != 0)
                return e == DUMP_PUBLISH_E_NO_SPACE ? PUBLISH_E_NO_SPACE : e < 0 ? e : -EIO;
        snprintf(r->path, sizeof(r->path), "%s/%s", r->spec.policy->agent.dump_dir, r->name);
        e = record_artifact(r, &attrs, r->name, r->path, size);
        if (e == 0 && r->spec.egress)
                egress_upload_artifact(r->broker, r->spec.egress, r->spec.policy->agent.dump_dir, r->dir_fd, r->name,
                                       &(EgressArtifact){ .type = r->spec.kind,
                                                          .extension = suffix_of(r->spec.output) + 1,
                                                          .process = r->spec.target->name,
                                                          .pid = r->spec.target->pid, .unit = r->spec.target->unit,
                                                          .container = r->spec.target->container_id,
                                                          .request_id = 0, .requester = (uid_t)-1,
                                                          .rule = r->spec.rule });
        if (e == 0)
                return 0;
        r->path[0] = '\0';
        r->spec.ops->removed(r->spec.userdata, e);
        return PUBLISH_E_REMOVED;
}

/* The file @fd of @bytes published (r->text says so, @cut: what its size says, or ""), or why not.
 * Return: how it ended, with *@ret_error (a negative errno, or 0). */
static RecorderEnd publish_outcome(Recorder *r, int fd, uint64_t bytes, const char *cut, int *ret_error) {
        int p = publish(r, fd, bytes);

        *ret_error = p < 0 ? p : 0;
        if (p == PUBLISH_E_REMOVED)
                return RECORDER_REMOVED;
        if (p != 0) {
                assert(p == PUBLISH_E_NO_SPACE || p < 0);
                snprintf(r->text, sizeof(r->text), "cannot store the %s: %s", noun_of(r),
                         p > 0 ? "no space in dump_dir" : strerror(-p));
                return RECORDER_NOT_STORED;
        }
        snprintf(r->text, sizeof(r->text), "%s (%" PRIu64 " bytes%s)", r->path, bytes, cut);
        return RECORDER_COLLECTED;
}

/* ---- the stop ---- */

/* A refused or lost StopTracing changes nothing: the stream still ends, with the process, at max_bytes
 * or at the worker's deadline. (Its reply and the stream's end come on two connections, in either order.) */
static void stop_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        Recorder *r = userdata;

        r->call = runtime_call_free(r->call);
}

static void stop_connected(Recorder *r, int fd) {
        uint8_t request[DOTNET_IPC_HEADER_SIZE + 8];
        size_t size;

        r->stop_waiting = false;
        if (fd < 0)
                return; /* the process went, or its port: its stream ends with it */
        if (dotnet_ipc_stop_tracing_encode(r->session_id, request, sizeof(request), &size) != 0 ||
            runtime_call_start(r->broker->event, fd, request, size, r->broker->config.runtime_timeout_usec, stop_done,
                               r, &r->call) != 0) {
                safe_close(fd);
                return;
        }
        r->stop_sent = true;
}

static int on_duration_over(sd_event_source *s, uint64_t usec, void *userdata);

/* StopTracing, once: the runtime writes its rundown and ends the stream. */
static void stop_session(Recorder *r) {
        const char *why = NULL;
        int fd = -EBADF, c;

        r->stop_timer = sd_event_source_disable_unref(r->stop_timer);
        if (r->stop_sent || r->stop_waiting || r->call)
                return;
        c = r->spec.ops->connect(r->spec.userdata, &fd, &why);
        if (c == RECORDER_CONNECT_RETRY)
                (void)sd_event_add_time_relative(r->broker->event, &r->stop_timer, CLOCK_MONOTONIC,
                                                 RECORDER_STOP_RETRY_USEC, 0, on_duration_over, r);
        else if (c == RECORDER_CONNECT_LATER)
                r->stop_waiting = true;
        else if (c == 0)
                stop_connected(r, fd);
}

static int on_duration_over(sd_event_source *s, uint64_t usec, void *userdata) {
        stop_session(userdata);
        return 0;
}

/*
 * The worker says the dump's GC has ended (gcdump), or that max_bytes of the stream came (a trace):
 * the session is stopped, and the runtime's rundown ends the stream. The job's end (or its death)
 * ends the socket.
 */
static int on_control(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Recorder *r = userdata;
        char c = 0;
        ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0) {
                r->control_source = sd_event_source_disable_unref(r->control_source);
                return 0;
        }
        if (r->state != RECORDER_RECORDING || r->stop_sent)
                return 0;
        if (c == JOBS_GCDUMP_DUMPED && r->spec.output == RECORDER_GCDUMP) {
                stop_session(r);
                r->stopped_whole = r->stop_sent;
        } else if (c == JOBS_TRACE_SIZE_LIMIT && r->spec.output != RECORDER_GCDUMP) {
                stop_session(r);
        }
        return 0;
}

/* ---- the end of the stream ---- */

/* stacks, counters, exceptions: the rendering is written; it is published, or the result says why not. */
static void rendered(void *userdata, int e, uint64_t bytes, const char *why) {
        Recorder *r = userdata;
        RecorderEnd outcome;
        int error = e < 0 ? e : 0;

        assert(r->state == RECORDER_RENDERING);
        if (e == 0)
                outcome = publish_outcome(r, r->text_fd, bytes, "", &error);
        else {
                outcome = RECORDER_NOT_STORED;
                snprintf(r->text, sizeof(r->text), "cannot store the %s: %s", noun_of(r),
                         e == JOBS_E_NO_SPACE ? (why ? why : "no space in dump_dir")
                         : e < 0              ? strerror(-e)
                                              : "the worker failed");
        }
        end(r, outcome, NULL, bytes, why, error);
}

/* stacks, counters, exceptions: a worker turns the session's nettrace into what dsctl prints of it. */
static void render(Recorder *r) {
        JobRendering job = { .owner = r->spec.owner, .nettrace_fd = r->file_fd, .dir_fd = r->dir_fd,
                             .limits = limits_of(r) };
        int e;

        r->state = RECORDER_RENDERING;
        r->text_fd = openat(r->dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        job.out_fd = r->text_fd;
        if (r->text_fd < 0)
                e = -errno;
        else if (r->spec.output == RECORDER_COUNTERS)
                e = jobs_counters_csv(r->broker, &job, r->providers_text, rendered, r, &r->job);
        else if (r->spec.output == RECORDER_EXCEPTIONS)
                e = jobs_exceptions_text(r->broker, &job, r->have_thrown ? &r->thrown : NULL, rendered, r, &r->job);
        else
                e = jobs_stacks_text(r->broker, &job, rendered, r, &r->job);
        if (e != 0) {
                snprintf(r->text, sizeof(r->text), "cannot write the %s: %s", r->spec.kind,
                         e < 0 ? strerror(-e) : "no worker free");
                end(r, RECORDER_NOT_STORED, NULL, 0, NULL, e < 0 ? e : 0);
        }
}

/* What the size of a published trace says: "" when the runtime ended it in its own time. */
static const char *size_note(int e, bool ended, bool limited) {
        if (e == JOBS_E_NO_SPACE)
                return ", cut: dump_dir is full";
        if (!ended)
                return limited ? ", cut: its rundown passed max_trace_size by more than the allowance"
                               : ", cut at max_trace_size";
        return limited ? ", stopped at max_trace_size" : "";
}

/* ---- the flame graph beside a published trace ---- */

/* The trace's end, told once its flame graph is published or known missing (r->flame.text says which). */
static void flame_over(Recorder *r) {
        r->flame.fd = safe_close(r->flame.fd);
        end(r, RECORDER_COLLECTED, r->published.how, r->published.bytes,
            r->published.has_why ? r->published.why : NULL, 0);
}

/* The flame graph's name: the trace's, flame for its kind and .svg for its suffix, so that its process, table,
 * time and number are the trace's. Return: 0, or -EINVAL (the trace's name is not of that shape: never). */
static int flame_name(const Recorder *r, char *buf, size_t size) {
        const char *suffix = suffix_of(r->spec.output);
        size_t n = strlen(r->name), kind = strlen(r->spec.kind), tail = strlen(suffix);

        if (n <= kind + tail || strncmp(r->name, r->spec.kind, kind) != 0 || strcmp(r->name + n - tail, suffix) != 0)
                return -EINVAL;
        return snprintf(buf, size, "flame%.*s.svg", (int)(n - kind - tail), r->name + kind) < (int)size ? 0 : -EINVAL;
}

/* The drawn flame graph of @bytes: root's, exactly the readers, labelled and named as the trace, then recorded
 * (or removed again); r->flame.text says which. */
static void publish_flame(Recorder *r, uint64_t bytes) {
        DumpAttributes attrs = attributes_of(r, "flame");
        char name[256];
        int e;

        attrs.origin = r->spec.origin;
        attrs.table = r->spec.rule;
        e = flame_name(r, name, sizeof(name));
        if (e == 0)
                e = dump_publish_fd(r->dir_fd, r->flame.fd, &r->spec.readers, &attrs, name);
        if (e != 0) {
                snprintf(r->flame.text, sizeof(r->flame.text), "cannot store the flame graph: %s",
                         e > 0 ? "no space in dump_dir" : strerror(-e));
                return;
        }
        snprintf(r->flame.path, sizeof(r->flame.path), "%s/%s", r->spec.policy->agent.dump_dir, name);
        e = record_artifact(r, &attrs, name, r->flame.path, bytes);
        if (e < 0) {
                snprintf(r->flame.text, sizeof(r->flame.text),
                         "the flame graph's audit record could not be written (%s): it was removed", strerror(-e));
                return;
        }
        r->flame.collected = true;
        r->flame.bytes = bytes;
        snprintf(r->flame.text, sizeof(r->flame.text), "%s (%" PRIu64 " bytes)", r->flame.path, bytes);
}

/* The worker drew the flame graph, or says why not: published, or its text says why there is none. */
static void flame_drawn(void *userdata, int e, uint64_t bytes, const char *why) {
        Recorder *r = userdata;

        assert(r->state == RECORDER_RENDERING);
        if (e == 0)
                publish_flame(r, bytes);
        else if (e == JOBS_E_NO_SAMPLES)
                snprintf(r->flame.text, sizeof(r->flame.text), "no flame graph: %s", why ? why : "no samples");
        else
                snprintf(r->flame.text, sizeof(r->flame.text), "cannot store the flame graph: %s",
                         e == JOBS_E_NO_SPACE ? (why ? why : "no space in dump_dir")
                         : e == JOBS_E_TIMEOUT ? "the worker did not draw it in time"
                         : e < 0              ? strerror(-e)
                                              : "the worker failed");
        flame_over(r);
}

/* The trace is published (@how, @bytes, the worker's @why): a worker draws its flame graph of the very file. */
static void draw_flame(Recorder *r, const char *how, uint64_t bytes, const char *why) {
        JobRendering job = { .owner = r->spec.owner, .nettrace_fd = r->file_fd, .dir_fd = r->dir_fd,
                             .limits = limits_of(r) };
        int e;

        r->published.how = how;
        r->published.bytes = bytes;
        r->published.has_why = why;
        snprintf(r->published.why, sizeof(r->published.why), "%s", why ? why : "");
        r->flame.asked = true;
        r->state = RECORDER_RENDERING;
        r->flame.fd = openat(r->dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        job.out_fd = r->flame.fd;
        e = r->flame.fd < 0 ? -errno : jobs_flame_svg(r->broker, &job, flame_drawn, r, &r->job);
        if (e != 0) {
                snprintf(r->flame.text, sizeof(r->flame.text), "cannot draw the flame graph: %s",
                         e < 0 ? strerror(-e) : "no worker free");
                flame_over(r);
        }
}

/* The stream is written: published (or rendered first), or the result says why not. */
static void recorded(void *userdata, int e, bool ended, bool limited, const char *why) {
        Recorder *r = userdata;
        const char *how = jobs_trace_end(e, ended, limited, r->stop_sent);
        RecorderEnd outcome;
        struct stat st;
        uint64_t size;
        int error = 0;

        assert(r->state == RECORDER_RECORDING);
        release_seat(r); /* the worker no longer reads the stream: the runtime has ended the session */
        size = fstat(r->file_fd, &st) == 0 ? (uint64_t)st.st_size : 0;
        if (size > 0 && is_rendered(r)) {
                /* the session is over; what becomes of its bytes is the outcome's to say */
                record_session(r, true, size, how, e == 0 && ended && r->stop_sent);
                render(r);
                return;
        }
        if (size == 0) {
                outcome = RECORDER_EMPTY;
                snprintf(r->text, sizeof(r->text), "the trace is empty%s%s", why ? ": " : "", why ? why : "");
        } else
                outcome = publish_outcome(r, r->file_fd, size, size_note(e, ended, limited), &error);
        /* the end record follows the file's: it says whether it was stored */
        record_session(r, true, size, outcome == RECORDER_COLLECTED || size == 0 ? how : "not-stored",
                       outcome == RECORDER_COLLECTED && e == 0 && ended && r->stop_sent);
        if (outcome == RECORDER_COLLECTED && r->spec.flame)
                draw_flame(r, how, size, why);
        else
                end(r, outcome, how, size, why, error);
}

/* What a heap dump's worker said, in the words of the result, when it made no .gcdump. */
static void gcdump_failure_text(Recorder *r, int e, const char *why) {
        if (e == JOBS_E_NO_HEAP)
                snprintf(r->text, sizeof(r->text), "no heap dump: %s", why ? why : "the stream made none");
        else if (e == JOBS_E_NO_SPACE)
                snprintf(r->text, sizeof(r->text), "cannot store the heap dump: %s", why ? why : "no space in dump_dir");
        else if (e == JOBS_E_TIMEOUT)
                snprintf(r->text, sizeof(r->text), "cannot take the heap dump: the worker did not finish in time");
        else
                snprintf(r->text, sizeof(r->text), "cannot take the heap dump: %s",
                         e < 0 ? strerror(-e) : "the worker failed");
}

/* gcdump: the session is over and the worker wrote the .gcdump, or says why not. */
static void gcdump_recorded(void *userdata, int e, const JobGcdumpResult *res, const char *why) {
        Recorder *r = userdata;
        /* the session's end: what the heap came to is the outcome's to say */
        int stream_e = e == JOBS_E_NO_HEAP ? 0 : e;
        /* "stopped" as a client's session that dsctl gcdump stops once the dump is whole; "duration": the
         * window ran out first */
        const char *how = stream_e == 0 && res->ended && r->stopped_whole ? "stopped"
                                                                           : jobs_trace_end(stream_e, res->ended,
                                                                                            false, r->stop_sent);
        RecorderEnd outcome = RECORDER_NOT_STORED;
        int error = e < 0 ? e : 0;

        assert(r->state == RECORDER_RECORDING);
        release_seat(r); /* the worker no longer reads the stream: the session is over */
        record_session(r, true, res->stream_bytes, how, stream_e == 0 && res->ended && r->stop_sent);
        if (e == 0)
                outcome = publish_outcome(r, r->file_fd, res->bytes, "", &error);
        else
                gcdump_failure_text(r, e, why);
        end(r, outcome, how, res->bytes, why, error);
}

/* ---- the session's start ---- */

/*
 * The worker's control socket: it tells the agent, without waiting, when the dump's GC has ended or
 * max_bytes came (on_control()). Return: 0 with the worker's end in *@ret_theirs, or a negative errno.
 */
static int open_control(Recorder *r, int *ret_theirs) {
        int sv[2], e;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
                return -errno;
        r->control_fd = sv[0];
        e = sd_event_add_io(r->broker->event, &r->control_source, r->control_fd, EPOLLIN, on_control, r);
        if (e < 0) {
                safe_close(sv[1]);
                return e;
        }
        *ret_theirs = sv[1];
        return 0;
}

/* A slot for the file's bytes, and the worker that writes it. Return: 0, JOBS_E_WORKER, or a negative errno. */
static int start_recording(Recorder *r) {
        _cleanup_close_ int theirs = -EBADF;
        JobRecording rec = { .owner = r->spec.owner, .stream_fd = r->stream_fd, .file_fd = r->file_fd,
                             .dir_fd = r->dir_fd, .limits = limits_of(r), .max_bytes = r->spec.max_bytes,
                             .timeout_usec = r->spec.duration_usec + RECORDER_STOP_GRACE_USEC +
                                             r->broker->config.runtime_timeout_usec };
        int e;

        e = dump_slots_claim(r->broker->dump_slots, &r->slot);
        if (e < 0)
                return e;
        r->have_slot = true;
        rec.slot = r->slot;
        e = open_control(r, &theirs);
        if (e < 0)
                return e;
        rec.control_fd = theirs; /* the worker holds its own copy; ours closes after the submit */
        if (r->spec.output == RECORDER_GCDUMP) {
                /* the worker reads the stream, tells when the dump is whole, and writes the .gcdump */
                rec.timeout_usec += RECORDER_GCDUMP_WRITE_USEC;
                e = jobs_record_gcdump(r->broker, &rec, gcdump_recorded, r, &r->job);
        } else
                e = jobs_record_trace(r->broker, &rec, recorded, r, &r->job);
        if (e != 0)
                return e;
        r->state = RECORDER_RECORDING;
        /* the worker holds the stream now: when it stops reading, the runtime ends the session */
        r->stream_fd = safe_close(r->stream_fd);
        return sd_event_add_time_relative(r->broker->event, &r->stop_timer, CLOCK_MONOTONIC, r->spec.duration_usec, 0,
                                          on_duration_over, r);
}

static void started(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        Recorder *r = userdata;
        char text[192];
        int e;

        assert(r->state == RECORDER_STARTING);
        if (error != 0 || !reply->ok) {
                r->call = runtime_call_free(r->call);
                snprintf(text, sizeof(text), "the runtime did not start the session: %s",
                         error != 0 ? runtime_call_error_text(error) : "it refused it");
                not_started(r, 0, text);
                return;
        }
        r->stream_fd = runtime_call_take_fd(call);
        e = dotnet_ipc_session_id_decode(reply, &r->session_id);
        r->call = runtime_call_free(r->call);
        if (e != 0) {
                not_started(r, 0, "the runtime sent a malformed session reply");
                return;
        }
        (void)sd_event_now(r->broker->event, CLOCK_MONOTONIC, &r->started_usec);
        e = start_recording(r);
        if (e != 0) {
                snprintf(text, sizeof(text), "cannot record the trace: %s", e < 0 ? strerror(-e) : "no worker free");
                not_started(r, e < 0 ? e : 0, text); /* the stream closes: the session ends */
                return;
        }
        record_session(r, false, 0, NULL, false);
        if (r->spec.ops->started)
                r->spec.ops->started(r->spec.userdata);
}

/* The session's request, on @fd. Return: 0, or a negative errno (@fd closed). */
static int send_request(Recorder *r, int fd) {
        int e;

        assert(r->state == RECORDER_CONNECTING && r->request);
        e = runtime_call_start(r->broker->event, fd, r->request, r->request_size, r->broker->config.runtime_timeout_usec,
                               started, r, &r->call);
        if (e != 0)
                return e;
        free(r->request);
        r->request = NULL;
        r->state = RECORDER_STARTING;
        return 0;
}

void recorder_connected(Recorder *r, int fd, int error) {
        if (r->state != RECORDER_CONNECTING) {
                stop_connected(r, fd);
                return;
        }
        if (fd < 0) {
                not_started(r, error, "the runtime did not connect again to be traced");
                return;
        }
        if (send_request(r, fd) != 0)
                not_started(r, 0, "the agent could not ask the runtime for the session");
}

/* ---- admitted, or refused with a reason ---- */

/*
 * The session is one of the process's, as a client's and a watch's are: it counts against
 * max_sessions_per_target, and against its owner's max_sessions_per_user with the owner's own.
 */
static int take_seat(Recorder *r, char *why, size_t why_size) {
        const char *busy = NULL;
        int e;

        e = admission_begin_agent_session(r->broker->admission, r->spec.target->pid, r->spec.target->start_time,
                                          r->spec.owner, r->spec.policy->agent.max_sessions_per_target,
                                          r->spec.policy->agent.max_sessions_per_user, &r->key, &busy);
        if (e != 0) {
                snprintf(why, why_size, "not traced: %s", e == ADMISSION_E_BUSY && busy ? busy : strerror(-e));
                return RECORDER_E_NO_ROOM;
        }
        r->seated = true;
        return 0;
}

/* dump_dir and the unnamed file in it. */
static int open_file(Recorder *r, char *why, size_t why_size) {
        const char *detail = NULL;
        int e;

        e = dump_dir_open(r->spec.policy->agent.dump_dir, &r->dir_fd, &detail);
        if (e == 0) {
                r->file_fd = openat(r->dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
                e = r->file_fd < 0 ? -errno : 0;
        }
        if (e != 0) {
                snprintf(why, why_size, "cannot use dump_dir: %s%s%s", detail ? detail : "", detail ? ": " : "",
                         e < 0 ? strerror(-e) : "unsafe");
                return RECORDER_E_FAILED;
        }
        return 0;
}

/* CollectTracing, encoded for the connection to come, and the providers as the records say them. */
static int encode_request(Recorder *r, char *why, size_t why_size) {
        r->request = malloc(DOTNET_IPC_MESSAGE_MAX);
        if (!r->request || !(r->providers_text = eventpipe_config_to_string(r->spec.config)) ||
            dotnet_ipc_collect_tracing_encode(r->spec.config, buffer_mb(r), r->request, DOTNET_IPC_MESSAGE_MAX,
                                              &r->request_size) != 0) {
                snprintf(why, why_size, "cannot set up the session");
                return RECORDER_E_FAILED;
        }
        return 0;
}

/* The connection, now or later, and the session's request sent on it. */
static int ask_runtime(Recorder *r, char *why, size_t why_size) {
        const char *detail = NULL;
        int fd = -EBADF, e;

        e = r->spec.ops->connect(r->spec.userdata, &fd, &detail);
        if (e == RECORDER_CONNECT_LATER)
                return 0;
        if (e == 0)
                e = send_request(r, fd);
        if (e != 0) {
                snprintf(why, why_size, "cannot reach the runtime%s%s", detail ? ": " : "", detail ? detail : "");
                return RECORDER_E_FAILED;
        }
        return 0;
}

static int begin(Recorder *r, char *why, size_t why_size) {
        int e;

        e = take_seat(r, why, why_size);
        if (e == 0)
                e = open_file(r, why, why_size);
        if (e == 0)
                e = encode_request(r, why, why_size);
        if (e != 0)
                return e;
        /* room for the session's records, and the caller's, before the runtime is asked anything */
        if (audit_reserve(r->broker->config.audit_sink, r->spec.audit_records, &r->audit_room) != 0) {
                snprintf(why, why_size, "not started: the audit output takes no records now (its reader stopped)");
                return RECORDER_E_NO_ROOM;
        }
        return ask_runtime(r, why, why_size);
}

int recorder_start(Broker *b, const RecorderSpec *spec, Recorder **ret, char *why, size_t why_size) {
        Recorder *r;
        int e;

        assert(spec->ops && spec->ops->connect && spec->ops->removed && spec->ops->done);
        assert(spec->output == RECORDER_EXCEPTIONS || !spec->thrown);
        assert(spec->output == RECORDER_NETTRACE || !spec->flame);
        r = calloc(1, sizeof(Recorder));
        if (!r) {
                snprintf(why, why_size, "not traced: out of memory");
                return RECORDER_E_FAILED;
        }
        *r = (Recorder){ .broker = b, .spec = *spec, .stream_fd = -EBADF, .dir_fd = -EBADF, .file_fd = -EBADF,
                         .text_fd = -EBADF, .control_fd = -EBADF, .flame.fd = -EBADF };
        r->spec.thrown = NULL; /* copied into r->thrown */
        policy_ref(r->spec.policy);
        target_ref(r->spec.target);
        if (spec->thrown) {
                if (monitor_thrown_copy(spec->thrown, &r->thrown) < 0) {
                        snprintf(why, why_size, "not traced: out of memory");
                        recorder_free(r);
                        return RECORDER_E_FAILED;
                }
                r->have_thrown = true;
        }
        e = begin(r, why, why_size);
        r->spec.config = NULL; /* encoded by begin(): the caller's may go */
        if (e != 0) {
                recorder_free(r);
                return e;
        }
        *ret = r;
        return 0;
}

AuditReservation *recorder_audit_room(Recorder *r) {
        return &r->audit_room;
}

bool recorder_end_at_exit(Recorder *r) {
        if (r->state != RECORDER_RENDERING || !r->flame.asked)
                return false;
        if (r->job.job) {
                worker_job_cancel(r->job.job);
                r->job.job = NULL;
        }
        snprintf(r->flame.text, sizeof(r->flame.text), "no flame graph: the agent stopped before it was drawn");
        flame_over(r);
        return true;
}

Recorder *recorder_free(Recorder *r) {
        struct stat st;

        if (!r)
                return NULL;
        /* its start was recorded: so is its end, though the bytes go unnamed with the agent */
        if (r->start_recorded && !r->end_recorded)
                record_session(r, true, fstat(r->file_fd, &st) == 0 ? (uint64_t)st.st_size : 0, "agent-stopped", false);
        release_seat(r);
        if (r->job.job)
                worker_job_cancel(r->job.job);
        runtime_call_free(r->call);
        sd_event_source_disable_unref(r->stop_timer);
        sd_event_source_disable_unref(r->control_source);
        safe_close(r->control_fd);
        if (r->have_slot)
                dump_slots_release(r->broker->dump_slots, r->slot);
        safe_close(r->stream_fd);
        safe_close(r->file_fd);
        safe_close(r->text_fd);
        safe_close(r->flame.fd);
        safe_close(r->dir_fd);
        audit_reservation_release(&r->audit_room);
        monitor_thrown_done(&r->thrown);
        target_unref(r->spec.target);
        policy_unref(r->spec.policy);
        free(r->request);
        free(r->providers_text);
        free(r);
        return NULL;
}
