/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The jobs the worker processes do for the loop (jobs.h): their requests and replies on the wire
 * between agent and worker, and the callbacks that take each answer.
 */
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

#include "broker-state.h"
#include "cleanup.h"
#include "counter-rows.h"
#include "crash-core.h"
#include "crash-journal.h"
#include "decision.h"
#include "discover.h"
#include "dump-writer.h"
#include "dump-publish.h"
#include "fileio.h"
#include "gcdump-heap.h"
#include "jobs.h"
#include "monitor-view.h"
#include "nettrace.h"
#include "retention-pass.h"
#include "test-hooks.h"
#include "text.h"
#include "userns.h"

/* The supplementary groups a job carries for the requester; a user in more is decided without them
 * in listings (fail closed: fewer rules match). */
#define JOBS_GROUPS_MAX 1024
/* A dump stream reports its progress this often, and once its first byte is in. */
#define STREAM_PROGRESS_USEC 1000000
#define STREAM_PUMP_BUDGET (64ULL << 20)
/* A trace's bytes pass through a pipe this large: a whole runtime block and more in one splice. */
#define STREAM_PIPE_SIZE (1 << 20)

typedef enum JobType {
        JOB_OPEN = 1,
        JOB_SOCKET,
        JOB_UNIT,
        JOB_STAGE,
        JOB_CANDIDATES,
        JOB_NAMES,
        JOB_STREAM,
        JOB_CLEAN,
        JOB_TRACE,
        JOB_RECHECK,
        JOB_STACKS,
        JOB_COUNTERS,
        JOB_GCDUMP,
        JOB_FACTS,
        JOB_RETAIN,
        JOB_CRASHES,
        JOB_CRASH_COPY,
        JOB_EXCEPTIONS,
} JobType;

/* Bytes of an exception's type or message a job carries: what the parser gives at most (NETTRACE_STRING_MAX UTF-16
 * units, 3 bytes of UTF-8 each at most), and its NUL. */
#define JOBS_THROWN_TEXT_MAX (3 * NETTRACE_STRING_MAX + 1)

/* A MonitorThrown, flat. */
typedef struct JobThrown {
        uint64_t ip, thread_id, timestamp;
        uint32_t hresult;
        uint16_t flags;
        uint32_t depth, lost;
        uint64_t frames[MONITOR_VIEW_FRAMES_MAX];
        char type[JOBS_THROWN_TEXT_MAX];
        char message[JOBS_THROWN_TEXT_MAX];
} JobThrown;

typedef struct JobRequester {
        uint32_t uid, gid;
        uint32_t n_groups;
        uint32_t groups[JOBS_GROUPS_MAX];
} JobRequester;

/* What crosses to a worker; fds ride along (SCM_RIGHTS), as each type says. */
typedef struct JobRequest {
        uint32_t type;
        union {
                struct {
                        int32_t pid;
                        uint8_t names;          /* also resolve the names for the record */
                        uint8_t find_socket;    /* also find the runtime's socket, if @who may see the target */
                        JobRequester who;       /* the requester */
                } open;                         /* OPEN */
                TargetFacts facts;              /* SOCKET, RECHECK (fds: pidfd, /proc fd) */
                struct {
                        char unit[TARGET_UNIT_MAX + 1];
                        JobRequester who;
                } unit;                         /* UNIT */
                struct {
                        TargetFacts facts;
                        char runtime_dir[PATH_MAX];
                } stage;                        /* STAGE (fds: pidfd, /proc fd) */
                struct {
                        uint8_t any_uid;
                        uint32_t n_uids;
                        uint32_t uids[JOBS_WALK_UIDS_MAX];
                } walk;                         /* CANDIDATES */
                JobRequester who;               /* NAMES (uid and gid only) */
                struct {
                        DumpLimits limits;
                        uint32_t slot;
                        uint8_t make_room;      /* a user's dump: ask the agent for room before giving up */
                } stream;                       /* STREAM (fds: FIFO, file, dump_dir, control) */
                char runtime_dir[PATH_MAX];     /* CLEAN */
                struct {
                        DumpLimits limits;
                        uint32_t slot;
                        uint64_t max_bytes;
                } trace;                        /* TRACE (fds: the runtime's stream, file, dump_dir); GCDUMP
                                                 * (fds: the stream, the .gcdump file, dump_dir, control) */
                DumpLimits stacks;              /* STACKS (fds: the nettrace, the text file, dump_dir) */
                struct {
                        DumpLimits limits;
                        uint8_t have_thrown;
                        JobThrown thrown;       /* the exception that fired the table, seen by its watch */
                } exceptions;                   /* EXCEPTIONS (fds: the nettrace, the text file, dump_dir) */
                struct {
                        DumpLimits limits;
                        char providers[JOBS_COUNTERS_PROVIDERS_MAX]; /* as the runtime was asked */
                } counters;                     /* COUNTERS (fds: the nettrace, the CSV file, dump_dir) */
                struct {
                        uint32_t n;
                        int32_t pids[JOBS_FACTS_MAX];
                } facts_of;                     /* FACTS */
                uint64_t room;                  /* RETAIN (fd: the control socket) */
                struct {
                        CrashQuery query;
                        uint8_t with_store;     /* also look whether each one's core is stored */
                } crashes;                      /* CRASHES */
                struct {
                        CrashEntry entry;       /* the crash, as the agent decided on it */
                        DumpLimits limits;
                        uint32_t slot;
                        uint64_t max_bytes;
                } crash_copy;                   /* CRASH_COPY (fds: the file, dump_dir, control) */
        };
} JobRequest;

