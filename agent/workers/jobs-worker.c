/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The worker's side of the jobs (jobs.h): jobs_handle() runs in a worker process (worker-pool.h) and
 * does what may block: reading other processes' /proc files, lookups in a target's view, moving a
 * dump's or a trace's bytes to disk, parsing a session's nettrace into text, CSV or a .gcdump, walking
 * /proc, reading the journal. Each handler reads one JobRequest (jobs-wire.h) and fills one JobReply;
 * the agent's side (jobs.c) sends the one and reads the other.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/loop/broker-state.h"
#include "common/cleanup.h"
#include "eventpipe/counter-rows.h"
#include "agent/crashes/crash-core.h"
#include "agent/crashes/crash-journal.h"
#include "agent/decide/decision.h"
#include "agent/targets/discover.h"
#include "agent/dumps/dump-publish.h"
#include "agent/dumps/dump-writer.h"
#include "agent/support/fileio.h"
#include "eventpipe/gcdump-heap.h"
#include "agent/workers/jobs-wire.h"
#include "agent/workers/jobs.h"
#include "eventpipe/monitor-view.h"
#include "eventpipe/nettrace.h"
#include "agent/dumps/retention-pass.h"
#include "eventpipe/session-config.h"
#include "eventpipe/trace-convert.h"
#include "agent/support/test-hooks.h"
#include "common/text.h"
#include "agent/loop/userns.h"

/* A dump stream reports its progress this often, and once its first byte is in. */
#define STREAM_PROGRESS_USEC 1000000
#define STREAM_PUMP_BUDGET (64ULL << 20)
/* A trace's bytes pass through a pipe this large: a whole runtime block and more in one splice. */
#define STREAM_PIPE_SIZE (1 << 20)

static const Broker *broker;

void jobs_set_broker(const Broker *b) {
        broker = b;
}

static void reply_why(JobReply *a, const char *why) {
        if (why)
                snprintf(a->why, sizeof(a->why), "%s", why);
}

static PolicyRequester requester_from(const JobRequester *j, gid_t *groups) {
        for (uint32_t i = 0; i < j->n_groups && i < JOBS_GROUPS_MAX; i++)
                groups[i] = j->groups[i];
        return (PolicyRequester){ .uid = j->uid, .gid = j->gid, .groups = groups,
                                  .n_groups = j->n_groups < JOBS_GROUPS_MAX ? j->n_groups : JOBS_GROUPS_MAX };
}

/* The Target the agent described, on the fds it sent: taken from @q, so they outlive the job's message. */
static int target_of_request(const TargetFacts *f, WorkerMessage *q, Target **ret) {
        int pidfd, proc_fd;

        if (q->n_fds != 2 || q->fds[0] < 0 || q->fds[1] < 0)
                return -EBADF;
        pidfd = TAKE_FD(q->fds[0]);
        proc_fd = TAKE_FD(q->fds[1]);
        return target_from_facts(f, pidfd, proc_fd, ret);
}

/*
 * The runtime's socket too, in the same job, for a target the requester may see at all (so may act
 * on in some way): one worker round trip less per request. The agent decides afterwards as before;
 * a lookup that fails here is left to jobs_find_socket(), which says why.
 */
static void open_find_socket(const JobRequest *q, Target *t) {
        gid_t groups[JOBS_GROUPS_MAX];
        PolicyRequester who = requester_from(&q->open.who, groups);
        PolicyTarget pt = policy_target_of(t);
        const char *why;

        if (policy_target_visible(broker->policy, &who, &pt) && target_find_socket(t, &why) != 0)
                t->socket_path_fd = safe_close(t->socket_path_fd);
}

static size_t handle_open(const JobRequest *q, JobReply *a, WorkerMessage *reply) {
        _cleanup_(target_unrefp) Target *t = NULL;

        a->r = target_open(q->open.pid, &t);
        if (a->r == 0)
                a->r = target_read_details(t);
        /* NSS may block here: that costs this request its deadline, never the loop (AuditNames).
         * The requester's names come back even when the target could not be opened. */
        if (q->open.names)
                audit_names_resolve(&a->open.names, q->open.who.uid, q->open.who.gid,
                                    a->r == 0 ? target_euid(t) : (uid_t)-1);
        else
                a->open.names = (AuditNames){ .client_uid = -1, .client_gid = -1, .target_uid = -1 };
        if (a->r != 0)
                return REPLY_HEAD + sizeof(a->open);
        if (q->open.find_socket)
                open_find_socket(q, t);
        target_facts_of(t, &a->open.facts);
        reply->fds[0] = TAKE_FD(t->pidfd);
        reply->fds[1] = TAKE_FD(t->proc_fd);
        reply->n_fds = 2;
        if (t->socket_path_fd >= 0)
                reply->fds[reply->n_fds++] = TAKE_FD(t->socket_path_fd);
        return REPLY_HEAD + sizeof(a->open);
}

static size_t handle_socket(const JobRequest *q, WorkerMessage *msg, JobReply *a, WorkerMessage *reply) {
        _cleanup_(target_unrefp) Target *t = NULL;
        const char *why = NULL;

        a->r = target_of_request(&q->facts, msg, &t);
        if (a->r == 0)
                a->r = target_find_socket(t, &why);
        reply_why(a, why);
        if (a->r != 0)
                return REPLY_HEAD;
        target_facts_of(t, &a->facts);
        reply->fds[0] = TAKE_FD(t->socket_path_fd);
        reply->n_fds = 1;
        return REPLY_HEAD + sizeof(a->facts);
}

/* The details the agent holds of a target it read earlier, against what its /proc shows now. */
static size_t handle_recheck(const JobRequest *q, WorkerMessage *msg, JobReply *a) {
        _cleanup_(target_unrefp) Target *t = NULL;
        bool holds = false;

        a->r = target_of_request(&q->facts, msg, &t);
        if (a->r == 0)
                a->r = target_details_hold(t, &holds);
        a->holds = holds;
        return REPLY_HEAD + sizeof(a->holds);
}

