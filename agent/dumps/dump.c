/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The dump command (dump.h): stages, asks the runtime, writes and publishes a core dump for exactly
 * its readers; commands.c and proxy.c start it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "acl.h"
#include "broker-state.h"
#include "cleanup.h"
#include "command-steps.h"
#include "connection.h"
#include "decision.h"
#include "dotnet-ipc.h"
#include "dump-publish.h"
#include "dump-stage.h"
#include "dump-writer.h"
#include "dump.h"
#include "ports.h"
#include "jobs.h"
#include "runtime-call.h"
#include "startup.h"
#include "test-hooks.h"
#include "text.h"
#include "unaligned.h"

#define USEC_PER_SEC 1000000ULL
/* After the runtime's deadline, the time to check, label, publish and hand over a dump. */
#define DUMP_HAND_OVER_USEC (30 * USEC_PER_SEC)

/*
 * A dump, step by step: decided; the runtime's socket found (a worker); a
 * runtime suspended at startup refused, but for a full dump (startup.h); the
 * staging directory and its FIFO made in the target's /tmp (a worker); the
 * bytes moved from the FIFO into an unnamed file of dump_dir (a worker, for
 * as long as the dump takes); the runtime asked. When the runtime says OK,
 * the stream is told to finish, the file is checked, labelled and named.
 * The client's hang-up cancels it all; so does a runtime that sends no byte
 * within the first-byte deadline, and, after it, one that stalls or writes
 * slower than the minimum rate (the pace: a trickle would hold the slot until
 * --dump-timeout).
 */
typedef struct DumpWork {
        Request *request;
        RuntimeCall *call;
        DumpStage *stage;
        DotnetIpcCommand command;
        uint64_t started_usec;
        bool want_fd;
        bool claimed;           /* holds one of the dump slots (admission.h) */
        AdmissionKey key;
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
} DumpWork;

static void dump_work_free(void *p) {
        DumpWork *work = p;

        if (!work)
                return;
        runtime_call_free(work->call);
        sd_event_source_disable_unref(work->control_source);
        sd_event_source_disable_unref(work->first_byte_timer);
        sd_event_source_disable_unref(work->pace_timer);
        safe_close(work->control_fd);
        dump_stage_free(work->stage);
        safe_close(work->file_fd);
        safe_close(work->dir_fd);
        if (work->have_slot)
                dump_slots_release(work->request->broker->dump_slots, work->slot);
        if (work->claimed)
                admission_end(work->request->broker->admission, ADMISSION_DUMP, &work->key);
        free(work->runtime_error);
        free(work);
}