typedef struct JobReply {
        int32_t r;
        char why[256];
        union {
                TargetFacts facts;              /* SOCKET (fd: the socket) */
                struct {
                        TargetFacts facts;
                        AuditNames names;       /* ids (uint32_t) -1 when not asked */
                } open;                         /* OPEN (fds: pidfd, /proc fd, and the socket when found) */
                struct {
                        uint32_t n;             /* how many; the first JOBS_UNIT_PIDS_MAX are listed */
                        int32_t pids[JOBS_UNIT_PIDS_MAX];
                } unit;                         /* UNIT */
                struct {
                        char name[64];
                        char target_path[96];
                        char record_path[PATH_MAX];
                } stage;                        /* STAGE (fds: /tmp, the directory, the FIFO) */
                struct {
                        uint32_t n;
                        DiscoverCandidate found[DISCOVER_CANDIDATES_MAX];
                } candidates;                   /* CANDIDATES */
                AuditNames names;               /* NAMES */
                uint64_t bytes;                 /* STREAM */
                struct {
                        uint64_t bytes;
                        uint8_t ended;          /* the runtime ended the stream (else: max_bytes) */
                } trace;                        /* TRACE */
                struct {
                        uint64_t bytes;         /* of the .gcdump */
                        uint64_t stream_bytes;  /* of the session's stream */
                        uint8_t ended;          /* the runtime ended the stream (else: max_bytes) */
                        uint8_t dumped;         /* the dump's GC ended: the agent was told */
                } gcdump;                       /* GCDUMP */
                uint8_t holds;                  /* RECHECK: the details are what the facts say */
                struct {
                        uint32_t n;
                        JobProcessFacts facts[JOBS_FACTS_MAX];
                } facts_of;                     /* FACTS */
                RetentionPassResult retain;     /* RETAIN */
                struct {
                        uint32_t n;             /* entries packed (crash_entry_pack()), oldest first */
                        uint32_t untrusted;     /* entries with systemd-coredump's MESSAGE_ID that were not its */
                        uint8_t more;           /* the read stopped before the end: ask again after the cursor */
                        char cursor[CRASH_JOURNAL_CURSOR_MAX];
                        uint32_t size;
                        uint8_t packed[JOBS_CRASHES_PACKED_MAX];
                } crashes;                      /* CRASHES */
        };
} JobReply;

_Static_assert(sizeof(JobRequest) <= WORKER_MESSAGE_MAX && sizeof(JobReply) <= WORKER_MESSAGE_MAX,
               "a job's messages fit one worker message");

#define REPLY_HEAD offsetof(JobReply, facts)

static const Broker *broker;

void jobs_set_broker(const Broker *b) {
        broker = b;
}

/* ---- in the worker ---- */

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
 * A trace's stream, from the runtime's socket into the unnamed file, until
 * the runtime ends it or max_bytes is in. A socket cannot be spliced into a
 * file: its bytes go through a pipe, never through this process's memory.
 */
static size_t handle_trace(const JobRequest *q, const WorkerMessage *msg, JobReply *a) {
        _cleanup_close_ int pipe_read = -EBADF, pipe_write = -EBADF;
        const char *why = NULL;
        DumpWriter w = {};
        int fds[2], stream;

        if (msg->n_fds != 3 || q->trace.slot >= DUMP_SLOTS_MAX) {
                a->r = -EBADF;
                return REPLY_HEAD;
        }
        stream = msg->fds[0];
        if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
                a->r = -errno;
                return REPLY_HEAD;
        }
        pipe_read = fds[0];
        pipe_write = fds[1];
        (void)fcntl(pipe_write, F_SETPIPE_SZ, STREAM_PIPE_SIZE);
        a->r = dump_writer_init(&w, msg->fds[2], msg->fds[1], pipe_read, &q->trace.limits, broker->dump_slots,
                                q->trace.slot, NULL, &why);
        while (a->r == 0 && w.bytes < q->trace.max_bytes) {
                uint64_t left = q->trace.max_bytes - w.bytes;
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
                a->r = dump_writer_pump(&w, (uint64_t)n < left ? (uint64_t)n : left, &why);
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
 * A stacks or exceptions session's nettrace (a [[collect]] table's then.stacks, then.exceptions) as the
 * text dsctl stacks or dsctl exceptions prints, into the unnamed file: parsed here, never in the loop,
 * and at most MONITOR_VIEW_OUTPUT_MAX bytes of text; dump_dir's guards (max_use, keep_free) must leave
 * room for it. @thrown (may be NULL): an exception seen before the session, shown with its own.
 */
static size_t handle_view_text(MonitorViewKind kind, const DumpLimits *limits, const MonitorThrown *thrown,
                               const WorkerMessage *msg, JobReply *a) {
        MonitorView *v = NULL;
        char why[DUMP_SPACE_WHY_MAX] = "";
        uint64_t headroom = 0;
        struct stat st;
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
        if (a->r == 0 && fstat(msg->fds[1], &st) < 0)
                a->r = -errno;
        if (a->r == 0)
                a->r = dump_space_headroom(msg->fds[2], &limits->max_use, &limits->keep_free, 0, &headroom, why,
                                           sizeof(why));
        if (a->r == DUMP_PUBLISH_E_NO_SPACE || (a->r == 0 && (uint64_t)st.st_size > headroom))
                a->r = DUMP_WRITER_E_NO_SPACE;
        reply_why(a, a->r == DUMP_WRITER_E_NO_SPACE ? (why[0] ? why : "no room in dump_dir for the text") : NULL);
        a->bytes = a->r == 0 ? (uint64_t)st.st_size : 0;
        return REPLY_HEAD + sizeof(a->bytes);
}

