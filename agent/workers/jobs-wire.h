/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What crosses between the agent and a worker for each job (jobs.h): the requests jobs.c sends and the
 * replies jobs-worker.c answers with, one worker message each (worker-pool.h), fds riding along as each
 * type says. Private to agent/workers/: both sides are built from the same binary, so the layout needs
 * no versioning, only bounds (the _Static_assert below).
 */
#pragma once

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/audit/audit.h"
#include "agent/crashes/crash-journal.h"
#include "agent/targets/discover.h"
#include "agent/dumps/dump-writer.h"
#include "agent/workers/jobs.h"
#include "eventpipe/monitor-view.h"
#include "eventpipe/nettrace.h"
#include "agent/dumps/retention-pass.h"
#include "agent/targets/target.h"
#include "agent/workers/worker-pool.h"

/* The supplementary groups a job carries for the requester; a user in more is decided without them
 * in listings (fail closed: fewer rules match). */
#define JOBS_GROUPS_MAX 1024

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
        JOB_FLAME,
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
                } trace;                        /* TRACE (fds: the runtime's stream, file, dump_dir, control);
                                                 * GCDUMP (fds: the stream, the .gcdump file, dump_dir, control) */
                DumpLimits rendering;           /* STACKS, FLAME (fds: the nettrace, the text or SVG file, dump_dir) */
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
                        uint8_t ended;          /* the runtime ended the stream (else: cut) */
                        uint8_t limited;        /* max_bytes came, and the agent was told (JOBS_TRACE_SIZE_LIMIT) */
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

/* A reply's head, its code and its why: what every reply holds; each type's body follows. */
#define REPLY_HEAD offsetof(JobReply, facts)