static uint64_t monotonic_usec(const Request *req) {
        uint64_t now = 0;

        (void)sd_event_now(req->broker->event, CLOCK_MONOTONIC, &now);
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

/* The name is the agent's: nothing of it is taken from a client, and the target's part is sanitized. */
static void dump_file_name(const Request *req, char *buf, size_t size) {
        char name[33], stamp[32];
        struct tm tm;
        time_t now = time(NULL);

        dump_name_part(req->target->name, name, sizeof(name));
        gmtime_r(&now, &tm);
        strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
        snprintf(buf, size, "dump.%s.%d.%s.%s.%016" PRIx64, name, (int)req->target->pid,
                 policy_dump_type_to_string(req->ask.dump_type), stamp, req->id);
}

/* Who may read it: the requester and the rule's readers, unless the process's memory is root's alone. */
static void dump_readers(const Request *req, bool readable, uid_t *users, size_t *n_users, AclGrant *g) {
        const PolicyRule *rule = req->verdict.rule;

        *n_users = 0;
        *g = (AclGrant){};
        if (!readable)
                return;
        if (req->peer->uid != 0)
                users[(*n_users)++] = req->peer->uid;
        g->users = users;
        g->n_users = *n_users;
        if (rule) {
                for (size_t i = 0; i < rule->reader_users.n && *n_users < 64; i++)
                        if (rule->reader_users.ids[i] != req->peer->uid && rule->reader_users.ids[i] != 0)
                                users[(*n_users)++] = rule->reader_users.ids[i];
                g->n_users = *n_users;
                g->groups = rule->reader_groups.ids;
                g->n_groups = rule->reader_groups.n;
        }
}

static int open_published(int dir_fd, const char *name) {
        return openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
}

/* The client's end of the socket is closed (or shut for writing, which dsctl never does during a dump). */
static bool client_gone(const Request *req) {
        struct pollfd p = { .fd = req->connection->fd, .events = POLLRDHUP };

        return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/*
 * Sends the DUMP frame now, with its fd when the requester asked and may
 * read it. A client that is reading gets it at once; one that is not reading
 * just now gets it queued; one that is gone makes this fail.
 *
 * Return: 0, -EPIPE, -ECONNRESET or -ENOTCONN when the client is gone, or
 * another negative errno.
 */
static int dump_hand_over(DumpWork *work, WireWriter *w, const char *name, bool readable) {
        Connection *c = work->request->connection;
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (work->want_fd && readable) {
                fd = open_published(work->dir_fd, name);
                if (fd < 0)
                        return -errno;
        }
        r = connection_send_frame_now(c, w, fd); /* -EAGAIN: not now, behind what is queued or for room */
        if (r != -EAGAIN)
                return r;
        return fd >= 0 ? connection_queue_frame_with_fd(c, w, TAKE_FD(fd)) : connection_queue_frame(c, w);
}

static void dump_reply_frame(WireWriter *w, const Request *req, const char *path, uint64_t size, bool readable) {
        struct timespec now;

        (void)clock_gettime(CLOCK_REALTIME, &now);
        wire_writer_begin(w, WIRE_REPLY_DUMP);
        wire_writer_put_string(w, WIRE_TAG_PATH, path);
        wire_writer_put_u64(w, WIRE_TAG_SIZE, size);
        wire_writer_put_string(w, WIRE_TAG_DUMP_TYPE, policy_dump_type_to_string(req->ask.dump_type));
        wire_writer_put_u32(w, WIRE_TAG_READABLE, readable);
        wire_writer_put_u32(w, WIRE_TAG_PID, (uint32_t)req->target->pid);
        wire_writer_put_u32(w, WIRE_TAG_UID, target_euid(req->target));
        wire_writer_put_string(w, WIRE_TAG_UNIT, req->target->unit);
        commands_put_untrusted_string(w, WIRE_TAG_NAME, req->target->name);
        wire_writer_put_u64(w, WIRE_TAG_TIME, (uint64_t)now.tv_sec * USEC_PER_SEC + (uint64_t)now.tv_nsec / 1000);
}

static void dump_reply(DumpWork *work, const char *name, uint64_t size, bool readable) {
        Request *req = work->request;
        _cleanup_free_ WireWriter *w = NULL;
        _cleanup_free_ char *path = NULL;
        const PolicyAgentSettings *a = &req->policy->agent;
        const char *type = policy_dump_type_to_string(req->ask.dump_type);
        AuditDumpEvent e;
        int r;

        w = malloc(sizeof(*w));
        if (!w || asprintf(&path, "%s/%s", a->dump_dir, name) < 0) {
                request_reply_errno(req, -ENOMEM, "cannot serve the request");
                return;
        }
        e = (AuditDumpEvent){
                .request_id = req->id, .requester = req->peer->uid, .target_pid = req->target->pid,
                .target_uid = target_euid(req->target), .target_unit = req->target->unit, .target_exe = req->target->exe,
                .target_container_id = req->target->container_id, .target_pod_uid = req->target->pod_uid,
                .target_cgroup = req->target->cgroup, .target_cgroup_vouched = req->target->cgroup_vouched,
                .rule = req->verdict.rule_name, .path = path, .size = size, .dump_type = type, .readable = readable,
                .duration_usec = monotonic_usec(req) - work->started_usec,
        };
        r = audit_log_dump(req->broker->config.audit_sink, &e);
        if (r < 0 && !a->audit_failure_allow) {
                (void)unlinkat(work->dir_fd, name, 0);
                request_reply_errno(req, r, "the dump's audit record could not be written; the dump was removed");
                return;
        }

        test_hook_pause("before-dump-reply");
        dump_reply_frame(w, req, path, size, readable);
        r = dump_hand_over(work, w, name, readable);
        if (r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN) {
                /* nobody will be told where it is: a dump nobody knows of only takes space */
                (void)unlinkat(work->dir_fd, name, 0);
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL,
                                    "the client went away before the dump was handed over; the dump was removed");
                return;
        }
        if (r < 0) {
                request_reply_errno(req, r, "cannot send the dump's reply");
                return;
        }
        request_reply_done(req, req->verdict.rule_name,
                              readable ? "dump taken" : "dump taken; only root may read it: the process changed credentials");
}

/* Before any reply: when the client hears back, the target's /tmp holds nothing of ours. */
static void dump_unstage(DumpWork *work) {
        work->stage = dump_stage_free(work->stage);
}

/* Stops everything still going for the dump: the runtime call, the stream (its worker is killed),
 * the staging. The runtime's createdump then fails on its next write. */
static void dump_stop(DumpWork *work) {
        Request *req = work->request;

        work->call = runtime_call_free(work->call);
        worker_job_cancel(req->job);
        req->job = NULL;
        work->control_source = sd_event_source_disable_unref(work->control_source);
        work->first_byte_timer = sd_event_source_disable_unref(work->first_byte_timer);
        work->pace_timer = sd_event_source_disable_unref(work->pace_timer);
        work->control_fd = safe_close(work->control_fd);
        dump_unstage(work);
}

static void dump_fail(DumpWork *work, WireError error, const char *why) {
        dump_stop(work);
        request_reply_error(work->request, AUDIT_DECISION_FAILED, error, why);
}

/* The agent's own failure, @r a negative errno (anything else reads as EIO): the errno goes with it. */
static void dump_fail_errno(DumpWork *work, int r, const char *what) {
        dump_stop(work);
        request_reply_errno(work->request, r < 0 ? r : -EIO, what);
}

/* @error as a module's code mapped it; an internal one keeps @r's errno. */
static void dump_fail_mapped(DumpWork *work, WireError error, int r, const char *why) {
        if (error == WIRE_ERROR_INTERNAL)
                dump_fail_errno(work, r, why);
        else
                dump_fail(work, error, why);
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

/* Both the runtime's OK and the stream's end are in: check the file, label it, name it. */
static void dump_finish(DumpWork *work) {
        Request *req = work->request;
        const char *why = NULL;
        uid_t users[64];
        size_t n_users;
        AclGrant readers;
        DumpAttributes attrs;
        char name[128];
        bool changed = true;
        int r;

        dump_stop(work);
        r = dump_file_check_core(work->file_fd, work->stream_bytes, &why);
        if (r != 0) {
                dump_fail_mapped(work, writer_error(r), r, why ? why : "cannot write the dump");
                return;
        }
        r = target_changed_credentials(req->target, &changed);
        if (r == TARGET_E_GONE) {
                dump_fail(work, WIRE_ERROR_NO_SUCH_PROCESS, "the process exited during the dump");
                return;
        }
        if (r != 0) {
                dump_fail_errno(work, r, "cannot read the process's credentials to publish the dump");
                return;
        }
        if (client_gone(req)) {
                /* its hang-up is still on its way to dump_on_client(): publish nothing for nobody */
                dump_fail(work, WIRE_ERROR_INTERNAL, "the client went away; the dump was cancelled");
                return;
        }
        dump_readers(req, !changed, users, &n_users, &readers);
        dump_file_name(req, name, sizeof(name));
        attrs = (DumpAttributes){
                .requester = req->peer->uid, .target_pid = req->target->pid, .target_uid = target_euid(req->target),
                .target_unit = req->target->unit, .target_exe = req->target->exe, .target_name = req->target->name,
                .dump_type = policy_dump_type_to_string(req->ask.dump_type), .request_id = req->id,
        };
        r = dump_publish_fd(work->dir_fd, work->file_fd, &readers, &attrs, name);
        if (r == DUMP_PUBLISH_E_NO_SPACE) {
                dump_fail(work, WIRE_ERROR_NO_SPACE, "the dump does not fit: the dump directory's file system is full");
                return;
        }
        if (r != 0) {
                dump_fail_errno(work, r, "cannot publish the dump");
                return;
        }
        dump_reply(work, name, work->stream_bytes, !changed);
}

static void dump_report_runtime_error(DumpWork *work) {
        dump_stop(work);
        request_reply_runtime_error(work->request, work->runtime_hresult,
                                    work->runtime_error ? work->runtime_error : "the runtime could not write the dump");
}

static void dump_streamed(Request *req, int r, uint64_t bytes, const char *why) {
        DumpWork *work = req->work;

        work->stream_done = true;
        work->stream_bytes = bytes;
        if (r == JOBS_E_TIMEOUT)
                why = "the dump was not written in time (--dump-timeout, and the runtime's timeout)";
        if (r != 0) {
                /* the guards are broken, or the disk is full: the stream closed the FIFO, createdump failed */
                dump_fail_mapped(work, stream_error(r), r, why ? why : "cannot write the dump");
                return;
        }
        if (work->runtime_error)
                dump_report_runtime_error(work);
        else if (work->runtime_done)
                dump_finish(work);
}

/*
 * The runtime is done, one way or the other: the stream takes what is left
 * in the pipe and ends. A stream that is ending on its own already (it
 * closed its end) answers all the same, and one that never does meets its
 * job's deadline: either way its answer comes.
 */
static void dump_end_stream(DumpWork *work) {
        (void)send(work->control_fd, &(char){ JOBS_STREAM_FINISH }, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/*
 * The pace, once the first byte is in: a runtime that writes no byte for
 * --dump-stall-timeout, or fewer than --dump-min-rate bytes a second over a
 * stretch of that length, has its dump cut. The stream reports at least
 * every second while bytes come (jobs.h), so a stall is seen within a second
 * of its deadline.
 */
static int dump_on_pace(sd_event_source *source, uint64_t usec, void *userdata);

/* Return: 0, or a negative errno when the dump failed for it (its request may be gone with it). */
static int dump_pace_arm(DumpWork *work) {
        const BrokerConfig *config = &work->request->broker->config;
        uint64_t stall = work->last_news_usec + config->dump_stall_timeout_usec,
                 window = work->window_usec + config->dump_stall_timeout_usec;
        int r;

        if (work->pace_timer) {
                /* a time source fires once: set again, it must be enabled again */
                r = sd_event_source_set_time(work->pace_timer, stall < window ? stall : window);
                if (r >= 0)
                        r = sd_event_source_set_enabled(work->pace_timer, SD_EVENT_ONESHOT);
        } else
                r = sd_event_add_time(work->request->broker->event, &work->pace_timer, CLOCK_MONOTONIC,
                                      stall < window ? stall : window, 0, dump_on_pace, work);
        if (r < 0) {
                dump_fail_errno(work, r, "cannot watch the dump's pace");
                return r;
        }
        return 0;
}

/* Whether @bytes in @usec make less than @rate bytes a second. */
static bool under_rate(uint64_t bytes, uint64_t usec, uint64_t rate) {
        return (unsigned __int128)bytes * USEC_PER_SEC < (unsigned __int128)rate * usec;
}

static int dump_on_pace(sd_event_source *source, uint64_t usec, void *userdata) {
        DumpWork *work = userdata;
        const BrokerConfig *config = &work->request->broker->config;
        uint64_t now = monotonic_usec(work->request), stall = config->dump_stall_timeout_usec;
        char why[192];

        if (now >= work->last_news_usec + stall) {
                snprintf(why, sizeof(why),
                         "the runtime stopped writing the dump: no byte for %llu s (--dump-stall-timeout); it was cut",
                         (unsigned long long)(stall / USEC_PER_SEC));
                dump_fail(work, WIRE_ERROR_RUNTIME_UNREACHABLE, why);
                return 0;
        }
        if (now >= work->window_usec + stall) {
                if (under_rate(work->bytes - work->window_bytes, now - work->window_usec, config->dump_min_rate)) {
                        snprintf(why, sizeof(why),
                                 "the runtime wrote the dump too slowly: %llu bytes in %llu s, under --dump-min-rate "
                                 "(%llu bytes a second); it was cut",
                                 (unsigned long long)(work->bytes - work->window_bytes),
                                 (unsigned long long)((now - work->window_usec) / USEC_PER_SEC),
                                 (unsigned long long)config->dump_min_rate);
                        dump_fail(work, WIRE_ERROR_RUNTIME_UNREACHABLE, why);
                        return 0;
                }
                work->window_usec = now;
                work->window_bytes = work->bytes;
        }
        (void)dump_pace_arm(work);
        return 0;
}

/* The runtime answered: what it wrote is in the pipe, and the stream only drains it. */
static void dump_pace_stop(DumpWork *work) {
        work->pace_timer = sd_event_source_disable_unref(work->pace_timer);
}

/* The stream's reports: how far it got. The first one means the runtime is writing, and starts the pace. */
static int dump_on_control(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        DumpWork *work = userdata;
        DumpProgress p;
        bool news = false, first = work->bytes == 0;

        while (recv(fd, &p, sizeof(p), MSG_DONTWAIT) == sizeof(p)) {
                news = news || p.bytes > work->bytes;
                work->bytes = p.bytes;
                work->first_byte_timer = sd_event_source_disable_unref(work->first_byte_timer);
        }
        if (!news)
                return 0;
        work->last_news_usec = monotonic_usec(work->request);
        if (first) {
                work->window_usec = work->last_news_usec;
                work->window_bytes = work->bytes;
        }
        if (first && !work->runtime_done && !work->runtime_error && dump_pace_arm(work) < 0)
                return 0;
        commands_report_progress(work->request, work->bytes);
        return 0;
}

static int dump_on_first_byte_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        DumpWork *work = userdata;

        dump_fail(work, WIRE_ERROR_RUNTIME_UNREACHABLE,
                  "the runtime wrote nothing of the dump in time (--dump-start-timeout); it was cancelled");
        return 0;
}

static void dump_call(DumpWork *work, int fd);

static void dump_port_connected(int fd, int error, void *userdata) {
        DumpWork *work = userdata;
        Request *req = work->request;

        req->port_waiter = NULL;
        if (fd < 0) {
                dump_stop(work);
                if (error == -ETIMEDOUT)
                        request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                            "the runtime did not connect to its diagnostic port again in time");
                else
                        request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_NO_SUCH_PROCESS,
                                            REQUEST_NO_SUCH_PROCESS);
                return;
        }
        dump_call(work, fd);
}

/* A connection for the dump's command: through the port the runtime connected in on, else its own socket. */
static void dump_connect(DumpWork *work) {
        Request *req = work->request;
        PortRuntime *rt = ports_find(req->broker->ports, req->target);
        const char *why = NULL;
        int fd = -EBADF, r;

        if (rt) {
                req->port_waiter_cancel = ports_waiter_cancel;
                r = ports_connect(rt, dump_port_connected, work, &fd, &req->port_waiter);
        } else {
                r = target_connect(req->target, &fd, &why);
        }
        if (r == PORTS_WAITING && rt)
                return;
        if (r < 0) {
                dump_fail_errno(work, r, "cannot connect to the runtime");
                return;
        }
        if (r != 0) {
                dump_stop(work);
                commands_reply_connect_error(req, r, why);
                return;
        }
        dump_call(work, fd);
}

static void dump_call_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        DumpWork *work = userdata;
        Request *req = work->request;
        _cleanup_free_ char *message = NULL, *reason = NULL;
        DotnetIpcCommand older;
        size_t used;

        if (error != 0) {
                char late[128];

                if (error == RUNTIME_CALL_E_TIMEOUT)
                        snprintf(late, sizeof(late), "the runtime did not finish the dump in time (--dump-timeout, %llu s)",
                                 (unsigned long long)(req->broker->config.dump_timeout_usec / USEC_PER_SEC));
                dump_fail(work, WIRE_ERROR_RUNTIME_UNREACHABLE,
                          error == RUNTIME_CALL_E_TIMEOUT     ? late
                          : error == RUNTIME_CALL_E_MALFORMED ? "the runtime sent a malformed reply"
                                                              : "the runtime closed the connection");
                return;
        }
        older = dump_fallback(work->command);
        if (!reply->ok && reply->hresult == DOTNET_IPC_HR_UNKNOWN_COMMAND && older != 0) {
                work->call = runtime_call_free(work->call);
                work->command = older;
                dump_connect(work);
                return;
        }
        if (!reply->ok) {
                /* GenerateCoreDump3 says why in createdump's words */
                if (work->command == DOTNET_IPC_GENERATE_CORE_DUMP3 && reply->payload_size > 0)
                        (void)dotnet_ipc_string_decode(reply->payload, reply->payload_size, &message, &used);
                if (asprintf(&reason, "the runtime could not write the dump%s%s", message ? ": " : "",
                             message ? message : "") < 0)
                        reason = NULL;
                work->runtime_error = reason ? TAKE_PTR(reason) : strdup("the runtime could not write the dump");
                work->runtime_hresult = reply->hresult;
                work->call = runtime_call_free(work->call);
                dump_pace_stop(work);
                if (!work->runtime_error || work->stream_done)
                        dump_report_runtime_error(work);
                else
                        dump_end_stream(work); /* a full disk would explain the failure better: wait for it */
                return;
        }
        work->runtime_done = true;
        work->call = runtime_call_free(work->call);
        dump_pace_stop(work);
        if (work->stream_done)
                dump_finish(work);
        else
                dump_end_stream(work); /* everything createdump wrote is in the pipe now */
}