/*
 * A unit's .NET processes: those in the unit that the requester may see, with
 * a diagnostic socket. Processes it may not see count as absent, so the
 * answer tells nobody what runs in a unit that is not theirs.
 */
static size_t handle_unit(const JobRequest *q, JobReply *a) {
        gid_t groups[JOBS_GROUPS_MAX];
        PolicyRequester who = requester_from(&q->unit.who, groups);
        struct dirent *de;
        DIR *proc = opendir("/proc");

        a->unit.n = 0;
        while (proc && (de = readdir(proc))) {
                _cleanup_(target_unrefp) Target *t = NULL;
                const char *why;
                PolicyTarget pt;
                pid_t pid;

                if (parse_pid(de->d_name, &pid) < 0 || target_open(pid, &t) != 0 || target_read_details(t) != 0 ||
                    !t->unit || strncmp(t->unit, q->unit.unit, sizeof(q->unit.unit)) != 0)
                        continue;
                pt = policy_target_of(t);
                if (!policy_target_visible(broker->policy, &who, &pt) || target_find_socket(t, &why) != 0)
                        continue;
                if (a->unit.n < JOBS_UNIT_PIDS_MAX)
                        a->unit.pids[a->unit.n] = pid;
                a->unit.n++;
        }
        if (proc)
                closedir(proc);
        a->r = 0;
        return REPLY_HEAD + sizeof(a->unit);
}

static size_t handle_stage(const JobRequest *q, WorkerMessage *msg, JobReply *a, WorkerMessage *reply) {
        _cleanup_(target_unrefp) Target *t = NULL;
        DumpStage *s = NULL;
        const char *why = NULL;

        a->r = target_of_request(&q->stage.facts, msg, &t);
        if (a->r == 0)
                a->r = dump_stage_create(t, q->stage.runtime_dir, &s, &why);
        reply_why(a, why);
        if (a->r != 0)
                return REPLY_HEAD;
        snprintf(a->stage.name, sizeof(a->stage.name), "%s", s->name);
        snprintf(a->stage.target_path, sizeof(a->stage.target_path), "%s", s->target_path);
        snprintf(a->stage.record_path, sizeof(a->stage.record_path), "%s", s->record_path);
        reply->fds[0] = TAKE_FD(s->tmp_fd);
        reply->fds[1] = TAKE_FD(s->dir_fd);
        reply->fds[2] = TAKE_FD(s->fifo_fd);
        reply->n_fds = 3;
        dump_stage_disown(s); /* the agent removes it, by the fds it now holds */
        return REPLY_HEAD + sizeof(a->stage);
}

/* The facts of one process that can be read without its memory (jobs_process_facts()). */
static void process_facts(pid_t pid, JobProcessFacts *f) {
        _cleanup_(target_unrefp) Target *t = NULL;
        uid_t charged = USERNS_CHARGE_UNKNOWN;

        *f = (JobProcessFacts){ .pid = pid };
        if (target_open(pid, &t) != 0 || target_read_cgroup(t) != 0)
                return; /* gone: the rest stays empty */
        if (userns_charged_uid(t->pidfd, t->pid, target_euid(t), &charged, NULL) < 0)
                charged = USERNS_CHARGE_UNKNOWN;
        f->alive = true;
        f->start_time = t->start_time;
        f->euid = target_euid(t);
        f->charged_uid = charged;
        f->cgroup_vouched = t->cgroup_vouched;
        snprintf(f->unit, sizeof(f->unit), "%s", t->unit && strlen(t->unit) < sizeof(f->unit) ? t->unit : "");
        snprintf(f->container_id, sizeof(f->container_id), "%s",
                 t->container_id && strlen(t->container_id) < sizeof(f->container_id) ? t->container_id : "");
        snprintf(f->cgroup, sizeof(f->cgroup), "%s", t->cgroup && strlen(t->cgroup) < sizeof(f->cgroup) ? t->cgroup : "");
}

static size_t handle_facts(const JobRequest *q, JobReply *a) {
        uint32_t n = q->facts_of.n < JOBS_FACTS_MAX ? q->facts_of.n : JOBS_FACTS_MAX;

        for (uint32_t i = 0; i < n; i++)
                process_facts(q->facts_of.pids[i], &a->facts_of.facts[i]);
        a->facts_of.n = n;
        a->r = 0;
        return REPLY_HEAD + offsetof(typeof(a->facts_of), facts) + n * sizeof(JobProcessFacts);
}

#define JOBS_CANDIDATES_NICE 10


static size_t handle_candidates(const JobRequest *q, JobReply *a) {
        uid_t uids[JOBS_WALK_UIDS_MAX];
        size_t n = 0, n_uids = q->walk.n_uids < JOBS_WALK_UIDS_MAX ? q->walk.n_uids : JOBS_WALK_UIDS_MAX;
        DiscoverFilter f = { .any_uid = q->walk.any_uid, .uids = uids, .n_uids = n_uids };

        for (size_t i = 0; i < n_uids; i++)
                uids[i] = q->walk.uids[i];
        test_hook_pause("candidate-walk");
        /* a walk over all of /proc: other users' short jobs go first (only if the way back is open) */
        bool niced = broker->may_renice && setpriority(PRIO_PROCESS, 0, JOBS_CANDIDATES_NICE) == 0;
        a->r = discover_candidates(&f, a->candidates.found, DISCOVER_CANDIDATES_MAX, &n);
        if (niced)
                (void)setpriority(PRIO_PROCESS, 0, 0); /* allowed: may_renice said so */
        if (a->r != 0)
                return REPLY_HEAD;
        a->candidates.n = (uint32_t)n;
        return REPLY_HEAD + offsetof(typeof(a->candidates), found) + n * sizeof(DiscoverCandidate);
}

/* Tells the agent how far the dump got; a full control socket skips a report, nothing else. */
static void stream_report(int control, uint64_t bytes) {
        DumpProgress p = { .bytes = bytes };
        (void)send(control, &p, sizeof(p), MSG_DONTWAIT | MSG_NOSIGNAL);
}

