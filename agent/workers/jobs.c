/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The agent's side of the jobs (jobs.h): each jobs_*() function fills a JobRequest (jobs-wire.h) and
 * hands it to the worker pool; the callbacks here read the worker's JobReply, translate the codes of
 * the modules the worker called (target.h, dump-stage.h, dump-writer.h, crash-core.h) into JOBS_E_*,
 * and call the caller back from the loop. The worker's side is jobs-worker.c.
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>

#include "agent/loop/broker-state.h"
#include "common/cleanup.h"
#include "agent/crashes/crash-journal.h"
#include "agent/dumps/dump-stage.h"
#include "agent/dumps/dump-writer.h"
#include "agent/workers/jobs-wire.h"
#include "agent/workers/jobs.h"

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

int jobs_stream_dump(Broker *b, const JobDumpFile *file, int fifo_fd, bool make_room, JobStreamDone done,
                     void *userdata, JobCall *call) {
        JobRequest *q = request_new(JOB_STREAM);
        int fds[4] = { fifo_fd, file->file_fd, file->dir_fd, file->control_fd };

        if (!q)
                return -ENOMEM;
        q->stream.limits = file->limits;
        q->stream.slot = file->slot;
        q->stream.make_room = make_room;
        return submit_own(b, file->owner, q, offsetof(JobRequest, stream) + sizeof(q->stream), fds, 4,
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
        bool whole;
        int r;

        call->job = NULL;
        r = reply_of(error, reply, REPLY_HEAD + sizeof(a->trace), &a);
        whole = a && reply->size >= REPLY_HEAD + sizeof(a->trace);
        done(call->userdata, writer_code(r), whole && a->trace.ended, whole && a->trace.limited, why_of(a));
}

/* The request of a recording job, TRACE or GCDUMP, and its fds: the stream, the file, dump_dir, the control. */
static JobRequest *recording_request(JobType type, const JobRecording *rec, int fds[static 4]) {
        JobRequest *q;

        assert(rec->slot < DUMP_SLOTS_MAX && rec->stream_fd >= 0 && rec->file_fd >= 0 && rec->dir_fd >= 0);
        q = request_new(type);
        if (!q)
                return NULL;
        q->trace.limits = rec->limits;
        q->trace.slot = rec->slot;
        q->trace.max_bytes = rec->max_bytes;
        fds[0] = rec->stream_fd;
        fds[1] = rec->file_fd;
        fds[2] = rec->dir_fd;
        fds[3] = rec->control_fd;
        return q;
}

int jobs_record_trace(Broker *b, const JobRecording *rec, JobTraceDone done, void *userdata, JobCall *call) {
        int fds[4];
        JobRequest *q;

        assert(rec->control_fd >= 0); /* the worker tells the agent on it when max_bytes came */
        q = recording_request(JOB_TRACE, rec, fds);
        if (!q)
                return -ENOMEM;
        return submit_own(b, rec->owner, q, offsetof(JobRequest, trace) + sizeof(q->trace), fds, 4, rec->timeout_usec,
                          trace_done, done, userdata, call);
}

/* A job that wrote a file (STACKS, EXCEPTIONS, COUNTERS, FLAME, CRASH_COPY): its bytes, with its code (JobStacksDone and
 * JobStreamDone are one function type). */
static void bytes_done(int error, WorkerMessage *reply, void *userdata) {
        JobCall *call = userdata;
        JobStacksDone done = call->callback;
        const JobReply *a = NULL;
        int r;

        call->job = NULL;
        r = reply_of(error, reply, REPLY_HEAD + sizeof(a->bytes), &a);
        done(call->userdata, r, r == 0 ? a->bytes : 0, why_of(a));
}

/* The request of a rendering job, and its fds: the nettrace, the output, dump_dir. */
static JobRequest *rendering_request(JobType type, const JobRendering *job, int fds[static 3]) {
        JobRequest *q = request_new(type);

        fds[0] = job->nettrace_fd;
        fds[1] = job->out_fd;
        fds[2] = job->dir_fd;
        return q;
}

/* A rendering job that carries its limits alone (STACKS, FLAME). */
static int submit_rendering(Broker *b, JobType type, const JobRendering *job, JobStacksDone done, void *userdata,
                            JobCall *call) {
        int fds[3];
        JobRequest *q = rendering_request(type, job, fds);

        if (!q)
                return -ENOMEM;
        q->rendering = job->limits;
        return submit_own(b, job->owner, q, offsetof(JobRequest, rendering) + sizeof(q->rendering), fds, 3,
                          b->config.reply_timeout_usec, bytes_done, done, userdata, call);
}

int jobs_stacks_text(Broker *b, const JobRendering *job, JobStacksDone done, void *userdata, JobCall *call) {
        return submit_rendering(b, JOB_STACKS, job, done, userdata, call);
}

int jobs_flame_svg(Broker *b, const JobRendering *job, JobStacksDone done, void *userdata, JobCall *call) {
        return submit_rendering(b, JOB_FLAME, job, done, userdata, call);
}

int jobs_exceptions_text(Broker *b, const JobRendering *job, const MonitorThrown *thrown, JobStacksDone done,
                         void *userdata, JobCall *call) {
        const char *type = thrown && thrown->x.type ? thrown->x.type : "";
        const char *message = thrown && thrown->x.message ? thrown->x.message : "";
        int fds[3];
        JobRequest *q;

        if (strlen(type) >= JOBS_THROWN_TEXT_MAX || strlen(message) >= JOBS_THROWN_TEXT_MAX)
                return -E2BIG;
        q = rendering_request(JOB_EXCEPTIONS, job, fds);
        if (!q)
                return -ENOMEM;
        q->exceptions.limits = job->limits;
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
        return submit_own(b, job->owner, q, offsetof(JobRequest, exceptions) + sizeof(q->exceptions), fds, 3,
                          b->config.reply_timeout_usec, bytes_done, done, userdata, call);
}

int jobs_counters_csv(Broker *b, const JobRendering *job, const char *providers, JobStacksDone done, void *userdata,
                      JobCall *call) {
        JobRequest *q;
        int fds[3];

        if (strlen(providers) >= sizeof(q->counters.providers))
                return -E2BIG;
        q = rendering_request(JOB_COUNTERS, job, fds);
        if (!q)
                return -ENOMEM;
        q->counters.limits = job->limits;
        strcpy(q->counters.providers, providers);
        return submit_own(b, job->owner, q, offsetof(JobRequest, counters) + sizeof(q->counters), fds, 3,
                          b->config.reply_timeout_usec, bytes_done, done, userdata, call);
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

int jobs_record_gcdump(Broker *b, const JobRecording *rec, JobGcdumpDone done, void *userdata, JobCall *call) {
        int fds[4];
        JobRequest *q;

        assert(rec->control_fd >= 0); /* the worker tells the agent on it when the dump is whole */
        q = recording_request(JOB_GCDUMP, rec, fds);
        if (!q)
                return -ENOMEM;
        return submit_own(b, rec->owner, q, offsetof(JobRequest, trace) + sizeof(q->trace), fds, 4, rec->timeout_usec,
                          gcdump_done, done, userdata, call);
}

/*
 * A reply that lists entries (CANDIDATES, FACTS): its count, a uint32_t at @count_at, and the entries, of
 * @entry_size each, from @entries_at. Return: 0 with the entries and their count (at most @most), as
 * reply_of(), or -EBADMSG when the reply does not hold what it counts.
 */
static int listing_of(int error, const WorkerMessage *reply, size_t count_at, size_t entries_at, size_t entry_size,
                      size_t most, const void **ret_entries, size_t *ret_n) {
        const JobReply *a = NULL;
        uint32_t n;
        int r;

        r = reply_of(error, reply, entries_at, &a);
        if (r != 0)
                return r;
        memcpy(&n, (const uint8_t *)reply->data + count_at, sizeof(n));
        if (n > most || reply->size < entries_at + n * entry_size)
                return -EBADMSG;
        *ret_entries = (const uint8_t *)reply->data + entries_at;
        *ret_n = n;
        return 0;
}

static void walk_done(int error, WorkerMessage *reply, void *userdata) {
        JobCall *call = userdata;
        JobWalkDone done = call->callback;
        const void *found = NULL;
        size_t n = 0;
        int r;

        call->job = NULL;
        r = listing_of(error, reply, offsetof(JobReply, candidates.n), offsetof(JobReply, candidates.found),
                       sizeof(DiscoverCandidate), DISCOVER_CANDIDATES_MAX, &found, &n);
        done(call->userdata, r, found, n);
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
        const void *facts = NULL;
        size_t n = 0;
        int r;

        call->job = NULL;
        r = listing_of(error, reply, offsetof(JobReply, facts_of.n), offsetof(JobReply, facts_of.facts),
                       sizeof(JobProcessFacts), JOBS_FACTS_MAX, &facts, &n);
        done(call->userdata, r, facts, n);
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

const char *jobs_trace_end(int r, bool ended, bool limited, bool stop_sent) {
        if (r == JOBS_E_NO_SPACE)
                return "no-space";
        if (r == JOBS_E_TIMEOUT)
                return "timeout";
        if (r != 0)
                return "agent-error";
        if (limited && !ended)
                return "size-exceeded"; /* stopped at max_bytes, but its rundown went past the allowance */
        if (limited || !ended)
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

int jobs_copy_crash(Broker *b, const JobDumpFile *file, const CrashEntry *e, uint64_t max_bytes, JobStreamDone done,
                    void *userdata, JobCall *call) {
        JobRequest *q = request_new(JOB_CRASH_COPY);
        int fds[3] = { file->file_fd, file->dir_fd, file->control_fd };

        if (!q)
                return -ENOMEM;
        q->crash_copy.entry = *e;
        q->crash_copy.limits = file->limits;
        q->crash_copy.slot = file->slot;
        q->crash_copy.max_bytes = max_bytes;
        return submit_own(b, file->owner, q, offsetof(JobRequest, crash_copy) + sizeof(q->crash_copy), fds, 3,
                          b->config.dump_timeout_usec, bytes_done, done, userdata, call);
}