static void dump_call(DumpWork *work, int fd) {
        Request *req = work->request;
        uint8_t payload[512], request[600];
        size_t n = 0, size;
        uint8_t fields[8];
        int r;

        unaligned_write_le32(fields, runtime_dump_type(req->ask.dump_type));
        unaligned_write_le32(fields + 4, 0); /* flags: no diagnostics, no crash report */
        r = dotnet_ipc_string_encode(work->stage->target_path, payload, sizeof(payload) - sizeof(fields), &n);
        if (r == 0) {
                memcpy(payload + n, fields, sizeof(fields));
                r = dotnet_ipc_request_encode(work->command, payload, n + sizeof(fields), request, sizeof(request),
                                              &size);
        }
        if (r == 0)
                r = runtime_call_start(req->broker->event, fd, request, size, req->broker->config.dump_timeout_usec,
                                       dump_call_done, work, &work->call);
        else
                safe_close(fd);
        if (r != 0)
                dump_fail_errno(work, r, "cannot start the dump");
}

/* The client hung up: nobody will read the dump; cancel it rather than keep a slot and the target frozen. */
static void dump_on_client(Request *req, uint32_t revents) {
        DumpWork *work = req->work;

        dump_fail(work, WIRE_ERROR_INTERNAL, "the client went away; the dump was cancelled");
}

