/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the worker processes (worker-pool.h) do for the agent: everything
 * that reads another process's /proc files, looks something up in a
 * target's view of the file system, or moves a dump's bytes to disk. The
 * event loop asks through these functions and gets each answer as a
 * callback; no call here blocks it.
 *
 * Each request has at most one job at a time (Request.job); cancelling the
 * request's work cancels it, killing the worker if it runs.
 *
 * jobs.c is the loop's side (the requests sent, the replies read), jobs-worker.c
 * the worker's (jobs_handle()); jobs-wire.h is what crosses between them.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/crashes/crash-journal.h"
#include "agent/targets/discover.h"
#include "agent/dumps/dump-stage.h"
#include "agent/dumps/dump-writer.h"
#include "eventpipe/monitor-view.h"
#include "policy/policy.h"
#include "agent/targets/procfs.h"
#include "agent/dumps/retention-pass.h"
#include "agent/loop/request.h"
#include "agent/targets/target.h"
#include "agent/workers/worker-pool.h"

typedef struct Broker Broker;

/* The handler the workers run (WorkerPoolConfig.handler). */
int jobs_handle(WorkerMessage *request, WorkerMessage *reply);

/*
 * What workers read of the agent's memory, as it was when they were forked:
 * the policy (for ps and unit lookups) and the configuration. Set before the
 * pool forks any worker.
 */
void jobs_set_broker(const Broker *b);

/* A job's end: @r is 0, a JOBS_E_* code (a worker's failure, or what target.h's, dump-stage.h's
 * and dump-writer.h's codes mean, translated here), or a negative errno; @why explains positive
 * codes (NULL otherwise). */
typedef void (*JobDone)(Request *req, int r, const char *why);

enum {
        JOBS_E_TIMEOUT = 1000,  /* the worker did not finish in time and was killed */
        JOBS_E_WORKER,          /* the worker died, or no worker could take the job */
        JOBS_E_CHANGED,         /* jobs_recheck_target(): the details are no longer what req->target says */
        /* the target's (target.h) and the staging's (dump-stage.h) codes, jobs.c being their direct caller */
        JOBS_E_GONE,            /* the process is gone */
        JOBS_E_UNSAFE_FS,       /* its /tmp is on a file system the agent does not look into */
        JOBS_E_NO_SOCKET,       /* no diagnostic socket where its runtime would put one */
        JOBS_E_SOCKET_UNTRUSTED, /* something is there, but not its runtime's socket */
        JOBS_E_IMPOSTOR,        /* the listener behind the socket is not the process */
        JOBS_E_UNREACHABLE,     /* the socket refuses connections */
        JOBS_E_NO_STAGING,      /* no staging directory can be made in its view */
        /* the dump writer's (dump-writer.h) */
        JOBS_E_NO_SPACE,        /* dump_dir's guards would break, or its file system is full */
        JOBS_E_EMPTY,           /* the runtime wrote nothing */
        JOBS_E_NOT_CORE,        /* what it wrote is no whole core */
        JOBS_E_NO_HEAP,         /* jobs_record_gcdump(): the stream made no .gcdump (the why says what was wrong) */
        JOBS_E_NO_SAMPLES,      /* jobs_flame_svg(): the trace has no CPU samples to draw (the why says what) */
        /* a stored core's (crash-core.h) */
        JOBS_E_CRASH_GONE,      /* no core is stored for the crash any more */
        JOBS_E_CRASH_UNTRUSTED, /* what is stored is not the core systemd-coredump stored for it */
        JOBS_E_CRASH_CORRUPT,   /* it does not decompress */
        JOBS_E_CRASH_TOO_LARGE, /* it decompresses to more than the limit */
};

/*
 * Pins @pid and reads what the policy decides on, into req->target. @with_names: also the
 * names of the requester and of the target's user, for the audit record (AuditNames); a
 * listing's probes go without.
 */
int jobs_open_target(Request *req, pid_t pid, bool with_names, JobDone done);

/*
 * Reads again, through req->target's pinned fds, the details a worker read of it for an earlier
 * request (target_details_hold()): @r is JOBS_E_CHANGED when they are no longer what it says.
 */
int jobs_recheck_target(Request *req, JobDone done);

/* Looks up the names of the requester's user and group for its record (audit_names_remember()). */
int jobs_resolve_names(Request *req, JobDone done);

/* Reads req->target's environment and finds its runtime's socket (target_find_socket()). */
int jobs_find_socket(Request *req, JobDone done);