static size_t handle_stacks(const JobRequest *q, const WorkerMessage *msg, JobReply *a) {
        return handle_view_text(MONITOR_VIEW_STACKS, &q->stacks, NULL, msg, a);
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
                a->r = DUMP_WRITER_E_NO_SPACE;
        reply_why(a, a->r == DUMP_WRITER_E_NO_SPACE ? (why[0] ? why : "no room in dump_dir for the counters") : NULL);
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
        a->r = crash_core_open(&q->crash_copy.entry, &core_fd, &st, &why);
        if (a->r == 0) {
                a->r = dump_writer_init(&w, msg->fds[1], msg->fds[0], -EBADF, &q->crash_copy.limits, broker->dump_slots,
                                        q->crash_copy.slot, NULL, &why);
                if (a->r == DUMP_WRITER_E_NO_SPACE) /* dump-writer.h's code, as crash-core.h says it */
                        a->r = CRASH_CORE_E_NO_SPACE;
        }
        if (a->r == 0)
                a->r = crash_core_copy(core_fd, (CrashCompression)q->crash_copy.entry.compression, &w,
                                       q->crash_copy.max_bytes, crash_copy_progress, &control, &why);
        a->r = crash_copy_code(a->r);
        reply_why(a, why);
        a->bytes = w.bytes;
        return REPLY_HEAD + sizeof(a->bytes);
}