/* What a staging job's end (jobs_stage_dump(), jobs.h's codes) means to the client. */
static WireError stage_error(int r) {
        switch (r) {
        case JOBS_E_UNSAFE_FS: return WIRE_ERROR_UNSAFE_FS;
        case JOBS_E_NO_STAGING: return WIRE_ERROR_NO_STAGING;
        case JOBS_E_GONE: return WIRE_ERROR_NO_SUCH_PROCESS;
        case JOBS_E_TIMEOUT: return WIRE_ERROR_RUNTIME_UNREACHABLE;
        case JOBS_E_WORKER: return WIRE_ERROR_BUSY;
        default: return WIRE_ERROR_INTERNAL;
        }
}

/* dump_dir, the unnamed file, a slot for its bytes, and the stream's control socket. */
static int dump_prepare_file(DumpWork *work, int *ret_control_theirs, const char **ret_why) {
        Request *req = work->request;
        int sv[2], r;

        r = dump_dir_open(req->policy->agent.dump_dir, &work->dir_fd, ret_why);
        if (r != 0)
                return r;
        /* unnamed until complete: a failure or a full disk leaves nothing behind */
        work->file_fd = openat(work->dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (work->file_fd < 0)
                return -errno;
        r = dump_slots_claim(req->broker->dump_slots, &work->slot);
        if (r < 0)
                return r;
        work->have_slot = true;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        work->control_fd = sv[0];
        *ret_control_theirs = sv[1];
        return sd_event_add_io(req->broker->event, &work->control_source, work->control_fd, EPOLLIN, dump_on_control,
                               work);
}

/* The dump's own deadline: the runtime's time to write it, and 30 s to check, label and hand it over. */
static int dump_set_deadline(Request *req) {
        uint64_t usec = req->broker->config.dump_timeout_usec;
        char what[96];

        snprintf(what, sizeof(what), "the dump's deadline (--dump-timeout, %llu s, and 30 s)",
                 (unsigned long long)(usec / USEC_PER_SEC));
        return commands_set_deadline(req, usec + DUMP_HAND_OVER_USEC, what);
}

static void dump_staged(Request *req, int r, DumpStage *stage, const char *why) {
        DumpWork *work = req->work;
        DumpLimits limits = { .max_use = req->policy->agent.max_use, .keep_free = req->policy->agent.keep_free };
        _cleanup_close_ int control_theirs = -EBADF, fifo = -EBADF;
        uint64_t now = 0;
        const char *reason = NULL;

        if (r != 0) {
                dump_fail_mapped(work, stage_error(r), r,
                                 why ? why : r == JOBS_E_GONE ? REQUEST_NO_SUCH_PROCESS : "cannot prepare the dump");
                return;
        }
        work->stage = stage;
        r = dump_prepare_file(work, &control_theirs, &reason);
        if (r == 0) {
                /* the stream's worker holds the FIFO's read end from now on: when it stops, createdump does */
                fifo = dump_stage_take_fifo(stage);
                r = jobs_stream_dump(req, fifo, work->file_fd, work->dir_fd, control_theirs, &limits, work->slot,
                                     dump_streamed);
        }
        if (r != 0) {
                dump_fail_errno(work, r, reason ? reason : "cannot prepare the dump");
                return;
        }
        (void)sd_event_now(req->broker->event, CLOCK_MONOTONIC, &now);
        r = sd_event_add_time(req->broker->event, &work->first_byte_timer, CLOCK_MONOTONIC,
                              now + req->broker->config.dump_start_timeout_usec, 0, dump_on_first_byte_timeout, work);
        if (r >= 0)
                r = dump_set_deadline(req);
        if (r >= 0)
                r = connection_watch_client(req->connection, EPOLLRDHUP, dump_on_client);
        if (r < 0) {
                dump_fail_errno(work, r, "cannot set the dump's deadlines");
                return;
        }
        dump_connect(work);
}

static void dump_stage(Request *req) {
        DumpWork *work = req->work;
        int r;

        r = jobs_stage_dump(req, dump_staged);
        if (r != 0)
                dump_fail_mapped(work, stage_error(r), r, "cannot prepare the dump");
}

/*
 * createdump dies on a runtime suspended at startup for every type but full,
 * and the runtime reports success: such a dump is refused before anything
 * is staged or asked.
 */
static void dump_probed(Request *req, StartupState state) {
        char what[32];

        if (state != STARTUP_STARTED) {
                snprintf(what, sizeof(what), "a %s dump", policy_dump_type_to_string(req->ask.dump_type));
                startup_reply_suspended(req, state, what);
                return;
        }
        dump_stage(req);
}

static void dump_socket_found(Request *req, int r, const char *why) {
        DumpWork *work = req->work;

        if (r != 0 && !commands_port_serves(req, r)) {
                if (r == JOBS_E_TIMEOUT || r == JOBS_E_WORKER)
                        dump_fail(work, r == JOBS_E_TIMEOUT ? WIRE_ERROR_RUNTIME_UNREACHABLE : WIRE_ERROR_BUSY,
                                  "looking at the process did not finish in time");
                else
                        commands_reply_job_error(req, r, why);
                return;
        }
        if (req->ask.dump_type == POLICY_DUMP_FULL)
                dump_stage(req);
        else
                startup_probe(req, dump_probed);
}

/*
 * A user's dump of its own process, whether owner_access or a rule allows it:
 * the user controls that "runtime", which may write as slowly as it likes, so
 * such dumps take slots of their own (max_concurrent_own_dumps, and each
 * user's max_dumps_per_user) and never the host's max_concurrent_dumps, which
 * root's dumps and the rules' of other users' processes are left to.
 */
static bool dump_is_own(const Request *req) {
        return req->peer->uid != 0 && target_euid(req->target) == req->peer->uid;
}

static void dump_decided(Request *req) {
        DumpWork *work = req->work;
        const char *why = NULL;
        int r;

        req->audit.rule = req->verdict.rule_name;
        if (!req->verdict.allowed) {
                request_reply_error(req, AUDIT_DECISION_DENIED, WIRE_ERROR_DENIED, req->verdict.reason);
                return;
        }
        work->key = (AdmissionKey){ .pid = req->target->pid, .start_time = req->target->start_time,
                                    .requester = req->peer->charged_uid, .own = dump_is_own(req) };
        r = admission_begin(req->broker->admission, ADMISSION_DUMP, &work->key,
                            &(AdmissionLimits){ .per_target = 1, .per_requester = req->policy->agent.max_dumps_per_user,
                                                .in_all = work->key.own ? req->policy->agent.max_concurrent_own_dumps
                                                                        : req->policy->agent.max_concurrent_dumps },
                            &why);
        if (r == ADMISSION_E_BUSY) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BUSY, why);
                return;
        }
        if (r != 0) {
                request_reply_errno(req, r, "cannot count the dump");
                return;
        }
        work->claimed = true;
        test_hook_pause("after-decision");
        r = jobs_find_socket(req, dump_socket_found);
        if (r != 0)
                dump_fail_mapped(work, stage_error(r), r, "cannot look for the process's socket");
}