/*
 * The .NET processes of @unit that the requester may see: @n of them, the
 * first @n_listed (at most JOBS_UNIT_PIDS_MAX) in @pids.
 */
#define JOBS_UNIT_PIDS_MAX 16
typedef void (*JobUnitDone)(Request *req, int r, const pid_t *pids, size_t n_listed, size_t n);
int jobs_find_unit(Request *req, const char *unit, JobUnitDone done);



/* What a dump stream is told on its control socket: the runtime is done; room was made (try again), or not. */
#define JOBS_STREAM_FINISH 'F'
#define JOBS_STREAM_ROOM_MADE 'R'
#define JOBS_STREAM_NO_ROOM 'N'

/*
 * Jobs the agent runs for itself, with no request behind them (on-start.h), or for
 * a request without binding the job to it (dump-take.h).
 * The caller's JobCall holds the callback while the job runs; cancelling
 * it (worker_job_cancel(call->job)) means the callback is never called.
 */
typedef struct JobCall {
        WorkerJob *job;      /* NULL once done */
        void *callback;
        void *userdata;
} JobCall;

/*
 * Makes @t's dump staging (dump-stage.h): @done gets it (its own), or NULL with the reason. @owner
 * (a uid) is whose job it counts as; at most @timeout_usec.
 */
typedef void (*JobStageDone)(void *userdata, int r, DumpStage *stage, const char *why);
int jobs_stage_dump(Broker *b, const Target *t, uint32_t owner, uint64_t timeout_usec, JobStageDone done,
                    void *userdata, JobCall *call);

/* What a job that writes a dump into dump_dir is given (jobs_stream_dump(), jobs_copy_crash()); the worker
 * holds its own copies of the fds. */
typedef struct JobDumpFile {
        uint32_t owner;         /* whose job it counts as (a uid) */
        int file_fd;            /* an unnamed file of @dir_fd, written */
        int dir_fd;             /* dump_dir */
        int control_fd;         /* DumpProgress messages go out on it; closing the agent's end cancels the job */
        DumpLimits limits;      /* dump_dir's guards, counted in @slot (dump-writer.h) */
        unsigned slot;
} JobDumpFile;

/*
 * Moves a dump's bytes from @fifo_fd into @file's file, keeping its limits, until JOBS_STREAM_FINISH
 * arrives on its control_fd: then it drains the FIFO and ends, with the bytes written (a dump-take.h's,
 * for a client or a [[collect]] table). It sends DumpProgress messages on control_fd after the first
 * byte and then every second; closing the agent's end of control_fd ends it (-ECANCELED).
 */
typedef struct DumpProgress {
        uint64_t bytes;
        uint64_t room;          /* not 0: the guards would break, and the stream asks for this much room
                                 * (@make_room); it waits for JOBS_STREAM_ROOM_MADE or JOBS_STREAM_NO_ROOM */
} DumpProgress;
typedef void (*JobStreamDone)(void *userdata, int r, uint64_t bytes, const char *why);
int jobs_stream_dump(Broker *b, const JobDumpFile *file, int fifo_fd, bool make_room, JobStreamDone done,
                     void *userdata, JobCall *call);

/* @t is the process, pinned, with its details (target_read_details()); NULL with @r non-zero. */
typedef void (*JobProcessDone)(void *userdata, int r, Target *t);
/* Pins @pid and reads its details, as jobs_open_target() does for a request. @owner: whose job (a uid). */
int jobs_open_process(Broker *b, pid_t pid, uint32_t owner, JobProcessDone done, void *userdata, JobCall *call);
/* As jobs_open_process(), and finds its runtime's socket too (Target.socket_path_fd; -1 when not found). */
int jobs_open_runtime(Broker *b, pid_t pid, uint32_t owner, JobProcessDone done, void *userdata, JobCall *call);

/*
 * @r is 0, a JOBS_E_* code (JOBS_E_NO_SPACE: the guards, with @why) or a negative errno;
 * @ended: the runtime ended the stream (else it was cut); @limited: the stream reached max_bytes
 * and the agent was told (JOBS_TRACE_SIZE_LIMIT). The file's size says what was written,
 * whatever @r is.
 */
typedef void (*JobTraceDone)(void *userdata, int r, bool ended, bool limited, const char *why);
/*
 * jobs_trace_end() - how a recorded trace's session ended, for its end record, from a
 * JobTraceDone's @r, @ended and @limited and whether the agent sent StopTracing (@stop_sent):
 * "no-space", "timeout", "agent-error", "size-limit" (stopped at max_bytes, or cut there),
 * "size-exceeded" (the rundown went past its allowance: cut), "duration" or "target-ended".
 */
