/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Taking a core dump into an unnamed file of dump_dir, for a client or a [[collect]] table (dump-take.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/loop/broker-state.h"
#include "common/cleanup.h"
#include "common/dotnet-ipc.h"
#include "agent/dumps/dump-publish.h"
#include "agent/dumps/dump-stage.h"
#include "agent/dumps/dump-take.h"
#include "agent/dumps/dump-writer.h"
#include "agent/workers/jobs.h"
#include "agent/ports/ports.h"
#include "agent/loop/request.h"
#include "agent/dumps/retention.h"
#include "agent/runtime/runtime-call.h"
#include "agent/targets/target.h"
#include "common/unaligned.h"
#include "agent/workers/worker-pool.h"

#define USEC_PER_SEC 1000000ULL

struct DumpTake {
        DumpTakeParams p;
        DumpTakeOps ops;
        void *userdata;
        JobCall job;            /* the staging, then the stream */
        RetentionWaiter *retention; /* the pass before the dump, or one making room for it */
        RuntimeCall *call;
        PortWaiter *port_waiter;
        DumpStage *stage;
        DotnetIpcCommand command;
        int dir_fd;             /* dump_dir */
        int file_fd;            /* the unnamed file the bytes go to */
        unsigned slot;          /* its bytes' slot (dump-writer.h) */
        bool have_slot;
        int control_fd;         /* our end of the stream's control socket */
        sd_event_source *control_source, *first_byte_timer, *pace_timer;
        uint64_t bytes;         /* as the stream last reported */
        uint64_t last_news_usec; /* when the stream last reported more bytes */
        uint64_t window_usec, window_bytes; /* the stretch the rate is measured over: its start, and bytes then */
        bool runtime_done, stream_done;
        uint64_t stream_bytes;
        /* the runtime failed; its words wait for the stream's end, whose own failure explains more */
        char *runtime_error;
        uint32_t runtime_hresult;
};

static uint64_t monotonic_usec(const DumpTake *t) {
        uint64_t now = 0;

        (void)sd_event_now(t->p.broker->event, CLOCK_MONOTONIC, &now);
        return now;
}

/* createdump's dump types, by the runtime's numbers */
static uint32_t runtime_dump_type(PolicyDumpType t) {
        switch (t) {
        case POLICY_DUMP_MINI: return 1;
        case POLICY_DUMP_HEAP: return 2;
        case POLICY_DUMP_TRIAGE: return 3;
        case POLICY_DUMP_FULL: return 4;
        default: return 0;
        }
}

/* Older runtimes answer newer GenerateCoreDump versions with "unknown command". */
static DotnetIpcCommand dump_fallback(DotnetIpcCommand command) {
        switch (command) {
        case DOTNET_IPC_GENERATE_CORE_DUMP3: return DOTNET_IPC_GENERATE_CORE_DUMP2;
        case DOTNET_IPC_GENERATE_CORE_DUMP2: return DOTNET_IPC_GENERATE_CORE_DUMP;
        default: return 0;
        }
}

/* Stops everything still going: the runtime call, the job (its worker is killed), the staging. */
static void take_stop(DumpTake *t) {
        t->call = runtime_call_free(t->call);
        if (t->job.job) {
                worker_job_cancel(t->job.job);
                t->job.job = NULL;
        }
        t->port_waiter = ports_waiter_cancel(t->port_waiter);
        t->retention = retention_waiter_cancel(t->retention);
        t->control_source = sd_event_source_disable_unref(t->control_source);
        t->first_byte_timer = sd_event_source_disable_unref(t->first_byte_timer);
        t->pace_timer = sd_event_source_disable_unref(t->pace_timer);
        t->control_fd = safe_close(t->control_fd);
        /* before any answer: when the caller hears back, the target's /tmp holds nothing of ours */
        t->stage = dump_stage_free(t->stage);
}

DumpTake *dump_take_free(DumpTake *t) {
        if (!t)
                return NULL;
        take_stop(t);
        safe_close(t->file_fd);
        safe_close(t->dir_fd);
        if (t->have_slot)
                dump_slots_release(t->p.broker->dump_slots, t->slot);
        free(t->runtime_error);
        free(t);
        return NULL;
}

/* The end: everything stops, and the caller is told. */
static void take_end(DumpTake *t, DumpTakeResult *res) {
        take_stop(t);
        res->dir_fd = res->failure == DUMP_TAKE_OK ? t->dir_fd : -EBADF;
        res->file_fd = res->failure == DUMP_TAKE_OK ? t->file_fd : -EBADF;
        t->ops.done(t->userdata, res);
}

static void take_fail(DumpTake *t, WireError error, const char *why) {
        take_end(t, &(DumpTakeResult){ .failure = DUMP_TAKE_FAILED, .error = error, .why = why });
}

/* The agent's own failure, @r a negative errno (anything else reads as EIO): the errno goes with it. */
static void take_fail_errno(DumpTake *t, int r, const char *why) {
        take_end(t, &(DumpTakeResult){ .failure = DUMP_TAKE_ERRNO, .r = r < 0 ? r : -EIO, .why = why });
}

/* @error as a module's code mapped it; an internal one keeps @r's errno. */
static void take_fail_mapped(DumpTake *t, WireError error, int r, const char *why) {
        if (error == WIRE_ERROR_INTERNAL)
                take_fail_errno(t, r, why);
        else
                take_fail(t, error, why);
}

/* What dump_file_check_core()'s codes mean to the client. */
static WireError writer_error(int r) {
        switch (r) {
        case DUMP_WRITER_E_NO_SPACE: return WIRE_ERROR_NO_SPACE;
        case DUMP_WRITER_E_EMPTY:
        case DUMP_WRITER_E_NOT_CORE: return WIRE_ERROR_RUNTIME_FAILED;
        default: return WIRE_ERROR_INTERNAL;
        }
}

/* What the end of the stream's job (jobs_stream_dump()) means to the client. */
static WireError stream_error(int r) {
        switch (r) {
        case JOBS_E_NO_SPACE: return WIRE_ERROR_NO_SPACE;
        case JOBS_E_EMPTY:
        case JOBS_E_NOT_CORE: return WIRE_ERROR_RUNTIME_FAILED;
        case JOBS_E_TIMEOUT: return WIRE_ERROR_RUNTIME_UNREACHABLE;
        case JOBS_E_WORKER: return WIRE_ERROR_BUSY;
        default: return WIRE_ERROR_INTERNAL;
        }
}

WireError dump_take_job_error(int r) {
        switch (r) {
        case JOBS_E_UNSAFE_FS: return WIRE_ERROR_UNSAFE_FS;
        case JOBS_E_NO_STAGING: return WIRE_ERROR_NO_STAGING;
        case JOBS_E_GONE: return WIRE_ERROR_NO_SUCH_PROCESS;
        case JOBS_E_TIMEOUT: return WIRE_ERROR_RUNTIME_UNREACHABLE;
        case JOBS_E_WORKER: return WIRE_ERROR_BUSY;
        default: return WIRE_ERROR_INTERNAL;
        }
}

/* Both the runtime's OK and the stream's end are in: check the file, and whose the memory is now. */
static void take_finish(DumpTake *t) {
        const char *why = NULL;
        bool changed = true;
        int r;

        take_stop(t);
        r = dump_file_check_core(t->file_fd, t->stream_bytes, &why);
        if (r != 0) {
                take_fail_mapped(t, writer_error(r), r, why ? why : "cannot write the dump");
                return;
        }
        r = target_changed_credentials(t->p.target, &changed);
        if (r == TARGET_E_GONE) {
                take_fail(t, WIRE_ERROR_NO_SUCH_PROCESS, "the process exited during the dump");
                return;
        }
        if (r != 0) {
                take_fail_errno(t, r, "cannot read the process's credentials to publish the dump");
                return;
        }
        take_end(t, &(DumpTakeResult){ .failure = DUMP_TAKE_OK, .bytes = t->stream_bytes, .changed = changed });
}

static void take_report_runtime_error(DumpTake *t) {
        take_end(t, &(DumpTakeResult){ .failure = DUMP_TAKE_RUNTIME, .hresult = t->runtime_hresult,
                                       .why = t->runtime_error ? t->runtime_error
                                                               : "the runtime could not write the dump" });
}

static void take_streamed(void *userdata, int r, uint64_t bytes, const char *why) {
        DumpTake *t = userdata;

        t->stream_done = true;
        t->stream_bytes = bytes;
        if (r == JOBS_E_TIMEOUT)
                why = "the dump was not written in time (--dump-timeout, and the runtime's timeout)";
        if (r != 0) {
                /* the guards are broken, or the disk is full: the stream closed the FIFO, createdump failed */
                take_fail_mapped(t, stream_error(r), r, why ? why : "cannot write the dump");
                return;
        }
        if (t->runtime_error)
                take_report_runtime_error(t);
        else if (t->runtime_done)
                take_finish(t);
}

/*
 * The runtime is done, one way or the other: the stream takes what is left
 * in the pipe and ends. A stream that is ending on its own already (it
 * closed its end) answers all the same, and one that never does meets its
 * job's deadline: either way its answer comes.
 */
static void take_end_stream(DumpTake *t) {
        (void)send(t->control_fd, &(char){ JOBS_STREAM_FINISH }, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/*
 * The pace, once the first byte is in: a runtime that writes no byte for
 * --dump-stall-timeout, or fewer than --dump-min-rate bytes a second over a
 * stretch of that length, has its dump cut. The stream reports at least
 * every second while bytes come (jobs.h), so a stall is seen within a second
 * of its deadline.
 */
static int take_on_pace(sd_event_source *source, uint64_t usec, void *userdata);

/* Return: 0, or a negative errno when the dump failed for it (the caller may have freed it). */
static int take_pace_arm(DumpTake *t) {
        const BrokerConfig *config = &t->p.broker->config;
        uint64_t stall = t->last_news_usec + config->dump_stall_timeout_usec,
                 window = t->window_usec + config->dump_stall_timeout_usec;
        int r;

        if (t->pace_timer) {
                /* a time source fires once: set again, it must be enabled again */
                r = sd_event_source_set_time(t->pace_timer, stall < window ? stall : window);
                if (r >= 0)
                        r = sd_event_source_set_enabled(t->pace_timer, SD_EVENT_ONESHOT);
        } else
                r = sd_event_add_time(t->p.broker->event, &t->pace_timer, CLOCK_MONOTONIC,
                                      stall < window ? stall : window, 0, take_on_pace, t);
        if (r < 0) {
                take_fail_errno(t, r, "cannot watch the dump's pace");
                return r;
        }
        return 0;
}

/* Whether @bytes in @usec make less than @rate bytes a second. */
static bool under_rate(uint64_t bytes, uint64_t usec, uint64_t rate) {
        return (unsigned __int128)bytes * USEC_PER_SEC < (unsigned __int128)rate * usec;
}

static int take_on_pace(sd_event_source *source, uint64_t usec, void *userdata) {
        DumpTake *t = userdata;
        const BrokerConfig *config = &t->p.broker->config;
        uint64_t now = monotonic_usec(t), stall = config->dump_stall_timeout_usec;
        char why[192];

        if (now >= t->last_news_usec + stall) {
                snprintf(why, sizeof(why),
                         "the runtime stopped writing the dump: no byte for %llu s (--dump-stall-timeout); it was cut",
                         (unsigned long long)(stall / USEC_PER_SEC));
                take_fail(t, WIRE_ERROR_RUNTIME_UNREACHABLE, why);
                return 0;
        }
        if (now >= t->window_usec + stall) {
                if (under_rate(t->bytes - t->window_bytes, now - t->window_usec, config->dump_min_rate)) {
                        snprintf(why, sizeof(why),
                                 "the runtime wrote the dump too slowly: %llu bytes in %llu s, under --dump-min-rate "
                                 "(%llu bytes a second); it was cut",
                                 (unsigned long long)(t->bytes - t->window_bytes),
                                 (unsigned long long)((now - t->window_usec) / USEC_PER_SEC),
                                 (unsigned long long)config->dump_min_rate);
                        take_fail(t, WIRE_ERROR_RUNTIME_UNREACHABLE, why);
                        return 0;
                }
                t->window_usec = now;
                t->window_bytes = t->bytes;
        }
        (void)take_pace_arm(t);
        return 0;
}

/* The runtime answered: what it wrote is in the pipe, and the stream only drains it. */
static void take_pace_stop(DumpTake *t) {
        t->pace_timer = sd_event_source_disable_unref(t->pace_timer);
}

/* The room asked for was made, or not: the stream is told, and its pace is watched again from now. */
static void take_room_made(void *userdata, int r, uint64_t removed, uint64_t room_left) {
        DumpTake *t = userdata;
        bool go_on = r == 0 && (removed > 0 || room_left == 0);

        t->retention = NULL;
        (void)send(t->control_fd, &(char){ go_on ? JOBS_STREAM_ROOM_MADE : JOBS_STREAM_NO_ROOM }, 1,
                   MSG_DONTWAIT | MSG_NOSIGNAL);
        t->last_news_usec = t->window_usec = monotonic_usec(t);
        t->window_bytes = t->bytes;
        if (t->bytes > 0 && !t->runtime_done && !t->runtime_error)
                (void)take_pace_arm(t);
}

/*
 * The stream would break the guards, and asks for @room more bytes: a user's dump has tables'
 * artifacts that yield to dumps removed for it (retention.h); anyone else's is told no at once.
 * While the pass runs the stream writes nothing, which is no stall of the runtime's.
 */
static void take_make_room(DumpTake *t, uint64_t room) {
        int r = -EPERM;

        if (t->p.make_room && !t->retention && t->p.broker->retention)
                r = retention_ask(t->p.broker->retention,
                                  &(RetentionAsk){ .room = room, .request_id = t->p.request_id,
                                                   .requester = t->p.requester },
                                  take_room_made, t, &t->retention);
        if (r < 0) {
                (void)send(t->control_fd, &(char){ JOBS_STREAM_NO_ROOM }, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
                return;
        }
        take_pace_stop(t);
}

/*
 * The stream's reports: how far it got, or that it needs room. The first one means the runtime is
 * writing, and starts the pace.
 */
static int take_on_control(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        DumpTake *t = userdata;
        DumpProgress p;
        bool news = false, first = t->bytes == 0;

        while (recv(fd, &p, sizeof(p), MSG_DONTWAIT) == sizeof(p)) {
                if (p.room > 0) {
                        take_make_room(t, p.room);
                        continue;
                }
                news = news || p.bytes > t->bytes;
                t->bytes = p.bytes;
                t->first_byte_timer = sd_event_source_disable_unref(t->first_byte_timer);
        }
        if (!news)
                return 0;
        t->last_news_usec = monotonic_usec(t);
        if (first) {
                t->window_usec = t->last_news_usec;
                t->window_bytes = t->bytes;
        }
        if (first && !t->runtime_done && !t->runtime_error && !t->retention && take_pace_arm(t) < 0)
                return 0;
        if (t->ops.progress)
                t->ops.progress(t->userdata, t->bytes);
        return 0;
}

static int take_on_first_byte_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        take_fail(userdata, WIRE_ERROR_RUNTIME_UNREACHABLE,
                  "the runtime wrote nothing of the dump in time (--dump-start-timeout); it was cancelled");
        return 0;
}

static void take_call(DumpTake *t, int fd);

static void take_port_connected(int fd, int error, void *userdata) {
        DumpTake *t = userdata;

        t->port_waiter = NULL;
        if (fd >= 0)
                take_call(t, fd);
        else if (error == -ETIMEDOUT)
                take_fail(t, WIRE_ERROR_RUNTIME_UNREACHABLE,
                          "the runtime did not connect to its diagnostic port again in time");
        else
                take_fail(t, WIRE_ERROR_NO_SUCH_PROCESS, REQUEST_NO_SUCH_PROCESS);
}

/* A connection for the dump's command: through the port the runtime connected in on, else its own socket. */
static void take_connect(DumpTake *t) {
        PortRuntime *rt = ports_find(t->p.broker->ports, t->p.target);
        const char *why = NULL;
        int fd = -EBADF, r;

        if (rt)
                r = ports_connect(rt, take_port_connected, t, &fd, &t->port_waiter);
        else
                r = target_connect(t->p.target, &fd, &why);
        if (r == PORTS_WAITING && rt)
                return;
        if (r < 0)
                take_fail_errno(t, r, "cannot connect to the runtime");
        else if (r != 0)
                take_end(t, &(DumpTakeResult){ .failure = DUMP_TAKE_TARGET, .r = r, .why = why });
        else
                take_call(t, fd);
}

static void take_call_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        DumpTake *t = userdata;
        _cleanup_free_ char *message = NULL, *reason = NULL;
        DotnetIpcCommand older;
        size_t used;

        if (error != 0) {
                char late[128];

                if (error == RUNTIME_CALL_E_TIMEOUT)
                        snprintf(late, sizeof(late), "the runtime did not finish the dump in time (--dump-timeout, %llu s)",
                                 (unsigned long long)(t->p.broker->config.dump_timeout_usec / USEC_PER_SEC));
                take_fail(t, WIRE_ERROR_RUNTIME_UNREACHABLE,
                          error == RUNTIME_CALL_E_TIMEOUT     ? late
                          : error == RUNTIME_CALL_E_MALFORMED ? "the runtime sent a malformed reply"
                                                              : "the runtime closed the connection");
                return;
        }
        older = dump_fallback(t->command);
        if (!reply->ok && reply->hresult == DOTNET_IPC_HR_UNKNOWN_COMMAND && older != 0) {
                t->call = runtime_call_free(t->call);
                t->command = older;
                take_connect(t);
                return;
        }
        if (!reply->ok) {
                /* GenerateCoreDump3 says why in createdump's words */
                if (t->command == DOTNET_IPC_GENERATE_CORE_DUMP3 && reply->payload_size > 0)
                        (void)dotnet_ipc_string_decode(reply->payload, reply->payload_size, &message, &used);
                if (asprintf(&reason, "the runtime could not write the dump%s%s", message ? ": " : "",
                             message ? message : "") < 0)
                        reason = NULL;
                t->runtime_error = reason ? TAKE_PTR(reason) : strdup("the runtime could not write the dump");
                t->runtime_hresult = reply->hresult;
                t->call = runtime_call_free(t->call);
                take_pace_stop(t);
                if (!t->runtime_error || t->stream_done)
                        take_report_runtime_error(t);
                else
                        take_end_stream(t); /* a full disk would explain the failure better: wait for it */
                return;
        }
        t->runtime_done = true;
        t->call = runtime_call_free(t->call);
        take_pace_stop(t);
        if (t->stream_done)
                take_finish(t);
        else
                take_end_stream(t); /* everything createdump wrote is in the pipe now */
}

static void take_call(DumpTake *t, int fd) {
        uint8_t payload[512], request[600];
        size_t n = 0, size;
        uint8_t fields[8];
        int r;

        unaligned_write_le32(fields, runtime_dump_type(t->p.type));
        unaligned_write_le32(fields + 4, 0); /* flags: no diagnostics, no crash report */
        r = dotnet_ipc_string_encode(t->stage->target_path, payload, sizeof(payload) - sizeof(fields), &n);
        if (r == 0) {
                memcpy(payload + n, fields, sizeof(fields));
                r = dotnet_ipc_request_encode(t->command, payload, n + sizeof(fields), request, sizeof(request), &size);
        }
        if (r == 0)
                r = runtime_call_start(t->p.broker->event, fd, request, size, t->p.broker->config.dump_timeout_usec,
                                       take_call_done, t, &t->call);
        else
                safe_close(fd);
        if (r != 0)
                take_fail_errno(t, r, "cannot start the dump");
}

/* dump_dir, the unnamed file, a slot for its bytes, and the stream's control socket. */
static int take_prepare_file(DumpTake *t, int *ret_control_theirs, const char **ret_why) {
        int sv[2], r;

        r = dump_dir_open(t->p.policy->agent.dump_dir, &t->dir_fd, ret_why);
        if (r != 0)
                return r;
        /* unnamed until complete: a failure or a full disk leaves nothing behind */
        t->file_fd = openat(t->dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (t->file_fd < 0)
                return -errno;
        r = dump_slots_claim(t->p.broker->dump_slots, &t->slot);
        if (r < 0)
                return r;
        t->have_slot = true;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        t->control_fd = sv[0];
        *ret_control_theirs = sv[1];
        return sd_event_add_io(t->p.broker->event, &t->control_source, t->control_fd, EPOLLIN, take_on_control, t);
}

static void take_staged(void *userdata, int r, DumpStage *stage, const char *why) {
        DumpTake *t = userdata;
        const PolicyAgentSettings *a = &t->p.policy->agent;
        DumpLimits limits = { .max_use = a->max_use, .keep_free = a->keep_free };
        _cleanup_close_ int control_theirs = -EBADF, fifo = -EBADF;
        const char *reason = NULL;

        if (r != 0) {
                take_fail_mapped(t, dump_take_job_error(r), r,
                                 why ? why : r == JOBS_E_GONE ? REQUEST_NO_SUCH_PROCESS : "cannot prepare the dump");
                return;
        }
        t->stage = stage;
        r = take_prepare_file(t, &control_theirs, &reason);
        if (r == 0) {
                /* the stream's worker holds the FIFO's read end from now on: when it stops, createdump does */
                fifo = dump_stage_take_fifo(stage);
                r = jobs_stream_dump(t->p.broker,
                                     &(JobDumpFile){ .owner = t->p.owner, .file_fd = t->file_fd, .dir_fd = t->dir_fd,
                                                     .control_fd = control_theirs, .limits = limits, .slot = t->slot },
                                     fifo, t->p.make_room, take_streamed, t, &t->job);
        }
        if (r != 0) {
                take_fail_errno(t, r, reason ? reason : "cannot prepare the dump");
                return;
        }
        r = sd_event_add_time(t->p.broker->event, &t->first_byte_timer, CLOCK_MONOTONIC,
                              monotonic_usec(t) + t->p.broker->config.dump_start_timeout_usec, 0,
                              take_on_first_byte_timeout, t);
        if (r < 0) {
                take_fail_errno(t, r, "cannot set the dump's deadlines");
                return;
        }
        take_connect(t);
}

static int take_stage(DumpTake *t) {
        return jobs_stage_dump(t->p.broker, t->p.target, t->p.owner, t->p.job_timeout_usec, take_staged, t, &t->job);
}

/* Retention has run over dump_dir (or could not: the dump is bound by the guards all the same). */
static void take_retained(void *userdata, int r, uint64_t removed, uint64_t room_left) {
        DumpTake *t = userdata;

        t->retention = NULL;
        r = take_stage(t);
        if (r != 0)
                take_fail_mapped(t, dump_take_job_error(r), r, "cannot prepare the dump");
}

int dump_take_start(const DumpTakeParams *p, const DumpTakeOps *ops, void *userdata, DumpTake **ret) {
        DumpTake *t = calloc(1, sizeof(DumpTake));
        int r;

        if (!t)
                return -ENOMEM;
        *t = (DumpTake){ .p = *p, .ops = *ops, .userdata = userdata, .command = DOTNET_IPC_GENERATE_CORE_DUMP3,
                         .dir_fd = -EBADF, .file_fd = -EBADF, .control_fd = -EBADF };
        /* what retention removes goes before the dump is taken: dump_dir is not kept full by what is due */
        r = p->broker->retention ? retention_ask(p->broker->retention, &(RetentionAsk){}, take_retained, t, &t->retention)
                                 : take_stage(t);
        if (r != 0) {
                dump_take_free(t);
                return r;
        }
        *ret = t;
        return 0;
}