static void dump_opened(Request *req) {
        PolicyDumpType type = req->ask.dump_type;

        req->ask = (PolicyRequest){ .command = POLICY_COMMAND_DUMP, .dump_type = type };
        decide(req, req->target, true, dump_decided);
}

/**
 * dump_start() - decide and take a dump of the process @m names, for the requester
 *
 * DUMP_TYPE names the type (mini when absent: the least memory leaves the
 * process); WANT_FD asks for a read-only fd of the result, which dsctl -o
 * copies as the caller.
 */
void dump_start_as(Request *req, const WireMessage *m, PolicyDumpType type, bool want_fd) {
        DumpWork *work;

        req->ask = (PolicyRequest){ .command = POLICY_COMMAND_DUMP, .dump_type = type };
        work = calloc(1, sizeof(*work));
        if (!work) {
                request_reply_errno(req, -ENOMEM, "cannot serve the request");
                return;
        }
        *work = (DumpWork){ .request = req, .command = DOTNET_IPC_GENERATE_CORE_DUMP3, .want_fd = want_fd,
                            .started_usec = monotonic_usec(req), .dir_fd = -EBADF, .file_fd = -EBADF,
                            .control_fd = -EBADF };
        req->work = work;
        req->work_free = dump_work_free;
        commands_open_target(req, m, dump_opened);
}