const char *jobs_trace_end(int r, bool ended, bool limited, bool stop_sent);
/* What a recording job is given (jobs_record_trace(), jobs_record_gcdump()); the worker holds its own copies of the fds. */
typedef struct JobRecording {
        uint32_t owner;         /* whose job it counts as (a uid) */
        int stream_fd;          /* the runtime's connection, after its CollectTracing reply */
        int file_fd;            /* an unnamed file of @dir_fd, written */
        int dir_fd;             /* dump_dir */
        int control_fd;         /* one end of a SOCK_SEQPACKET pair: the worker tells the agent on it */
        DumpLimits limits;      /* dump_dir's guards, counted in @slot (dump-writer.h) */
        unsigned slot;
        uint64_t max_bytes;     /* of the stream */
        uint64_t timeout_usec;
} JobRecording;
/* What a trace's worker tells the agent on its control socket: max_bytes of the stream are in, and
 * the agent is to stop the session (StopTracing) so that the runtime writes its rundown. */
#define JOBS_TRACE_SIZE_LIMIT 'L'
/*
 * jobs_record_trace() - move a trace's stream into @rec's file
 *
 * From the stream until the runtime ends it, or dump_dir's limits would break; at most
 * timeout_usec. Once max_bytes are in, the worker sends JOBS_TRACE_SIZE_LIMIT on control_fd and
 * goes on reading up to EVENTPIPE_RUNDOWN_BYTES_MAX more, the runtime's closing rundown, as a
 * client's session stopped at its size gets (session.c); past that the stream is cut. A control
 * socket that takes no message cuts it at max_bytes.
 */
int jobs_record_trace(Broker *b, const JobRecording *rec, JobTraceDone done, void *userdata, JobCall *call);

/* What a job that renders a session's nettrace is given (jobs_stacks_text(), jobs_exceptions_text(),
 * jobs_counters_csv(), jobs_flame_svg()). */
typedef struct JobRendering {
        uint32_t owner;         /* whose job it counts as (a uid) */
        int nettrace_fd;        /* the session's nettrace, read from its start */
        int out_fd;             /* an unnamed file of @dir_fd: the text, the CSV or the SVG */
        int dir_fd;             /* dump_dir */
        DumpLimits limits;      /* what the output must fit within */
} JobRendering;

/* @bytes of text were written, with @r 0; else a JOBS_E_* code (JOBS_E_NO_SPACE with @why) or a negative errno. */
typedef void (*JobStacksDone)(void *userdata, int r, uint64_t bytes, const char *why);
/*
 * jobs_stacks_text() - the text dsctl stacks prints of the stacks session recorded in @job's nettrace
 *
 * Written into its out_fd by a worker (eventpipe/monitor-view.h); the text must fit within dump_dir's
 * limits. At most the reply's deadline.
 */
int jobs_stacks_text(Broker *b, const JobRendering *job, JobStacksDone done, void *userdata, JobCall *call);

/*
 * jobs_exceptions_text() - the text dsctl exceptions prints of the exceptions session recorded in @job's nettrace
 *
 * With @thrown (may be NULL), the exception that fired the table, which its watch saw before the session
 * began: shown among the session's, its frames named by the session's rundown (monitor_view_thrown()).
 * Otherwise as jobs_stacks_text(). Return: 0, -E2BIG (@thrown's type or message longer than a job carries:
 * never, for what the parser gives), or as submitting any job.
 */
int jobs_exceptions_text(Broker *b, const JobRendering *job, const MonitorThrown *thrown, JobStacksDone done,
                         void *userdata, JobCall *call);

/*
 * jobs_flame_svg() - the flame graph dsctl convert --format flame writes of the CPU trace in @job's nettrace
 *
 * Written into its out_fd by a worker with dsctl's own converter (eventpipe/trace-convert.h), so that it is the
 * very file dsctl writes of the same trace; it must fit within dump_dir's limits. @done as jobs_stacks_text()'s,
 * JOBS_E_NO_SAMPLES (with @why) when the trace has no CPU samples to draw, or is no nettrace stream. At most the
 * reply's deadline.
 */
int jobs_flame_svg(Broker *b, const JobRendering *job, JobStacksDone done, void *userdata, JobCall *call);