int jobs_handle(WorkerMessage *msg, WorkerMessage *reply) {
        static JobRequest q;
        JobReply *a = (JobReply *)reply->data;
        bool paused;

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

/* ---- in the agent ---- */

/* A job's request goes on the heap: some are several KiB, and the pool copies it anyway. */
static JobRequest *request_new(JobType type) {
        JobRequest *q = calloc(1, sizeof(*q));
        if (q)
                q->type = type;
        return q;
}

static void requester_to(const Request *req, JobRequester *ret) {
        *ret = (JobRequester){ .uid = req->peer->uid, .gid = req->peer->gid };
        for (size_t i = 0; i < req->peer->n_groups && i < JOBS_GROUPS_MAX; i++)
                ret->groups[ret->n_groups++] = req->peer->groups[i];
}

static int error_of(int worker_error) {
        return worker_error == WORKER_E_TIMEOUT ? JOBS_E_TIMEOUT : JOBS_E_WORKER;
}

/* The reply, when it is one; else what went wrong, as the caller's code. */
static int reply_of(int error, const WorkerMessage *reply, size_t need, const JobReply **ret) {
        const JobReply *a;

        if (error != 0)
                return error_of(error);
        if (reply->size < REPLY_HEAD)
                return -EBADMSG;
        a = reply->data;
        if (a->r == 0 && reply->size < need)
                return -EBADMSG;
        *ret = a;
        return a->r;
}

/* What target.h's codes, which the jobs that open and look at a target end with, are to the callers of jobs.h. */
static int target_code(int r) {
        switch (r) {
        case TARGET_E_GONE: return JOBS_E_GONE;
        case TARGET_E_NO_SOCKET: return JOBS_E_NO_SOCKET;
        case TARGET_E_SOCKET_UNTRUSTED: return JOBS_E_SOCKET_UNTRUSTED;
        case TARGET_E_IMPOSTOR: return JOBS_E_IMPOSTOR;
        case TARGET_E_UNREACHABLE: return JOBS_E_UNREACHABLE;
        case TARGET_E_UNSAFE_FS: return JOBS_E_UNSAFE_FS;
        default: return r;
        }
}

/* What dump-stage.h's codes, which a staging job ends with, are to the callers of jobs.h. */
static int stage_code(int r) {
        switch (r) {
        case DUMP_STAGE_E_GONE: return JOBS_E_GONE;
        case DUMP_STAGE_E_UNSAFE_FS: return JOBS_E_UNSAFE_FS;
        case DUMP_STAGE_E_UNUSABLE: return JOBS_E_NO_STAGING;
        default: return r;
        }
}

/* What dump-writer.h's codes, which a dump's or a trace's stream ends with, are to the callers of jobs.h. */
static int writer_code(int r) {
        switch (r) {
        case DUMP_WRITER_E_NO_SPACE: return JOBS_E_NO_SPACE;
        case DUMP_WRITER_E_EMPTY: return JOBS_E_EMPTY;
        case DUMP_WRITER_E_NOT_CORE: return JOBS_E_NOT_CORE;
        default: return r;
        }
}

static const char *why_of(const JobReply *a) {
        return a && a->why[0] ? a->why : NULL;
}

/* Hands @q (and @fds) to a worker for @req; @done(..., @req) comes back through @trampoline. */
static int submit(Request *req, JobRequest *q, size_t size, const int *fds, size_t n_fds, uint64_t timeout_usec,
                  WorkerJobDone trampoline, void *callback) {
        /* the target's own fds live as long as the request, whose end cancels its job first */
        bool of_target = n_fds == 2 && req->target && fds[0] == req->target->pidfd && fds[1] == req->target->proc_fd;
        WorkerMessage m = { .data = q, .size = size, .n_fds = n_fds, .fds_borrowed = of_target };
        int r;

        if (n_fds > 0)
                memcpy(m.fds, fds, n_fds * sizeof(int));
        req->job_callback = callback;
        r = worker_pool_submit(req->broker->workers, req->peer->charged_uid, &m, timeout_usec, trampoline, req, &req->job);
        free(q);
        return r == WORKER_E_FULL ? JOBS_E_WORKER : r;
}

static uint64_t lookup_timeout(const Request *req) {
        return req->job_timeout_usec > 0 ? req->job_timeout_usec : req->broker->config.runtime_timeout_usec;
}

/*
 * The target a JOB_OPEN's reply describes, rebuilt on the fds it carries, with its runtime's socket
 * when the worker found it. Return: as reply_of(), or -EBADMSG.
 */
static int target_of_open_reply(int error, WorkerMessage *reply, const JobReply **ret_reply, Target **ret) {
        const JobReply *a = NULL;
        _cleanup_close_ int socket_fd = -EBADF;
        int r;

        r = target_code(reply_of(error, reply, REPLY_HEAD + sizeof(a->open), &a));
        *ret_reply = a;
        if (r == 0 && reply->n_fds != 2 && reply->n_fds != 3)
                r = -EBADMSG;
        if (r == 0) {
                socket_fd = reply->n_fds == 3 ? TAKE_FD(reply->fds[2]) : -EBADF;
                r = target_from_facts(&a->open.facts, reply->fds[0], reply->fds[1], ret);
                reply->n_fds = 0; /* taken */
        }
        if (r == 0)
                (*ret)->socket_path_fd = TAKE_FD(socket_fd);
        return r;
}

static void open_done(int error, WorkerMessage *reply, void *userdata) {
        Request *req = userdata;
        JobDone done = req->job_callback;
        const JobReply *a = NULL;
        Target *t;
        int r;

        req->job = NULL;
        r = target_of_open_reply(error, reply, &a, &t);
        if (a && reply->size >= REPLY_HEAD + sizeof(a->open))
                audit_names_remember(&a->open.names);
        if (r == 0)
                request_set_target(req, t);
        done(req, r, why_of(a));
}

int jobs_open_target(Request *req, pid_t pid, bool with_names, JobDone done) {
        JobRequest *q = request_new(JOB_OPEN);

        if (!q)
                return -ENOMEM;
        q->open.pid = pid;
        q->open.names = with_names;
        q->open.find_socket = with_names;
        requester_to(req, &q->open.who);
        /* the groups the requester has, not the room for JOBS_GROUPS_MAX: the worker zeroes the rest */
        return submit(req, q, offsetof(JobRequest, open.who.groups) + q->open.who.n_groups * sizeof(uint32_t), NULL,
                      0, lookup_timeout(req), open_done, done);
}

static void socket_done(int error, WorkerMessage *reply, void *userdata) {
        Request *req = userdata;
        JobDone done = req->job_callback;
        const JobReply *a = NULL;
        Target *t = req->target;
        int r;

        req->job = NULL;
        r = target_code(reply_of(error, reply, REPLY_HEAD + sizeof(a->facts), &a));
        if (r == 0 && reply->n_fds != 1)
                r = -EBADMSG;
        if (r == 0) {
                /* what the worker read of the environment, and the socket it found */
                t->environment_read = a->facts.environment_read;
                t->secure_exec = a->facts.secure_exec;
                t->startup_suspend = a->facts.startup_suspend;
                free(t->tmpdir);
                t->tmpdir = a->facts.tmpdir[0] ? strndup(a->facts.tmpdir, sizeof(a->facts.tmpdir)) : NULL;
                safe_close(t->socket_path_fd);
                t->socket_path_fd = reply->fds[0];
                reply->n_fds = 0;
        }
        done(req, r, why_of(a));
}

int jobs_find_socket(Request *req, JobDone done) {
        JobRequest *q;
        int fds[2];

        if (req->target->socket_path_fd >= 0) {
                done(req, 0, NULL);
                return 0;
        }
        q = request_new(JOB_SOCKET);
        if (!q)
                return -ENOMEM;
        target_facts_of(req->target, &q->facts);
        fds[0] = req->target->pidfd;
        fds[1] = req->target->proc_fd;
        return submit(req, q, offsetof(JobRequest, facts) + sizeof(q->facts), fds, 2, lookup_timeout(req),
                      socket_done, done);
}

static void recheck_done(int error, WorkerMessage *reply, void *userdata) {
        Request *req = userdata;
        JobDone done = req->job_callback;
        const JobReply *a = NULL;
        int r;

        req->job = NULL;
        r = target_code(reply_of(error, reply, REPLY_HEAD + sizeof(a->holds), &a));
        if (r == 0 && !a->holds)
                r = JOBS_E_CHANGED;
        done(req, r, why_of(a));
}

int jobs_recheck_target(Request *req, JobDone done) {
        JobRequest *q = request_new(JOB_RECHECK);
        int fds[2] = { req->target->pidfd, req->target->proc_fd };

        if (!q)
                return -ENOMEM;
        target_facts_of(req->target, &q->facts);
        return submit(req, q, offsetof(JobRequest, facts) + sizeof(q->facts), fds, 2, lookup_timeout(req),
                      recheck_done, done);
}

static void unit_done(int error, WorkerMessage *reply, void *userdata) {
        Request *req = userdata;
        JobUnitDone done = req->job_callback;
        const JobReply *a = NULL;
        pid_t pids[JOBS_UNIT_PIDS_MAX];
        size_t listed = 0;
        int r;

        req->job = NULL;
        r = reply_of(error, reply, REPLY_HEAD + sizeof(a->unit), &a);
        if (r == 0) {
                listed = a->unit.n < JOBS_UNIT_PIDS_MAX ? a->unit.n : JOBS_UNIT_PIDS_MAX;
                for (size_t i = 0; i < listed; i++)
                        pids[i] = a->unit.pids[i];
        }
        done(req, r, pids, listed, r == 0 ? a->unit.n : 0);
}

int jobs_find_unit(Request *req, const char *unit, JobUnitDone done) {
        JobRequest *q;

        if (strlen(unit) > TARGET_UNIT_MAX)
                return -ENAMETOOLONG;
        q = request_new(JOB_UNIT);
        if (!q)
                return -ENOMEM;
        memcpy(q->unit.unit, unit, strlen(unit) + 1);
        requester_to(req, &q->unit.who);
        return submit(req, q, offsetof(JobRequest, unit) + sizeof(q->unit), NULL, 0, lookup_timeout(req), unit_done,
                      done);
}

/* Hands @q (and @fds, duplicated) to a worker for the agent itself; @trampoline gets @call. */
static int submit_own(Broker *b, uint32_t owner, JobRequest *q, size_t size, const int *fds, size_t n_fds,
                      uint64_t timeout_usec, WorkerJobDone trampoline, void *callback, void *userdata, JobCall *call) {
        WorkerMessage m = { .data = q, .size = size, .n_fds = n_fds };
        int r;

        if (n_fds > 0)
                memcpy(m.fds, fds, n_fds * sizeof(int));
        *call = (JobCall){ .callback = callback, .userdata = userdata };
        r = worker_pool_submit(b->workers, owner, &m, timeout_usec, trampoline, call, &call->job);
        free(q);
        return r == WORKER_E_FULL ? JOBS_E_WORKER : r;
}

static void stage_done(int error, WorkerMessage *reply, void *userdata) {
        JobCall *call = userdata;
        JobStageDone done = call->callback;
        const JobReply *a = NULL;
        DumpStage *s = NULL;
        int r;

        call->job = NULL;
        r = reply_of(error, reply, REPLY_HEAD + sizeof(a->stage), &a);
        if (r == 0 && reply->n_fds != 3)
                r = -EBADMSG;
        if (r == 0) {
                r = dump_stage_adopt(a->stage.name, a->stage.target_path, a->stage.record_path, reply->fds[0],
                                     reply->fds[1], reply->fds[2], &s);
                reply->n_fds = 0;
        }
        done(call->userdata, stage_code(r), s, why_of(a));
}

int jobs_stage_dump(Broker *b, const Target *t, uint32_t owner, uint64_t timeout_usec, JobStageDone done,
                    void *userdata, JobCall *call) {
        JobRequest *q = request_new(JOB_STAGE);
        int fds[2] = { t->pidfd, t->proc_fd };

        if (!q)
                return -ENOMEM;
        target_facts_of(t, &q->stage.facts);
        snprintf(q->stage.runtime_dir, sizeof(q->stage.runtime_dir), "%s", b->config.runtime_dir);
        return submit_own(b, owner, q, offsetof(JobRequest, stage) + sizeof(q->stage), fds, 2, timeout_usec,
                          stage_done, done, userdata, call);
}

static void stream_done(int error, WorkerMessage *reply, void *userdata) {
        JobCall *call = userdata;
        JobStreamDone done = call->callback;
        const JobReply *a = NULL;
        int r;

        call->job = NULL;
        r = reply_of(error, reply, REPLY_HEAD + sizeof(a->bytes), &a);
        done(call->userdata, writer_code(r), a && reply->size >= REPLY_HEAD + sizeof(a->bytes) ? a->bytes : 0,
             why_of(a));
}

int jobs_stream_dump(Broker *b, uint32_t owner, int fifo_fd, int file_fd, int dir_fd, int control_fd,
                     const DumpLimits *limits, unsigned slot, bool make_room, JobStreamDone done, void *userdata,
                     JobCall *call) {
        JobRequest *q = request_new(JOB_STREAM);
        int fds[4] = { fifo_fd, file_fd, dir_fd, control_fd };

        if (!q)
                return -ENOMEM;
        q->stream.limits = *limits;
        q->stream.slot = slot;
        q->stream.make_room = make_room;
        return submit_own(b, owner, q, offsetof(JobRequest, stream) + sizeof(q->stream), fds, 4,
                          b->config.dump_timeout_usec + b->config.runtime_timeout_usec, stream_done, done, userdata,
                          call);
}

static void process_done(int error, WorkerMessage *reply, void *userdata) {
        JobCall *call = userdata;
        JobProcessDone done = call->callback;
        const JobReply *a;
        Target *t = NULL;
        int r;

        call->job = NULL;
        r = target_of_open_reply(error, reply, &a, &t);
        done(call->userdata, r, r == 0 ? t : NULL);
}

int jobs_open_process(Broker *b, pid_t pid, uint32_t owner, JobProcessDone done, void *userdata, JobCall *call) {
        JobRequest *q = request_new(JOB_OPEN);

        if (!q)
                return -ENOMEM;
        q->open.pid = pid;
        return submit_own(b, owner, q, offsetof(JobRequest, open) + sizeof(q->open), NULL, 0,
                          b->config.runtime_timeout_usec, process_done, done, userdata, call);
}

int jobs_open_runtime(Broker *b, pid_t pid, uint32_t owner, JobProcessDone done, void *userdata, JobCall *call) {
        JobRequest *q = request_new(JOB_OPEN);

        if (!q)
                return -ENOMEM;
        q->open.pid = pid;
        q->open.find_socket = true; /* asked as root (who is zeroed), who sees every process */
        return submit_own(b, owner, q, offsetof(JobRequest, open) + sizeof(q->open), NULL, 0,
                          b->config.runtime_timeout_usec, process_done, done, userdata, call);
}

static void trace_done(int error, WorkerMessage *reply, void *userdata) {
        JobCall *call = userdata;
        JobTraceDone done = call->callback;
        const JobReply *a = NULL;
        int r;

        call->job = NULL;
        r = reply_of(error, reply, REPLY_HEAD + sizeof(a->trace), &a);
        done(call->userdata, writer_code(r), a && reply->size >= REPLY_HEAD + sizeof(a->trace) && a->trace.ended,
             why_of(a));
}

int jobs_record_trace(Broker *b, uint32_t owner, int stream_fd, int file_fd, int dir_fd, const DumpLimits *limits,
                      unsigned slot, uint64_t max_bytes, uint64_t timeout_usec, JobTraceDone done, void *userdata,
                      JobCall *call) {
        JobRequest *q = request_new(JOB_TRACE);
        int fds[3] = { stream_fd, file_fd, dir_fd };

        if (!q)
                return -ENOMEM;
        q->trace.limits = *limits;
        q->trace.slot = slot;
        q->trace.max_bytes = max_bytes;
        return submit_own(b, owner, q, offsetof(JobRequest, trace) + sizeof(q->trace), fds, 3, timeout_usec,
                          trace_done, done, userdata, call);
}

static void stacks_done(int error, WorkerMessage *reply, void *userdata) {
        JobCall *call = userdata;
        JobStacksDone done = call->callback;
        const JobReply *a = NULL;
        int r;

        call->job = NULL;
        r = reply_of(error, reply, REPLY_HEAD + sizeof(a->bytes), &a);
        done(call->userdata, writer_code(r), r == 0 ? a->bytes : 0, why_of(a));
}

int jobs_stacks_text(Broker *b, uint32_t owner, int nettrace_fd, int text_fd, int dir_fd, const DumpLimits *limits,
                     JobStacksDone done, void *userdata, JobCall *call) {
        JobRequest *q = request_new(JOB_STACKS);
        int fds[3] = { nettrace_fd, text_fd, dir_fd };

        if (!q)
                return -ENOMEM;
        q->stacks = *limits;
        return submit_own(b, owner, q, offsetof(JobRequest, stacks) + sizeof(q->stacks), fds, 3,
                          b->config.reply_timeout_usec, stacks_done, done, userdata, call);
}

int jobs_exceptions_text(Broker *b, uint32_t owner, int nettrace_fd, int text_fd, int dir_fd, const DumpLimits *limits,
                         const MonitorThrown *thrown, JobStacksDone done, void *userdata, JobCall *call) {
        const char *type = thrown && thrown->x.type ? thrown->x.type : "";
        const char *message = thrown && thrown->x.message ? thrown->x.message : "";
        int fds[3] = { nettrace_fd, text_fd, dir_fd };
        JobRequest *q;

        if (strlen(type) >= JOBS_THROWN_TEXT_MAX || strlen(message) >= JOBS_THROWN_TEXT_MAX)
                return -E2BIG;
        q = request_new(JOB_EXCEPTIONS);
        if (!q)
                return -ENOMEM;
        q->exceptions.limits = *limits;
        if (thrown) {
                JobThrown *j = &q->exceptions.thrown;
                size_t depth = MIN(thrown->depth, (size_t)MONITOR_VIEW_FRAMES_MAX);

                q->exceptions.have_thrown = 1;
                *j = (JobThrown){ .ip = thrown->x.ip, .thread_id = thrown->thread_id, .timestamp = thrown->timestamp,
                                  .hresult = thrown->x.hresult, .flags = thrown->x.flags, .depth = (uint32_t)depth,
                                  .lost = (uint32_t)MIN(thrown->lost + thrown->depth - depth, (size_t)UINT32_MAX) };
                memcpy(j->frames, thrown->frames, depth * sizeof(uint64_t));
                strcpy(j->type, type);
                strcpy(j->message, message);
        }
        return submit_own(b, owner, q, offsetof(JobRequest, exceptions) + sizeof(q->exceptions), fds, 3,
                          b->config.reply_timeout_usec, stacks_done, done, userdata, call);
}

int jobs_counters_csv(Broker *b, uint32_t owner, int nettrace_fd, int csv_fd, int dir_fd, const DumpLimits *limits,
                      const char *providers, JobStacksDone done, void *userdata, JobCall *call) {
        JobRequest *q;
        int fds[3] = { nettrace_fd, csv_fd, dir_fd };

        if (strlen(providers) >= sizeof(q->counters.providers))
                return -E2BIG;
        q = request_new(JOB_COUNTERS);
        if (!q)
                return -ENOMEM;
        q->counters.limits = *limits;
        strcpy(q->counters.providers, providers);
        return submit_own(b, owner, q, offsetof(JobRequest, counters) + sizeof(q->counters), fds, 3,
                          b->config.reply_timeout_usec, stacks_done, done, userdata, call);
}

static void gcdump_done(int error, WorkerMessage *reply, void *userdata) {
        JobCall *call = userdata;
        JobGcdumpDone done = call->callback;
        const JobReply *a = NULL;
        JobGcdumpResult res = {};
        int r;

        call->job = NULL;
        r = reply_of(error, reply, REPLY_HEAD + sizeof(a->gcdump), &a);
        if (a && reply->size >= REPLY_HEAD + sizeof(a->gcdump))
                res = (JobGcdumpResult){ .bytes = r == 0 ? a->gcdump.bytes : 0,
                                         .stream_bytes = a->gcdump.stream_bytes,
                                         .ended = a->gcdump.ended,
                                         .dumped = a->gcdump.dumped };
        done(call->userdata, writer_code(r), &res, why_of(a));
}

int jobs_record_gcdump(Broker *b, uint32_t owner, int stream_fd, int file_fd, int dir_fd, int control_fd,
                       const DumpLimits *limits, unsigned slot, uint64_t max_bytes, uint64_t timeout_usec,
                       JobGcdumpDone done, void *userdata, JobCall *call) {
        JobRequest *q = request_new(JOB_GCDUMP);
        int fds[4] = { stream_fd, file_fd, dir_fd, control_fd };

        if (!q)
                return -ENOMEM;
        q->trace.limits = *limits;
        q->trace.slot = slot;
        q->trace.max_bytes = max_bytes;
        return submit_own(b, owner, q, offsetof(JobRequest, trace) + sizeof(q->trace), fds, 4, timeout_usec,
                          gcdump_done, done, userdata, call);
}

static void walk_done(int error, WorkerMessage *reply, void *userdata) {
        JobCall *call = userdata;
        JobWalkDone done = call->callback;
        const JobReply *a = NULL;
        size_t n = 0;
        int r;

        call->job = NULL;
        r = reply_of(error, reply, REPLY_HEAD + offsetof(typeof(a->candidates), found), &a);
        if (r == 0) {
                n = a->candidates.n;
                if (n > DISCOVER_CANDIDATES_MAX ||
                    reply->size < REPLY_HEAD + offsetof(typeof(a->candidates), found) + n * sizeof(DiscoverCandidate))
                        r = -EBADMSG;
        }
        done(call->userdata, r, r == 0 ? a->candidates.found : NULL, r == 0 ? n : 0);
}

int jobs_walk_candidates(Broker *b, const JobWalk *walk, uint32_t owner, JobWalkDone done, void *userdata,
                         JobCall *call) {
        JobRequest *q = request_new(JOB_CANDIDATES);

        if (!q)
                return -ENOMEM;
        q->walk.any_uid = walk->any_uid;
        q->walk.n_uids = (uint32_t)walk->n_uids;
        for (size_t i = 0; i < walk->n_uids && i < JOBS_WALK_UIDS_MAX; i++)
                q->walk.uids[i] = walk->uids[i];
        return submit_own(b, owner, q, offsetof(JobRequest, walk) + sizeof(q->walk), NULL, 0,
                          b->config.reply_timeout_usec, walk_done, done, userdata, call);
}

static void facts_done(int error, WorkerMessage *reply, void *userdata) {
        JobCall *call = userdata;
        JobFactsDone done = call->callback;
        const JobReply *a = NULL;
        size_t n = 0;
        int r;

        call->job = NULL;
        r = reply_of(error, reply, REPLY_HEAD + offsetof(typeof(a->facts_of), facts), &a);
        if (r == 0) {
                n = a->facts_of.n;
                if (n > JOBS_FACTS_MAX ||
                    reply->size < REPLY_HEAD + offsetof(typeof(a->facts_of), facts) + n * sizeof(JobProcessFacts))
                        r = -EBADMSG;
        }
        done(call->userdata, r, r == 0 ? a->facts_of.facts : NULL, r == 0 ? n : 0);
}

int jobs_process_facts(Broker *b, const pid_t *pids, size_t n, uint32_t owner, JobFactsDone done, void *userdata,
                       JobCall *call) {
        JobRequest *q;

        if (n == 0 || n > JOBS_FACTS_MAX)
                return -EINVAL;
        q = request_new(JOB_FACTS);
        if (!q)
                return -ENOMEM;
        q->facts_of.n = (uint32_t)n;
        for (size_t i = 0; i < n; i++)
                q->facts_of.pids[i] = pids[i];
        return submit_own(b, owner, q, offsetof(JobRequest, facts_of) + sizeof(q->facts_of), NULL, 0,
                          b->config.runtime_timeout_usec, facts_done, done, userdata, call);
}

static void names_done(int error, WorkerMessage *reply, void *userdata) {
        Request *req = userdata;
        JobDone done = req->job_callback;
        const JobReply *a = NULL;
        int r;

        req->job = NULL;
        r = reply_of(error, reply, REPLY_HEAD + sizeof(a->names), &a);
        if (r == 0)
                audit_names_remember(&a->names);
        done(req, r, NULL);
}

int jobs_resolve_names(Request *req, JobDone done) {
        JobRequest *q = request_new(JOB_NAMES);

        if (!q)
                return -ENOMEM;
        q->who = (JobRequester){ .uid = req->peer->uid, .gid = req->peer->gid };
        return submit(req, q, offsetof(JobRequest, who) + offsetof(JobRequester, groups), NULL, 0,
                      lookup_timeout(req), names_done, done);
}

static void retain_done(int error, WorkerMessage *reply, void *userdata) {
        JobCall *call = userdata;
        JobRetainDone done = call->callback;
        const JobReply *a = NULL;
        int r;

        call->job = NULL;
        r = reply_of(error, reply, REPLY_HEAD + sizeof(a->retain), &a);
        done(call->userdata, r, r == 0 ? &a->retain : NULL, why_of(a));
}

int jobs_retain(Broker *b, int control_fd, uint64_t room, JobRetainDone done, void *userdata, JobCall *call) {
        JobRequest *q = request_new(JOB_RETAIN);

        if (!q)
                return -ENOMEM;
        q->room = room;
        return submit_own(b, JOBS_RETENTION_OWNER, q, offsetof(JobRequest, room) + sizeof(q->room), &control_fd, 1,
                          JOBS_RETAIN_TIMEOUT_USEC, retain_done, done, userdata, call);
}

static void clean_done(int error, WorkerMessage *reply, void *userdata) {
        /* best effort: what is left is tried again at the next start */
}

int jobs_clean_stale(Broker *b) {
        WorkerMessage m;
        WorkerJob *job;
        JobRequest *q = request_new(JOB_CLEAN);
        int r;

        if (!q)
                return -ENOMEM;
        /* now, before the first request: what the worker cleans later is an earlier agent's alone */
        dump_stage_set_aside_stale(b->config.runtime_dir);
        snprintf(q->runtime_dir, sizeof(q->runtime_dir), "%s", b->config.runtime_dir);
        m = (WorkerMessage){ .data = q, .size = offsetof(JobRequest, runtime_dir) + sizeof(q->runtime_dir) };
        r = worker_pool_submit(b->workers, 0, &m, b->config.runtime_timeout_usec * 6, clean_done, NULL, &job);
        free(q);
        return r;
}

const char *jobs_trace_end(int r, bool ended, bool stop_sent) {
        if (r == JOBS_E_NO_SPACE)
                return "no-space";
        if (r == JOBS_E_TIMEOUT)
                return "timeout";
        if (r != 0)
                return "agent-error";
        if (!ended)
                return "size-limit";
        return stop_sent ? "duration" : "target-ended";
}

/* ---- crashes (agent/crashes/) ---- */

/* A JOB_CRASHES reply, checked: 0 with @ret, or as reply_of(), or -EBADMSG. */
static int crashes_result_of(int error, const WorkerMessage *reply, JobCrashesResult *ret) {
        const JobReply *a = NULL;
        int r;

        r = reply_of(error, reply, offsetof(JobReply, crashes.packed), &a);
        if (r == 0 && (a->crashes.size > sizeof(a->crashes.packed) ||
                       reply->size < offsetof(JobReply, crashes.packed) + a->crashes.size ||
                       memchr(a->crashes.cursor, '\0', sizeof(a->crashes.cursor)) == NULL))
                r = -EBADMSG;
        if (r == 0)
                *ret = (JobCrashesResult){ .packed = a->crashes.packed, .size = a->crashes.size, .n = a->crashes.n,
                                           .more = a->crashes.more, .cursor = a->crashes.cursor,
                                           .untrusted = a->crashes.untrusted };
        return r;
}

static void crashes_done(int error, WorkerMessage *reply, void *userdata) {
        Request *req = userdata;
        JobCrashesDone done = req->job_callback;
        JobCrashesResult res;
        int r;

        req->job = NULL;
        r = crashes_result_of(error, reply, &res);
        done(req, r, r == 0 ? &res : NULL);
}

static void crashes_own_done(int error, WorkerMessage *reply, void *userdata) {
        JobCall *call = userdata;
        JobCrashesOwnDone done = call->callback;
        JobCrashesResult res;
        int r;

        call->job = NULL;
        r = crashes_result_of(error, reply, &res);
        done(call->userdata, r, r == 0 ? &res : NULL);
}

int jobs_read_crashes_own(Broker *b, uint32_t owner, const CrashQuery *query, bool with_store, JobCrashesOwnDone done,
                          void *userdata, JobCall *call) {
        JobRequest *q = request_new(JOB_CRASHES);

        if (!q)
                return -ENOMEM;
        q->crashes.query = *query;
        q->crashes.with_store = with_store;
        return submit_own(b, owner, q, offsetof(JobRequest, crashes) + sizeof(q->crashes), NULL, 0,
                          b->config.reply_timeout_usec, crashes_own_done, done, userdata, call);
}

int jobs_read_crashes(Request *req, const CrashQuery *query, bool with_store, JobCrashesDone done) {
        JobRequest *q = request_new(JOB_CRASHES);

        if (!q)
                return -ENOMEM;
        q->crashes.query = *query;
        q->crashes.with_store = with_store;
        return submit(req, q, offsetof(JobRequest, crashes) + sizeof(q->crashes), NULL, 0,
                      req->broker->config.reply_timeout_usec, crashes_done, done);
}

static void crash_copy_done(int error, WorkerMessage *reply, void *userdata) {
        JobCall *call = userdata;
        JobStreamDone done = call->callback;
        const JobReply *a = NULL;
        int r;

        call->job = NULL;
        r = reply_of(error, reply, REPLY_HEAD + sizeof(a->bytes), &a);
        done(call->userdata, r, r == 0 ? a->bytes : 0, why_of(a));
}

int jobs_copy_crash(Broker *b, uint32_t owner, const CrashEntry *e, int file_fd, int dir_fd, int control_fd,
                    const DumpLimits *limits, unsigned slot, uint64_t max_bytes, JobStreamDone done, void *userdata,
                    JobCall *call) {
        JobRequest *q = request_new(JOB_CRASH_COPY);
        int fds[3] = { file_fd, dir_fd, control_fd };

        if (!q)
                return -ENOMEM;
        q->crash_copy.entry = *e;
        q->crash_copy.limits = *limits;
        q->crash_copy.slot = slot;
        q->crash_copy.max_bytes = max_bytes;
        return submit_own(b, owner, q, offsetof(JobRequest, crash_copy) + sizeof(q->crash_copy), fds, 3,
                          b->config.dump_timeout_usec, crash_copy_done, done, userdata, call);
}