void dump_start(Request *req, const WireMessage *m) {
        _cleanup_free_ char *type = NULL;
        PolicyDumpType dump_type = POLICY_DUMP_MINI;
        uint32_t want_fd = 0;

        if (wire_message_get_string(m, WIRE_TAG_DUMP_TYPE, &type) == 0 &&
            (dump_type = policy_dump_type_from_string(type)) == _POLICY_DUMP_INVALID) {
                req->ask = (PolicyRequest){ .command = POLICY_COMMAND_DUMP };
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                    "unknown dump type (mini, heap, triage, full)");
                return;
        }
        (void)wire_message_get_u32(m, WIRE_TAG_WANT_FD, &want_fd);
        dump_start_as(req, m, dump_type, want_fd == 1);
}

static char *get_attribute(int fd, const char *key) {
        char buf[PATH_MAX];
        ssize_t n = fgetxattr(fd, key, buf, sizeof(buf) - 1);

        if (n < 0)
                return NULL;
        buf[n] = '\0';
        return strdup(buf);
}

static int parse_uid(const char *s, uint32_t *ret) {
        uint64_t v;
        int r;

        r = parse_u64(s, &v);
        if (r < 0)
                return r;
        if (v >= UINT32_MAX) /* (uid_t) -1 is no uid */
                return -ERANGE;
        *ret = (uint32_t)v;
        return 0;
}