static uint64_t stream_now_usec(void) {
        struct timespec ts;

        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}

/* A stream's control socket, as the room it asks for is waited on. */
typedef struct StreamControl {
        int fd;
        bool finish;            /* JOBS_STREAM_FINISH came while the stream waited for room */
} StreamControl;

/*
 * The dump would break the guards: the agent is asked for @room bytes (retention.h removes
 * yielding tables' artifacts for a user's dump), and the stream waits for its answer.
 * Return: 0 when room was made (check again), or a DUMP_WRITER_E_NO_SPACE to stop at.
 */
static int stream_make_room(void *userdata, uint64_t bytes, uint64_t room) {
        StreamControl *c = userdata;
        DumpProgress ask = { .bytes = bytes, .room = room };
        struct pollfd p = { .fd = c->fd, .events = POLLIN };
        char word = 0;

        if (send(c->fd, &ask, sizeof(ask), MSG_NOSIGNAL) != (ssize_t)sizeof(ask))
                return DUMP_WRITER_E_NO_SPACE;
        for (;;) {
                /* a pass lists dump_dir and waits on the agent's records: its job's own deadline bounds it */
                if (poll(&p, 1, (int)(JOBS_RETAIN_TIMEOUT_USEC / 1000)) <= 0 || recv(c->fd, &word, 1, 0) != 1)
                        return DUMP_WRITER_E_NO_SPACE;
                if (word == JOBS_STREAM_FINISH)
                        c->finish = true;
                else
                        return word == JOBS_STREAM_ROOM_MADE ? 0 : DUMP_WRITER_E_NO_SPACE;
        }
}

/*
 * The dump's bytes, from the FIFO into the unnamed file, until the agent
 * says the runtime is done (or goes away, or the guards are broken). New
 * bytes are reported at once when they are the first or the FIFO went quiet,
 * and at least every STREAM_PROGRESS_USEC while they keep coming: the agent
 * measures the runtime's pace by these reports (dump.c). A user's dump that would
 * break the guards asks for room first (stream_make_room()).
 */
static size_t handle_stream(const JobRequest *q, const WorkerMessage *msg, JobReply *a) {
        const char *why = NULL;
        DumpWriter w;
        uint64_t reported = 0, reported_usec = 0;
        bool fifo_open = true;
        StreamControl control;

        if (msg->n_fds != 4 || q->stream.slot >= DUMP_SLOTS_MAX) {
                a->r = -EBADF;
                return REPLY_HEAD;
        }
        control = (StreamControl){ .fd = msg->fds[3] };
        a->r = dump_writer_init(&w, msg->fds[2], msg->fds[1], msg->fds[0], &q->stream.limits, broker->dump_slots,
                                q->stream.slot,
                                q->stream.make_room ? &(DumpRoom){ .ask = stream_make_room, .userdata = &control } : NULL,
                                &why);
        while (a->r == 0) {
                struct pollfd p[2] = { { .fd = control.fd, .events = POLLIN }, { .fd = w.source_fd, .events = POLLIN } };
                char command = 0;
                ssize_t n;

                if (control.finish) {
                        a->r = dump_writer_drain(&w, &why);
                        break;
                }
                if (poll(p, fifo_open ? 2 : 1, STREAM_PROGRESS_USEC / 1000) < 0 && errno != EINTR) {
                        a->r = -errno;
                        break;
                }
                if (p[0].revents) {
                        n = recv(control.fd, &command, 1, MSG_DONTWAIT);
                        if (n <= 0 && !(n < 0 && errno == EAGAIN)) {
                                a->r = -ECANCELED; /* the agent is gone, or gave up on the dump */
                                break;
                        }
                        if (command == JOBS_STREAM_FINISH) {
                                a->r = dump_writer_drain(&w, &why);
                                break;
                        }
                }
                if (fifo_open && p[1].revents) {
                        a->r = dump_writer_pump(&w, STREAM_PUMP_BUDGET, &why);
                        if (a->r == DUMP_WRITER_E_ENDED) {
                                fifo_open = false; /* createdump is done; its runtime's answer says how it went */
                                a->r = 0;
                        }
                }
                if (w.bytes != reported && (reported == 0 || !fifo_open || p[1].revents == 0 ||
                                            w.bytes - reported >= STREAM_PUMP_BUDGET ||
                                            stream_now_usec() - reported_usec >= STREAM_PROGRESS_USEC)) {
                        stream_report(control.fd, w.bytes);
                        reported = w.bytes;
                        reported_usec = stream_now_usec();
                }
        }
        reply_why(a, why);
        a->bytes = w.bytes;
        return REPLY_HEAD + sizeof(a->bytes);
}

/*
 * max_bytes of the trace are in: the agent is told to stop the session (a full or closed control
 * socket: it is not told). Return: the bytes the stream may now come to, max_bytes and the
 * rundown's allowance on top, or max_bytes when the agent was not told (the stream is cut there).
 */