/* Bytes of a counters session's providers text (eventpipe_config_to_string()) a job carries. */
#define JOBS_COUNTERS_PROVIDERS_MAX 8192
/*
 * jobs_counters_csv() - the CSV dsctl counters --format csv prints of the counters session recorded in @job's nettrace
 *
 * @providers: the session's, as the runtime was asked (its SessionId and interval say which samples
 * are its own). Written into its out_fd by a worker (eventpipe/counter-rows.h, each sample at the
 * time the stream gives it); the CSV must fit within dump_dir's limits. @done as jobs_stacks_text()'s.
 * At most the reply's deadline. Return: 0, -E2BIG (@providers longer than JOBS_COUNTERS_PROVIDERS_MAX),
 * or as submitting any job.
 */
int jobs_counters_csv(Broker *b, const JobRendering *job, const char *providers, JobStacksDone done, void *userdata,
                      JobCall *call);

/* The memory a heap dump's worker may take for it, over what it held before (its RLIMIT_DATA while the job
 * runs): the stream is the target's, and the heap's own limits let a crafted one take hundreds of MiB;
 * COLLECT_TRACES_MAX of them may run at once. */
#define JOBS_GCDUMP_DATA_MAX_MIB 256
#define JOBS_GCDUMP_DATA_MAX ((uint64_t)JOBS_GCDUMP_DATA_MAX_MIB << 20)

/* What a heap dump's worker tells the agent on its control socket: the dump's GC has ended, and only
 * the rundown that names the types' modules is still wanted (the agent sends StopTracing). */
#define JOBS_GCDUMP_DUMPED 'D'

typedef struct JobGcdumpResult {
        uint64_t bytes;         /* of the .gcdump (0 unless @r is 0) */
        uint64_t stream_bytes;  /* of the session's stream */
        bool ended;             /* the runtime ended the stream (else it was cut at max_bytes) */
        bool dumped;            /* the dump's GC ended within the stream */
} JobGcdumpResult;
/* @r is 0, a JOBS_E_* code (JOBS_E_NO_SPACE, JOBS_E_NO_HEAP: with @why) or a negative errno. */
typedef void (*JobGcdumpDone)(void *userdata, int r, const JobGcdumpResult *res, const char *why);
/*
 * jobs_record_gcdump() - the .gcdump of a gcdump session (monitor_gcdump_config()), made by a worker
 *
 * The worker reads @rec's stream until the runtime ends it or max_bytes came, and parses it as dsctl
 * gcdump does (eventpipe/gcdump-heap.h); once the dump's GC has ended it sends JOBS_GCDUMP_DUMPED on
 * control_fd (one end of a SOCK_SEQPACKET pair), closing the other end cancels it. Then it writes the
 * .gcdump into the file, within dump_dir's limits. At most timeout_usec.
 */
int jobs_record_gcdump(Broker *b, const JobRecording *rec, JobGcdumpDone done, void *userdata, JobCall *call);

/*
 * The facts of a process that can be read without its memory or its file system: no command line, no
 * executable, no environment, no socket. What the [[collect]] watcher decides coverage on first
 * (collect.h), for many processes a job.
 */
#define JOBS_FACTS_MAX 64
typedef struct JobProcessFacts {
        int32_t pid;
        uint8_t alive;            /* else it is gone, and the rest is empty */
        uint8_t cgroup_vouched;   /* root vouches for its cgroup (Target.cgroup_vouched) */
        uint64_t start_time;
        uint32_t euid;
        uint32_t charged_uid;     /* whom work on it is charged to (userns_charged_uid()), else USERNS_CHARGE_UNKNOWN */
        char unit[TARGET_UNIT_MAX + 1];               /* "" when none */
        char container_id[PROC_CONTAINER_ID_LEN + 1]; /* "" when none */
        char cgroup[PROC_CGROUP_PATH_MAX + 1];        /* "" when none, or too long */
} JobProcessFacts;
/* @facts (@n of them, in the order asked) are the processes' facts; NULL with @r non-zero (as JobDone's). */
typedef void (*JobFactsDone)(void *userdata, int r, const JobProcessFacts *facts, size_t n);
/*
 * jobs_process_facts() - the facts of @n (1 to JOBS_FACTS_MAX) processes, in a worker
 *
 * Each is pinned (target_open()), its status, stat and cgroup read (target_read_cgroup()) and its
 * user namespace's owner asked: small reads of /proc and nsfs ioctls, none of which waits on the
 * process. @owner (a uid) is whose job it counts as. At most runtime_timeout.
 */
int jobs_process_facts(Broker *b, const pid_t *pids, size_t n, uint32_t owner, JobFactsDone done, void *userdata,
                       JobCall *call);