/* What a dump's xattrs say of it (dump-publish.c); each NULL when absent. */
typedef struct DumpLabels {
        char *type, *pid, *uid, *unit, *exe, *name, *requester;
} DumpLabels;

static void dump_labels_done(DumpLabels *l) {
        free(l->type);
        free(l->pid);
        free(l->uid);
        free(l->unit);
        free(l->exe);
        free(l->name);
        free(l->requester);
}

static void dump_labels_read(int fd, DumpLabels *l) {
        l->type = get_attribute(fd, "user.dsagent.dump_type");
        l->pid = get_attribute(fd, "user.dsagent.target_pid");
        l->uid = get_attribute(fd, "user.dsagent.target_uid");
        l->unit = get_attribute(fd, "user.dsagent.target_unit");
        l->exe = get_attribute(fd, "user.dsagent.target_exe");
        l->name = get_attribute(fd, "user.dsagent.target_name");
        l->requester = get_attribute(fd, "user.dsagent.requester_uid");
}

/* The labels as fields, each checked: they are the agent's own, but a file system may hold anything. */
static void put_labels(WireWriter *w, const DumpLabels *l) {
        pid_t pid;
        uint32_t uid;

        /* a dump's type, or "trace" for an [[on_start]] trace (on-start.h) */
        if (l->type && (policy_dump_type_from_string(l->type) != _POLICY_DUMP_INVALID || strcmp(l->type, "trace") == 0))
                wire_writer_put_string(w, WIRE_TAG_DUMP_TYPE, l->type);
        if (l->pid && parse_pid(l->pid, &pid) == 0)
                wire_writer_put_u32(w, WIRE_TAG_PID, (uint32_t)pid);
        if (l->uid && parse_uid(l->uid, &uid) == 0)
                wire_writer_put_u32(w, WIRE_TAG_UID, uid);
        if (l->unit && wire_unit_name_is_valid(l->unit, strlen(l->unit)))
                wire_writer_put_string(w, WIRE_TAG_UNIT, l->unit);
        commands_put_untrusted_string(w, WIRE_TAG_EXE, l->exe);
        commands_put_untrusted_string(w, WIRE_TAG_NAME, l->name);
}

static int dumps_list_one(Request *req, WireWriter *w, int dir_fd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *path = NULL;
        _cleanup_(dump_labels_done) DumpLabels labels = {};
        struct stat st;
        bool readable = req->peer->uid == 0;

        fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return 0;
        if (!readable && (acl_fd_allows_read(fd, req->peer->uid, req->peer->groups, req->peer->n_groups, &readable) < 0 ||
                          !readable))
                return 0;
        if (asprintf(&path, "%s/%s", req->policy->agent.dump_dir, name) < 0)
                return -ENOMEM;
        dump_labels_read(fd, &labels);

        wire_writer_begin(w, WIRE_REPLY_DUMP);
        wire_writer_put_string(w, WIRE_TAG_PATH, path);
        wire_writer_put_u64(w, WIRE_TAG_SIZE, (uint64_t)st.st_size);
        wire_writer_put_u64(w, WIRE_TAG_TIME,
                            (uint64_t)st.st_mtim.tv_sec * USEC_PER_SEC + (uint64_t)st.st_mtim.tv_nsec / 1000);
        wire_writer_put_u32(w, WIRE_TAG_READABLE, 1);
        put_labels(w, &labels);
        return connection_queue_frame(req->connection, w);
}

/**
 * dumps_list() - the published dumps the caller can read, like coredumpctl list
 *
 * Decided by each file's ACL, the same check the kernel makes when the
 * caller opens it; root sees all.
 */