static uint64_t trace_at_limit(int control, uint64_t max_bytes, JobReply *a) {
        if (send(control, &(char){ JOBS_TRACE_SIZE_LIMIT }, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1)
                return max_bytes;
        a->trace.limited = true;
        return max_bytes > UINT64_MAX - EVENTPIPE_RUNDOWN_BYTES_MAX ? UINT64_MAX
                                                                    : max_bytes + EVENTPIPE_RUNDOWN_BYTES_MAX;
}

/*
 * A trace's stream, from the runtime's socket into the unnamed file, until the runtime ends it. At
 * max_bytes the agent is told to stop the session (trace_at_limit()), and the runtime's closing
 * rundown, which names the methods, is still read, up to its allowance; past it the stream is cut.
 * A socket cannot be spliced into a file: its bytes go through a pipe, never through this process's
 * memory.
 */
static size_t handle_trace(const JobRequest *q, const WorkerMessage *msg, JobReply *a) {
        _cleanup_close_ int pipe_read = -EBADF, pipe_write = -EBADF;
        const char *why = NULL;
        DumpWriter w = {};
        uint64_t most = q->trace.max_bytes; /* then, once the agent was told, the rundown's allowance on top */
        int fds[2], stream, control;

        if (msg->n_fds != 4 || q->trace.slot >= DUMP_SLOTS_MAX) {
                a->r = -EBADF;
                return REPLY_HEAD;
        }
        stream = msg->fds[0];
        control = msg->fds[3];
        if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
                a->r = -errno;
                return REPLY_HEAD;
        }
        pipe_read = fds[0];
        pipe_write = fds[1];
        (void)fcntl(pipe_write, F_SETPIPE_SZ, STREAM_PIPE_SIZE);
        a->r = dump_writer_init(&w, msg->fds[2], msg->fds[1], pipe_read, &q->trace.limits, broker->dump_slots,
                                q->trace.slot, NULL, &why);
        while (a->r == 0 && w.bytes < most) {
                struct pollfd p = { .fd = stream, .events = POLLIN };
                ssize_t n = splice(stream, NULL, pipe_write, NULL, STREAM_PIPE_SIZE, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

                if (n == 0 || (n < 0 && errno == ECONNRESET)) {
                        a->trace.ended = true; /* stopped, or the process is gone: what arrived stays */
                        break;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN) {
                        if (poll(&p, 1, -1) < 0 && errno != EINTR)
                                a->r = -errno;
                        continue;
                }
                if (n < 0) {
                        a->r = -errno;
                        break;
                }
                /* told before these bytes are written: all of them are the file's when the limit moves on */
                if (!a->trace.limited && w.bytes + (uint64_t)n >= q->trace.max_bytes)
                        most = trace_at_limit(control, q->trace.max_bytes, a);
                a->r = dump_writer_pump(&w, MIN((uint64_t)n, most - w.bytes), &why);
        }
        reply_why(a, why);
        a->trace.bytes = w.bytes;
        return REPLY_HEAD + sizeof(a->trace);
}

static int stacks_header(const NettraceHeader *h, void *userdata) {
        monitor_view_header(userdata, h);
        return 0;
}

static int stacks_event(const NettraceEvent *e, void *userdata) {
        return monitor_view_event(userdata, e);
}

/* Feeds the whole nettrace in @fd, from its start, to @callbacks. Return: 0 or a negative errno. */
static int nettrace_read(int fd, const NettraceCallbacks *callbacks, void *userdata) {
        _cleanup_free_ uint8_t *buf = malloc(STREAM_PIPE_SIZE);
        NettraceParser *parser = NULL;
        off_t at = 0;
        ssize_t n;
        int r;

        if (!buf)
                return -ENOMEM;
        r = nettrace_parser_new(callbacks, userdata, &parser);
        if (r < 0)
                return r;
        /* a stream cut short (the process went) still shows what it held: the parser's verdict is not ours */
        while ((n = pread(fd, buf, STREAM_PIPE_SIZE, at)) > 0 && nettrace_feed(parser, buf, (size_t)n) == 0)
                at += n;
        r = n < 0 ? -errno : 0;
        nettrace_parser_free(parser);
        return r;
}

static int stacks_read(int fd, MonitorView *v) {
        static const NettraceCallbacks callbacks = { .header = stacks_header, .event = stacks_event, .stacks = true };

        return nettrace_read(fd, &callbacks, v);
}

/*
 * A rendering's reply, its output written into msg->fds[1] with @a->r so far: its size, once dump_dir's guards
 * (max_use, keep_free, in msg->fds[2]) leave room for it; else JOBS_E_NO_SPACE, the why naming @what.
 */
static size_t rendered_reply(const DumpLimits *limits, const WorkerMessage *msg, const char *what, JobReply *a) {
        char why[DUMP_SPACE_WHY_MAX] = "", none[64];
        uint64_t headroom = 0;
        struct stat st;

        if (a->r == 0 && fstat(msg->fds[1], &st) < 0)
                a->r = -errno;
        if (a->r == 0)
                a->r = dump_space_headroom(msg->fds[2], &limits->max_use, &limits->keep_free, 0, &headroom, why,
                                           sizeof(why));
        if (a->r == DUMP_PUBLISH_E_NO_SPACE || (a->r == 0 && (uint64_t)st.st_size > headroom))
                a->r = JOBS_E_NO_SPACE; /* dump_space_headroom()'s refusal, or the output past it: this job's code */
        snprintf(none, sizeof(none), "no room in dump_dir for the %s", what);
        reply_why(a, a->r == JOBS_E_NO_SPACE ? (why[0] ? why : none) : NULL);
        a->bytes = a->r == 0 ? (uint64_t)st.st_size : 0;
        return REPLY_HEAD + sizeof(a->bytes);
}

/*
 * A stacks or exceptions session's nettrace (a [[collect]] table's then.stacks, then.exceptions) as the
 * text dsctl stacks or dsctl exceptions prints, into the unnamed file: parsed here, never in the loop,
 * and at most MONITOR_VIEW_OUTPUT_MAX bytes of text; dump_dir's guards (max_use, keep_free) must leave
 * room for it. @thrown (may be NULL): an exception seen before the session, shown with its own.
 */
static size_t handle_view_text(MonitorViewKind kind, const DumpLimits *limits, const MonitorThrown *thrown,
                               const WorkerMessage *msg, JobReply *a) {
        MonitorView *v = NULL;
        FILE *out;
        int fd;

        if (msg->n_fds != 3) {
                a->r = -EBADF;
                return REPLY_HEAD;
        }
        fd = fcntl(msg->fds[1], F_DUPFD_CLOEXEC, 3);
        out = fd < 0 ? NULL : fdopen(fd, "w");
        if (!out) {
                a->r = -errno;
                safe_close(fd);
                return REPLY_HEAD;
        }
        a->r = monitor_view_new(kind, MONITOR_VIEW_TEXT, out, &v);
        if (a->r == 0)
                a->r = stacks_read(msg->fds[0], v);
        if (a->r == 0 && thrown)
                a->r = monitor_view_thrown(v, thrown);
        if (a->r == 0)
                (void)monitor_view_finish(v);
        monitor_view_free(v);
        if (fclose(out) != 0 && a->r == 0)
                a->r = -errno;
        return rendered_reply(limits, msg, "text", a);
}

static size_t handle_stacks(const JobRequest *q, const WorkerMessage *msg, JobReply *a) {
        return handle_view_text(MONITOR_VIEW_STACKS, &q->rendering, NULL, msg, a);
}

/*
 * A CPU trace's flame graph (a [[collect]] table's then.flame, beside its published nettrace): the SVG dsctl
 * convert --format flame writes of it, by the same code (trace_convert_file()), here and never in the loop; a
 * trace cut short is drawn as far as it goes, as dsctl draws it. A trace with no samples makes none. The SVG
 * must fit dump_dir's guards.
 */
static size_t handle_flame(const JobRequest *q, const WorkerMessage *msg, JobReply *a) {
        uint64_t samples = 0, left_out = 0;
        bool converted = false;
        int r;

        test_hook_pause("flame-draw"); /* in the worker: a test stops the agent while the flame graph is drawn */
        if (msg->n_fds != 3) {
                a->r = -EBADF;
                return REPLY_HEAD;
        }
        /* the file's offset is where its recording ended; dsctl reads it from its start */
        r = lseek(msg->fds[0], 0, SEEK_SET) < 0 ? -errno
                                                 : trace_convert_file(msg->fds[0], TRACE_FORMAT_FLAME, "trace.nettrace",
                                                                      msg->fds[1], &samples, &left_out, &converted);
        a->r = r < 0 ? r : 0; /* a positive NETTRACE_E_*: cut short, and converted as far as it goes */
        if (a->r == 0 && (!converted || samples == 0)) {
                a->r = JOBS_E_NO_SAMPLES;
                reply_why(a, converted ? "the trace holds no CPU samples" : "the trace is no nettrace stream");
                return REPLY_HEAD + sizeof(a->bytes);
        }
        return rendered_reply(&q->rendering, msg, "flame graph", a);
}

/* The exception the job carries, its strings pointing into the job (the view copies what it keeps). */
static size_t handle_exceptions(JobRequest *q, const WorkerMessage *msg, JobReply *a) {
        JobThrown *j = &q->exceptions.thrown;
        MonitorThrown thrown;

        j->type[sizeof(j->type) - 1] = j->message[sizeof(j->message) - 1] = '\0';
        thrown = (MonitorThrown){ .x = { .type = j->type, .message = j->message, .ip = j->ip, .hresult = j->hresult,
                                         .flags = j->flags },
                                  .thread_id = j->thread_id, .timestamp = j->timestamp, .frames = j->frames,
                                  .depth = MIN(j->depth, (uint32_t)MONITOR_VIEW_FRAMES_MAX), .lost = j->lost };
        return handle_view_text(MONITOR_VIEW_EXCEPTIONS, &q->exceptions.limits,
                                q->exceptions.have_thrown ? &thrown : NULL, msg, a);
}

/* A counters session's nettrace on its way to CSV: the samples, timed by the stream's own clock. */
typedef struct CountersCsv {
        CounterRows *rows;
        FILE *out;
        NettraceHeader header;
        bool have_header;
        uint64_t most;          /* bytes of CSV dump_dir has room for */
} CountersCsv;

static void counters_emit(const NettraceCounter *c, const CounterInstrument *in, int64_t when_nsec, int64_t now_nsec,
                          void *userdata) {
        CountersCsv *x = userdata;

        counter_csv_sample(x->out, c, in, counter_rows_interval(x->rows), when_nsec);
}

static int counters_header(const NettraceHeader *h, void *userdata) {
        CountersCsv *x = userdata;

        x->header = *h;
        x->have_header = true;
        return 0;
}

/* Each sample as dsctl counters takes it, its wall-clock time the event's; a CSV past x->most stops the parse. */
static int counters_event(const NettraceEvent *e, void *userdata) {
        _cleanup_(nettrace_counter_done) NettraceCounter c = {};
        CountersCsv *x = userdata;
        int64_t when;
        long at;

        if (nettrace_counter_extract(e, &c) != 0)
                return 0; /* not a counter: the runtime's business */
        when = x->have_header ? nettrace_time_nsec(&x->header, e->timestamp) : 0;
        counter_rows_tick(x->rows, when);
        counter_rows_add(x->rows, &c, when, when);
        at = ftell(x->out);
        return at < 0 || (uint64_t)at > x->most ? -EFBIG : 0;
}

/*
 * A counters session's nettrace (a [[collect]] table's then.counters) as the CSV dsctl counters
 * --format csv writes of it, into the unnamed file: parsed here, never in the loop, with
 * counter-rows.h as dsctl uses it; the CSV must fit within dump_dir's guards (max_use, keep_free).
 */
static size_t handle_counters(const JobRequest *q, const WorkerMessage *msg, JobReply *a) {
        static const CounterRowsCallbacks rows_callbacks = { .emit = counters_emit };
        static const NettraceCallbacks callbacks = { .header = counters_header, .event = counters_event };
        CountersCsv x = {};
        char why[DUMP_SPACE_WHY_MAX] = "";
        struct stat st;
        int fd;

        if (msg->n_fds != 3 || memchr(q->counters.providers, '\0', sizeof(q->counters.providers)) == NULL) {
                a->r = -EBADMSG;
                return REPLY_HEAD;
        }
        a->r = dump_space_headroom(msg->fds[2], &q->counters.limits.max_use, &q->counters.limits.keep_free, 0,
                                   &x.most, why, sizeof(why));
        if (a->r == 0) {
                fd = fcntl(msg->fds[1], F_DUPFD_CLOEXEC, 3);
                x.out = fd < 0 ? NULL : fdopen(fd, "w");
                if (!x.out) {
                        a->r = -errno;
                        safe_close(fd);
                        return REPLY_HEAD;
                }
                a->r = counter_rows_new(&rows_callbacks, &x, &x.rows);
        }
        if (a->r == 0) {
                counter_rows_begin(x.rows, q->counters.providers);
                counter_csv_header(x.out);
                a->r = nettrace_read(msg->fds[0], &callbacks, &x);
        }
        if (a->r == 0)
                counter_rows_end(x.rows);
        counter_rows_free(x.rows);
        if (x.out && fclose(x.out) != 0 && a->r == 0)
                a->r = -errno;
        if (a->r == 0 && fstat(msg->fds[1], &st) < 0)
                a->r = -errno;
        if (a->r == DUMP_PUBLISH_E_NO_SPACE || (a->r == 0 && (uint64_t)st.st_size > x.most))
                a->r = JOBS_E_NO_SPACE; /* dump_space_headroom()'s refusal, or the CSV past it: this job's code */
        reply_why(a, a->r == JOBS_E_NO_SPACE ? (why[0] ? why : "no room in dump_dir for the counters") : NULL);
        a->bytes = a->r == 0 ? (uint64_t)st.st_size : 0;
        return REPLY_HEAD + sizeof(a->bytes);
}

/* The heap events of a gcdump session, as dsctl gcdump reads them (session-client.c): after the first
 * malformed or excessive one the rest are not added, and the error is told at the end. */
typedef struct GcdumpRead {
        GcdumpHeap *heap;
        int error;
} GcdumpRead;

static int gcdump_header(const NettraceHeader *h, void *userdata) {
        GcdumpRead *g = userdata;

        gcdump_heap_set_pointer_size(g->heap, h->pointer_size);
        return 0;
}

static int gcdump_event(const NettraceEvent *e, void *userdata) {
        GcdumpRead *g = userdata;
        int r;

        if (g->error != 0)
                return 0;
        r = gcdump_heap_add(g->heap, e);
        if (r < 0)
                return r;
        if (r == GCDUMP_E_MALFORMED || r == GCDUMP_E_LIMIT)
                g->error = r;
        return 0;
}

/* What the .gcdump's writer is told (gcdump_heap_write()): its bytes go through the dump writer. */
typedef struct GcdumpOut {
        DumpWriter w;
        int r;                  /* the writer's first refusal */
        const char *why;
} GcdumpOut;

static int gcdump_out(const void *data, size_t size, void *userdata) {
        GcdumpOut *o = userdata;

        o->r = dump_writer_write(&o->w, data, size, &o->why);
        return o->r == 0 ? 0 : -ENOSPC; /* ends the writing; o->r says why */
}

/*
 * The session's stream, read until the runtime ends it or max_bytes came: parsed here, never in the
 * loop. Once the dump's GC has ended, the agent is told (JOBS_GCDUMP_DUMPED on @control) so that it
 * stops the session; the rundown that follows names the types' modules. A stream the parser refuses
 * is still read to its end, unparsed, as dsctl does. Return: 0 or a negative errno (-ECANCELED: the
 * agent gave up).
 */
static int gcdump_read(int stream, int control, uint64_t max_bytes, GcdumpRead *g, JobReply *a) {
        static const NettraceCallbacks callbacks = { .header = gcdump_header, .event = gcdump_event };
        _cleanup_free_ uint8_t *buf = malloc(STREAM_PIPE_SIZE);
        NettraceParser *parser = NULL;
        int parse_error = 0, r = 0;

        if (!buf)
                return -ENOMEM;
        r = nettrace_parser_new(&callbacks, g, &parser);
        while (r == 0 && a->gcdump.stream_bytes < max_bytes) {
                struct pollfd p[2] = { { .fd = control, .events = POLLIN }, { .fd = stream, .events = POLLIN } };
                uint64_t left = max_bytes - a->gcdump.stream_bytes;
                ssize_t n;

                if (poll(p, 2, -1) < 0) {
                        r = errno == EINTR ? 0 : -errno;
                        continue;
                }
                if (p[0].revents) {
                        char c;

                        n = recv(control, &c, 1, MSG_DONTWAIT);
                        if (n <= 0 && !(n < 0 && errno == EAGAIN)) {
                                r = -ECANCELED; /* the agent is gone, or gave up on the dump */
                                break;
                        }
                }
                if (!p[1].revents)
                        continue;
                n = read(stream, buf, left < STREAM_PIPE_SIZE ? (size_t)left : STREAM_PIPE_SIZE);
                if (n == 0 || (n < 0 && errno == ECONNRESET)) {
                        a->gcdump.ended = true; /* stopped, or the process is gone */
                        break;
                }
                if (n < 0) {
                        r = errno == EINTR || errno == EAGAIN ? 0 : -errno;
                        continue;
                }
                a->gcdump.stream_bytes += (uint64_t)n;
                if (parse_error == 0) {
                        parse_error = nettrace_feed(parser, buf, (size_t)n);
                        if (parse_error < 0)
                                r = parse_error;
                }
                if (!a->gcdump.dumped && gcdump_heap_dumped(g->heap)) {
                        /* a full control socket loses nothing: the agent's window stops the session too */
                        (void)send(control, &(char){ JOBS_GCDUMP_DUMPED }, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
                        a->gcdump.dumped = true;
                }
        }
        nettrace_parser_free(parser);
        return r;
}

/* The data this worker holds now (VmData of /proc/self/status), in bytes; 0 when it cannot be read. */
static uint64_t own_data_bytes(void) {
        _cleanup_free_ char *status = NULL;
        unsigned long long kib;
        const char *line;
        size_t size;

        if (read_file_at(AT_FDCWD, "/proc/self/status", 64 * 1024, &status, &size) < 0)
                return 0;
        line = strstr(status, "\nVmData:");
        return line && sscanf(line, "\nVmData: %llu kB", &kib) == 1 ? (uint64_t)kib * 1024 : 0;
}

/*
 * Bounds what this worker may hold from here to JOBS_GCDUMP_DATA_MAX more (its soft RLIMIT_DATA, which
 * malloc's heap and mappings count against): a heap dump's stream is the target's, and the heap's own
 * limits (gcdump-heap.h) still let a crafted one make a worker hold hundreds of MiB. *@ret_old is what
 * to put back after the job, for the worker's next one. Return: 0, or a negative errno (no bound set).
 */
static int bound_data(struct rlimit *ret_old) {
        uint64_t now = own_data_bytes();
        struct rlimit bounded;

        if (now == 0 || getrlimit(RLIMIT_DATA, ret_old) < 0)
                return -EIO;
        bounded = (struct rlimit){ .rlim_cur = now + JOBS_GCDUMP_DATA_MAX, .rlim_max = ret_old->rlim_max };
        if (bounded.rlim_cur > ret_old->rlim_cur)
                bounded.rlim_cur = ret_old->rlim_cur;
        return setrlimit(RLIMIT_DATA, &bounded) < 0 ? -errno : 0;
}

/* The bound is lifted and what the job held goes back to the system: the worker takes other jobs. */
static void unbound_data(const struct rlimit *old) {
        (void)setrlimit(RLIMIT_DATA, old);
        (void)malloc_trim(0);
}

/*
 * A [[collect]] table's heap dump: the gcdump session's stream (gcdump_read()) becomes, here, the
 * .gcdump dsctl gcdump -o writes, into the unnamed file, counted in the slot and under dump_dir's
 * guards. The target wrote every byte: the heap's own limits bound how much of it is kept, and
 * JOBS_GCDUMP_DATA_MAX how much memory this worker may take for it (bound_data()); a heap past it is
 * refused as one past the heap's limits is.
 */
static size_t handle_gcdump(const JobRequest *q, const WorkerMessage *msg, JobReply *a) {
        _cleanup_(gcdump_heap_freep) GcdumpHeap *heap = NULL;
        GcdumpOut out = {};
        GcdumpRead g = {};
        struct rlimit unbounded;
        uint64_t seed = 0;

        if (msg->n_fds != 4 || q->trace.slot >= DUMP_SLOTS_MAX) {
                a->r = -EBADF;
                return REPLY_HEAD;
        }
        a->r = bound_data(&unbounded);
        if (a->r < 0) {
                reply_why(a, "cannot bound the memory of the heap dump's worker");
                return REPLY_HEAD;
        }
        a->r = dump_writer_init(&out.w, msg->fds[2], msg->fds[1], -EBADF, &q->trace.limits, broker->dump_slots,
                                q->trace.slot, NULL, &out.why);
        if (a->r == 0)
                a->r = gcdump_heap_new(&heap);
        if (a->r == 0) {
                /* the target must not know how its addresses hash */
                (void)getrandom(&seed, sizeof(seed), GRND_NONBLOCK);
                gcdump_heap_set_seed(heap, seed);
                g.heap = heap;
                a->r = gcdump_read(msg->fds[0], msg->fds[3], q->trace.max_bytes, &g, a);
        }
        if (a->r == 0 && g.error != 0) {
                a->r = JOBS_E_NO_HEAP;
                reply_why(a, gcdump_strerror(g.error));
        } else if (a->r == 0) {
                a->r = gcdump_heap_write(heap, "dsagent", gcdump_out, &out);
                if (out.r != 0)
                        a->r = out.r; /* the writer's refusal, not the -ENOSPC that carried it */
                else if (a->r > 0) {
                        reply_why(a, gcdump_strerror(a->r));
                        a->r = JOBS_E_NO_HEAP;
                }
        }
        if (a->r == DUMP_WRITER_E_NO_SPACE)
                reply_why(a, out.why ? out.why : "no room in dump_dir for the heap dump");
        if (a->r == -ENOMEM) {
                a->r = JOBS_E_NO_HEAP;
                snprintf(a->why, sizeof(a->why), "the heap needs more memory than the agent gives a worker for a "
                         "heap dump (%d MiB)", JOBS_GCDUMP_DATA_MAX_MIB);
        }
        a->gcdump.bytes = out.w.bytes;
        heap = gcdump_heap_free(heap);
        unbound_data(&unbounded);
        return REPLY_HEAD + sizeof(a->gcdump);
}

/* A retention pass over dump_dir, under the policy this worker was forked with (retention-pass.h). */
static size_t handle_retain(const JobRequest *q, const WorkerMessage *msg, JobReply *a) {
        const char *why = NULL;

        if (msg->n_fds != 1) {
                a->r = -EBADF;
                return REPLY_HEAD;
        }
        a->r = retention_pass_run(broker->policy, broker->dump_slots, q->room, msg->fds[0], &a->retain, &why);
        reply_why(a, why);
        return REPLY_HEAD + sizeof(a->retain);
}

typedef struct CrashesPacking {
        JobReply *a;
        bool with_store;
} CrashesPacking;

/* One more crash into the reply, with its stored core's state; false when it does not fit. */
static bool crashes_pack(const CrashEntry *e, void *userdata) {
        CrashesPacking *p = userdata;
        CrashEntry copy = *e;
        size_t n;

        if (p->with_store) {
                _cleanup_close_ int fd = -EBADF;
                const char *why = NULL;
                struct stat st;

                copy.stored = crash_core_open(e, &fd, &st, &why) == 0;
                copy.stored_size = copy.stored ? (uint64_t)st.st_size : 0;
                /* what the journal could not tell, the core's NT_FILE note does */
                if (copy.stored && copy.dotnet == CRASH_DOTNET_UNKNOWN) {
                        CrashDotnet dotnet = CRASH_DOTNET_UNKNOWN;

                        if (crash_core_dotnet(fd, (CrashCompression)copy.compression, &dotnet) == 0)
                                copy.dotnet = (uint8_t)dotnet;
                }
        }
        n = crash_entry_pack(&copy, p->a->crashes.packed + p->a->crashes.size,
                             sizeof(p->a->crashes.packed) - p->a->crashes.size);
        if (n == 0)
                return false;
        p->a->crashes.size += (uint32_t)n;
        p->a->crashes.n++;
        return true;
}

static size_t handle_crashes(const JobRequest *q, JobReply *a) {
        CrashesPacking p = { .a = a, .with_store = q->crashes.with_store };
        CrashQuery query = q->crashes.query;
        bool more = false;
        unsigned untrusted = 0;

        query.after[sizeof(query.after) - 1] = '\0';
        a->r = crash_journal_read(&query, crashes_pack, &p, a->crashes.cursor, &more, &untrusted);
        a->crashes.more = more;
        a->crashes.untrusted = untrusted;
        return offsetof(JobReply, crashes.packed) + a->crashes.size;
}

static void crash_copy_progress(uint64_t bytes, void *userdata) {
        stream_report(*(int *)userdata, bytes);
}

/* What crash-core.h's codes are to the callers of jobs.h; this worker is crash-core's direct caller. */
static int crash_copy_code(int r) {
        switch (r) {
        case CRASH_CORE_E_GONE: return JOBS_E_CRASH_GONE;
        case CRASH_CORE_E_UNTRUSTED: return JOBS_E_CRASH_UNTRUSTED;
        case CRASH_CORE_E_CORRUPT: return JOBS_E_CRASH_CORRUPT;
        case CRASH_CORE_E_TOO_LARGE: return JOBS_E_CRASH_TOO_LARGE;
        case CRASH_CORE_E_NO_SPACE: return JOBS_E_NO_SPACE;
        case CRASH_CORE_E_NOT_CORE: return JOBS_E_NOT_CORE;
        default: return r;
        }
}

/* The stored core, checked, decompressed by a confined child into the unnamed file (crash-core.h). */
static size_t handle_crash_copy(const JobRequest *q, const WorkerMessage *msg, JobReply *a) {
        _cleanup_close_ int core_fd = -EBADF;
        const char *why = NULL;
        DumpWriter w = {};
        struct stat st;
        int control;

        if (msg->n_fds != 3 || q->crash_copy.slot >= DUMP_SLOTS_MAX) {
                a->r = -EBADF;
                return REPLY_HEAD;
        }
        control = msg->fds[2];
        a->r = crash_copy_code(crash_core_open(&q->crash_copy.entry, &core_fd, &st, &why));
        if (a->r == 0) {
                a->r = dump_writer_init(&w, msg->fds[1], msg->fds[0], -EBADF, &q->crash_copy.limits, broker->dump_slots,
                                        q->crash_copy.slot, NULL, &why);
                if (a->r == DUMP_WRITER_E_NO_SPACE) /* dump_writer_init()'s refusal: this job's code */
                        a->r = JOBS_E_NO_SPACE;
        }
        if (a->r == 0)
                a->r = crash_copy_code(crash_core_copy(core_fd, (CrashCompression)q->crash_copy.entry.compression, &w,
                                                       q->crash_copy.max_bytes, crash_copy_progress, &control, &why));
        reply_why(a, why);
        a->bytes = w.bytes;
        return REPLY_HEAD + sizeof(a->bytes);
}

int jobs_handle(WorkerMessage *msg, WorkerMessage *reply) {
        static JobRequest q;
        JobReply *a = (JobReply *)reply->data;
        bool paused;

        assert(broker); /* jobs_set_broker() comes before the pool forks any worker */
        if (msg->size < sizeof(uint32_t) || msg->size > sizeof(q))
                return -EBADMSG;
        memset(&q, 0, sizeof(q));
        memcpy(&q, msg->data, msg->size);
        /* the buffer holds this worker's last reply: a handler that sets a field only on some paths (a
         * trace's "ended") must not send the last job's value on the others */
        memset(a, 0, sizeof(*a));
        switch (q.type) {
        case JOB_OPEN:
                reply->size = handle_open(&q, a, reply);
                break;
        case JOB_SOCKET:
                reply->size = handle_socket(&q, msg, a, reply);
                break;
        case JOB_UNIT:
                reply->size = handle_unit(&q, a);
                break;
        case JOB_RECHECK:
                reply->size = handle_recheck(&q, msg, a);
                break;
        case JOB_STAGE:
                reply->size = handle_stage(&q, msg, a, reply);
                break;
        case JOB_CANDIDATES:
                reply->size = handle_candidates(&q, a);
                break;
        case JOB_NAMES:
                audit_names_resolve(&a->names, q.who.uid, q.who.gid, (uid_t)-1);
                reply->size = REPLY_HEAD + sizeof(a->names);
                break;
        case JOB_STREAM:
                reply->size = handle_stream(&q, msg, a);
                break;
        case JOB_TRACE:
                reply->size = handle_trace(&q, msg, a);
                break;
        case JOB_STACKS:
                reply->size = handle_stacks(&q, msg, a);
                break;
        case JOB_COUNTERS:
                reply->size = handle_counters(&q, msg, a);
                break;
        case JOB_EXCEPTIONS:
                reply->size = handle_exceptions(&q, msg, a);
                break;
        case JOB_FLAME:
                reply->size = handle_flame(&q, msg, a);
                break;
        case JOB_GCDUMP:
                reply->size = handle_gcdump(&q, msg, a);
                break;
        case JOB_FACTS:
                reply->size = handle_facts(&q, a);
                break;
        case JOB_RETAIN:
                reply->size = handle_retain(&q, msg, a);
                break;
        case JOB_CRASHES:
                reply->size = handle_crashes(&q, a);
                break;
        case JOB_CRASH_COPY:
                reply->size = handle_crash_copy(&q, msg, a);
                break;
        case JOB_CLEAN:
                q.runtime_dir[sizeof(q.runtime_dir) - 1] = '\0';
                paused = test_hook_pause("before-clean");
                dump_stage_clean_stale(q.runtime_dir);
                if (paused) /* for the test that held it, and only then: other tests read every line */
                        test_hook_note("stale staging cleaned");
                reply->size = REPLY_HEAD;
                break;
        default:
                return -EBADMSG;
        }
        return 0;
}