/* A walk's filter holds this many users at most; more, and it is anybody's. */
#define JOBS_WALK_UIDS_MAX 256

/* What one walk of /proc looks for: the processes this filter passes (discover.h). */
typedef struct JobWalk {
        bool any_uid;
        size_t n_uids;
        uid_t uids[JOBS_WALK_UIDS_MAX];
} JobWalk;

/* @found (@n of them) are the candidates, with their /proc owners; NULL with @r non-zero (as JobDone's). */
typedef void (*JobWalkDone)(void *userdata, int r, const DiscoverCandidate *found, size_t n);
/*
 * jobs_walk_candidates() - the processes that may run a runtime (discover_candidates()), in a worker
 *
 * For the listings that share the walk; @owner (a uid) is whose job it counts as. At most the
 * reply's deadline. The worker lowers its priority while it walks.
 */
int jobs_walk_candidates(Broker *b, const JobWalk *walk, uint32_t owner, JobWalkDone done, void *userdata,
                         JobCall *call);

/* The worker pool counts jobs by owner: retention's passes are their own, apart from every user's and the
 * agent's other jobs (on-start.c's -2, collect.c's -3 and -4). */
#define JOBS_RETENTION_OWNER ((uint32_t)-5)
/* A pass lists dump_dir and removes at most RETENTION_PASS_REMOVALS_MAX files, each after an answer of the
 * loop's: well within this, unless the file system hangs, which then costs that worker alone. */
#define JOBS_RETAIN_TIMEOUT_USEC (120 * 1000000ULL)

/* @res is the pass's with @r 0; else NULL, with a JOBS_E_* code or a negative errno (and @why). */
typedef void (*JobRetainDone)(void *userdata, int r, const RetentionPassResult *res, const char *why);
/*
 * jobs_retain() - a retention pass over dump_dir (retention-pass.h), by a worker
 *
 * Under the policy the worker was forked with (a reload replaces idle workers at once). Before each
 * removal the worker sends a RetentionNote on @control_fd (one end of a SOCK_SEQPACKET pair, the
 * worker gets a copy) and waits for the agent's RETENTION_GO; @room: bytes a user's dump needs.
 */
int jobs_retain(Broker *b, int control_fd, uint64_t room, JobRetainDone done, void *userdata, JobCall *call);

/* The packed crashes (crash_entry_pack()) of a JOB_CRASHES reply: the worker's journal read, oldest first. */
#define JOBS_CRASHES_PACKED_MAX (48 * 1024)
typedef struct JobCrashesResult {
        const uint8_t *packed;
        size_t size;
        unsigned n;
        bool more;              /* there may be more after @cursor */
        const char *cursor;
        unsigned untrusted;     /* entries with systemd-coredump's MESSAGE_ID that were not its */
} JobCrashesResult;
/* @res is NULL when @r is not 0 (a JOBS_E_* code or a negative errno). */
typedef void (*JobCrashesDone)(Request *req, int r, const JobCrashesResult *res);
/*
 * jobs_read_crashes() - the trusted crashes @query asks for (crash-journal.h), read by a worker for @req
 *
 * @with_store: also whether each one's core is still stored, and its size (crash_core_open()). As many as fit
 * one reply; res->more says to ask again after res->cursor. At most the reply's deadline.
 */
int jobs_read_crashes(Request *req, const CrashQuery *query, bool with_store, JobCrashesDone done);
/* As jobs_read_crashes(), for the agent itself (crash-collect.h): @owner's job, @done gets @userdata. */
typedef void (*JobCrashesOwnDone)(void *userdata, int r, const JobCrashesResult *res);
int jobs_read_crashes_own(Broker *b, uint32_t owner, const CrashQuery *query, bool with_store, JobCrashesOwnDone done,
                          void *userdata, JobCall *call);
/*
 * jobs_copy_crash() - the stored core of @e, checked and decompressed into @file's file within its limits
 * and @max_bytes (crash-core.h)
 *
 * DumpProgress messages go to its control_fd about every second; @done gets 0 with the bytes, or a JOBS_E_*
 * code (JOBS_E_CRASH_*, JOBS_E_NO_SPACE, JOBS_E_NOT_CORE, with @why) or a negative errno. At most the
 * agent's --dump-timeout.
 */
int jobs_copy_crash(Broker *b, const JobDumpFile *file, const CrashEntry *e, uint64_t max_bytes, JobStreamDone done,
                    void *userdata, JobCall *call);

/* Removes the staging of an agent that died (dump_stage_clean_stale()), in the background. */
int jobs_clean_stale(Broker *b);