void dumps_list(Request *req) {
        _cleanup_free_ WireWriter *w = NULL;
        _cleanup_close_ int dir_fd = -EBADF, walk_fd = -EBADF;
        const char *why = NULL;
        unsigned count = 0;
        struct dirent *de;
        DIR *d;
        int r = 0;

        w = malloc(sizeof(*w));
        r = !w ? -ENOMEM : dump_dir_open(req->policy->agent.dump_dir, &dir_fd, &why);
        if (r == 0 && ((walk_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3)) < 0 || !(d = fdopendir(walk_fd))))
                r = -errno;
        if (r > 0) { /* DUMP_PUBLISH_E_DIRECTORY: the dump directory is unfit, and @why says how */
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, why);
                return;
        }
        if (r < 0) {
                request_reply_errno(req, r, why ? why : "cannot list the dumps");
                return;
        }
        walk_fd = -EBADF;
        while (r >= 0 && (de = readdir(d))) {
                size_t before = req->connection->out_size;
                if (de->d_name[0] == '.')
                        continue;
                r = dumps_list_one(req, w, dir_fd, de->d_name);
                count += req->connection->out_size > before;
        }
        closedir(d);
        if (r < 0) {
                request_reply_errno(req, r, why ? why : "cannot list the dumps");
                return;
        }
        req->audit.have_result_count = true;
        req->audit.result_count = count;
        request_reply_done(req, NULL, "listed the dumps the requester can read");
}

/* What a refused removal reads, whatever the reason: nobody learns what dump_dir holds. */
#define DUMPS_NOT_YOURS "no dump of that name that you asked for"

/* The name PATH gives in dump_dir, or NULL: a bare name, or dump_dir, a slash and a name. */
static const char *dump_name_in(const char *dump_dir, const char *path) {
        const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
        size_t dir_len = strlen(dump_dir);

        while (dir_len > 1 && dump_dir[dir_len - 1] == '/')
                dir_len--;
        if (slash && ((size_t)(slash - path) != dir_len || strncmp(path, dump_dir, dir_len) != 0))
                return NULL;
        /* no ".", "..", hidden or over-long names: only what the agent publishes */
        if (name[0] == '\0' || name[0] == '.' || strlen(name) > NAME_MAX)
                return NULL;
        return name;
}

/* Whether @peer may remove the dump in @fd: root, or the requester it records. */
static bool may_remove(const PeerCreds *peer, const DumpLabels *l) {
        uint32_t requester;

        if (peer->uid == 0)
                return true;
        return l->requester && parse_uid(l->requester, &requester) == 0 && requester == peer->uid;
}

/* The record names the dump's process, as the dump's own record did. */
static void audit_dump_target(Request *req, const DumpLabels *l) {
        pid_t pid;
        uint32_t uid;

        if (!l->pid || parse_pid(l->pid, &pid) != 0)
                return;
        req->audit.have_target = true;
        req->audit.target_pid = pid;
        req->audit.target_uid = l->uid && parse_uid(l->uid, &uid) == 0 ? uid : (uid_t)-1;
        req->audit.target_unit = l->unit;
        req->audit.target_exe = l->exe;
}

/* Removes the dump, if the caller may. Return: 0 (removed), 1 (refused: @reason says why), or a negative errno. */
static int remove_named(Request *req, int dir_fd, const char *name, const char *path, DumpLabels *labels,
                        AuditDecision *ret_decision, char *reason, size_t size) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                snprintf(reason, size, "no dump %s: %s", path, fd < 0 ? strerror(errno) : "not a file");
                *ret_decision = AUDIT_DECISION_FAILED;
                return 1;
        }
        dump_labels_read(fd, labels);
        audit_dump_target(req, labels);
        if (!may_remove(req->peer, labels)) {
                snprintf(reason, size, "the dump %s was asked for by %s%s", path, labels->requester ? "uid " : "",
                         labels->requester ? labels->requester : "nobody it records");
                *ret_decision = AUDIT_DECISION_DENIED;
                return 1;
        }
        /* dump_dir is root's alone: the name still means the file just checked */
        return unlinkat(dir_fd, name, 0) < 0 ? -errno : 0;
}

static void dumps_remove_named(Request *req, int dir_fd, const char *name, const char *path) {
        _cleanup_(dump_labels_done) DumpLabels labels = {};
        AuditDecision decision = AUDIT_DECISION_FAILED;
        char reason[PATH_MAX + 64];
        int r;

        r = remove_named(req, dir_fd, name, path, &labels, &decision, reason, sizeof(reason));
        if (r > 0)
                request_reply_error_as(req, decision, WIRE_ERROR_DENIED, reason, DUMPS_NOT_YOURS);
        else if (r < 0)
                request_reply_errno(req, r, "cannot remove the dump");
        else {
                snprintf(reason, sizeof(reason), "removed the dump %s", path);
                request_reply_done(req, NULL, reason);
        }
        /* the record is written: its strings go with the labels */
        req->audit.target_unit = req->audit.target_exe = NULL;
}

void dumps_remove(Request *req, const WireMessage *m) {
        _cleanup_free_ char *asked = NULL, *path = NULL;
        _cleanup_close_ int dir_fd = -EBADF;
        const char *dump_dir = req->policy->agent.dump_dir, *name, *why = NULL;
        int r;

        if (wire_message_get_string(m, WIRE_TAG_PATH, &asked) != 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "which dump? a PATH is needed");
                return;
        }
        name = dump_name_in(dump_dir, asked);
        if (!name) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                    "only a dump of the dump directory, by its name, can be removed");
                return;
        }
        if (asprintf(&path, "%s/%s", dump_dir, name) < 0) {
                request_reply_errno(req, -ENOMEM, "cannot serve the request");
                return;
        }
        r = dump_dir_open(dump_dir, &dir_fd, &why);
        if (r > 0)
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, why);
        else if (r < 0)
                request_reply_errno(req, r, why);
        else
                dumps_remove_named(req, dir_fd, name, path);
}
