/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "broker.h"
#include "candidate-walk.h"
#include "cleanup.h"
#include "commands.h"
#include "connection.h"
#include "decision.h"
#include "dotnet-ipc.h"
#include "dump.h"
#include "env.h"
#include "jobs.h"
#include "ports.h"
#include "pam-check.h"
#include "policy.h"
#include "proxy.h"
#include "runtime-call.h"
#include "session.h"
#include "startup.h"
#include "target-cache.h"
#include "test-hooks.h"
#include "text.h"

/* A listing's probe of one process gets this long: one stuck process must not hold up the rest. */
#define PS_PROBE_TIMEOUT_USEC (2 * 1000000ULL)
/* Past this much queued for a client, a listing waits until the client has read some. */
#define PS_QUEUE_HIGH (64 * 1024)
/* Runtimes that connected in and that a listing adds: as many as the agent registers (ports.h). */
#define PS_PORT_RUNTIMES_MAX PORTS_RUNTIMES_MAX
#define PS_VISIBLE_UIDS_MAX 256

void commands_put_untrusted_string(WireWriter *w, WireTag tag, const char *s) {
        char buf[WIRE_STRING_MAX + 1];
        size_t len, max = sizeof(w->buf) - w->size;

        if (!s)
                return;
        /* what fits in the frame, the fields after it kept room for: a runtime's long strings cut, not the reply */
        max = max > WIRE_FIELD_HEADER_SIZE + COMMANDS_FRAME_RESERVE ? max - WIRE_FIELD_HEADER_SIZE - COMMANDS_FRAME_RESERVE
                                                                    : 0;
        if (max > WIRE_STRING_MAX)
                max = WIRE_STRING_MAX;
        len = strnlen(s, max + 1);
        if (len > max) {
                len = max;
                /* cut before a character rather than inside it, as far as UTF-8 says where one begins */
                for (size_t back = 0; back < 3 && len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80; back++)
                        len--;
        }
        /* a text field carries the bytes as they are, for the client to escape; a string is UTF-8 */
        if (wire_tag_kind(tag) != WIRE_KIND_TEXT)
                len = utf8_valid_prefix(s, len);
        if (len == 0 && *s)
                return; /* nothing of it fits: absent, rather than said to be empty */
        memcpy(buf, s, len);
        buf[len] = '\0';
        wire_writer_put_string(w, tag, buf);
}

/*
 * A PROGRESS frame for a client that asked for them: the time left until the
 * request's deadline, which deadline that is (@what, may be NULL), and
 * @bytes (may be NULL). It is sent now when nothing else waits to go out,
 * and is skipped when the client does not read: progress is news. Behind
 * other frames it is queued, to keep the order.
 */
static void send_progress(Request *req, const uint64_t *bytes, const char *what) {
        _cleanup_free_ WireWriter *w = NULL;
        Connection *c = req->connection;
        uint64_t now = 0, at = 0;

        if (!req->want_progress || req->finished || c->state != CONNECTION_WORKING)
                return;
        w = malloc(sizeof(*w));
        if (!w || sd_event_now(req->broker->event, CLOCK_MONOTONIC, &now) < 0 ||
            sd_event_source_get_time(c->timer, &at) < 0)
                return;
        wire_writer_begin(w, WIRE_REPLY_PROGRESS);
        wire_writer_put_u64(w, WIRE_TAG_DEADLINE, at > now ? at - now : 0);
        wire_writer_put_string(w, WIRE_TAG_MESSAGE, what);
        if (bytes)
                wire_writer_put_u64(w, WIRE_TAG_SIZE, *bytes);
        if (c->out_size > c->out_sent)
                (void)connection_queue_frame(c, w);
        else
                (void)connection_send_frame_now(c, w, -EBADF);
}

int commands_set_deadline(Request *req, uint64_t usec, const char *what) {
        int r;

        r = connection_set_deadline(req->connection, usec);
        if (r >= 0)
                send_progress(req, NULL, what);
        return r;
}

void commands_report_progress(Request *req, uint64_t bytes) {
        send_progress(req, &bytes, NULL);
}

/* "2 × --runtime-timeout (20 s)": the backstop every request starts with (connection_on_request()). */
static void announce_first_deadline(Request *req, const WireMessage *m) {
        uint32_t progress = 0;
        char what[96];

        (void)wire_message_get_u32(m, WIRE_TAG_PROGRESS, &progress);
        req->want_progress = progress == 1;
        snprintf(what, sizeof(what), "the agent's deadline for a request (2 x --runtime-timeout, %llu s)",
                 (unsigned long long)(2 * req->broker->config.runtime_timeout_usec / 1000000));
        send_progress(req, NULL, what);
}

void commands_put_target_fields(WireWriter *w, const Target *t) {
        wire_writer_put_u32(w, WIRE_TAG_PID, (uint32_t)t->pid);
        wire_writer_put_u32(w, WIRE_TAG_UID, target_euid(t));
        wire_writer_put_string(w, WIRE_TAG_UNIT, t->unit);
        commands_put_untrusted_string(w, WIRE_TAG_EXE, t->exe);
        /* each only when known: the worker leaves them NULL rather than empty; the names of a cgroup root
         * does not vouch for are shown apart, as claims, never as the container */
        wire_writer_put_string(w, t->cgroup_vouched ? WIRE_TAG_CONTAINER : WIRE_TAG_UNVERIFIED_CONTAINER,
                               t->container_id);
        wire_writer_put_string(w, t->cgroup_vouched ? WIRE_TAG_POD_UID : WIRE_TAG_UNVERIFIED_POD_UID, t->pod_uid);
        commands_put_untrusted_string(w, WIRE_TAG_CGROUP, t->cgroup);
        if (t->cgroup && !t->cgroup_vouched)
                wire_writer_put_u32(w, WIRE_TAG_CGROUP_UNVERIFIED, 1);
}

/* May the requester learn that @t exists? (policy_target_visible()) */
static bool requester_sees(const Request *req, const Target *t) {
        PolicyRequester who = requester_of(req);
        PolicyTarget pt = policy_target_of(t);

        return policy_target_visible(req->policy, &who, &pt);
}

/* What a job's failure means to the client. */
static void reply_job_error(Request *req, int r, const char *why) {
        if (r == JOBS_E_TIMEOUT)
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                    "looking at the process did not finish in time: its files or its memory "
                                    "did not answer");
        else if (r == JOBS_E_WORKER)
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BUSY,
                                    "no worker could look at the process now; try again");
        else
                request_reply_target_error(req, r, why);
}

/* ---- opening the target ---- */

static void target_opened(Request *req, int r, const char *why) {
        if (r == 0 && !requester_sees(req, req->target)) {
                request_reply_invisible(req);
                return;
        }
        if (r != 0) {
                reply_job_error(req, r, why);
                return;
        }
        test_hook_pause("after-target");
        req->on_target(req);
}

/* A worker's reading of the process, kept for the requests about it that follow shortly. */
static void target_read(Request *req, int r, const char *why) {
        if (r == 0)
                target_cache_put(req->broker->targets, req->target, request_now_usec(req),
                                 (uint64_t)req->policy->agent.target_cache_ms * 1000);
        target_opened(req, r, why);
}

/*
 * The process as a worker read it moments ago, when that still holds (target-cache.h) and the
 * record would name everyone just as a worker's job does. Return: whether @req got it.
 */
static bool reuse_target(Request *req, pid_t pid) {
        uint64_t age;
        Target *t;

        if (target_cache_get(req->broker->targets, pid, request_now_usec(req), &t, &age) != 0)
                return false;
        /* a port's registration compares the executable afresh (ports.c), and the record wants every name */
        if (ports_have_pid(req->broker->ports, pid) ||
            !audit_names_known(req->peer->uid, req->peer->gid, target_euid(t))) {
                target_unref(t);
                return false;
        }
        request_set_target(req, t);
        req->audit.target_facts_reused = true;
        req->audit.target_facts_age_usec = age;
        return true;
}

/*
 * Must a reused reading's details be read again before they are used? When a rule selects
 * processes by them: a process rewrites its command line, or is moved to another cgroup, without
 * an exec, out of a rule's cover as well as into one. And for a dump, whose file and record are
 * named after the process. Otherwise nothing decides on them, and the record says their age.
 */
static bool details_must_be_fresh(const Request *req) {
        return policy_selects_by_name_or_cgroup(req->policy) || req->ask.command == POLICY_COMMAND_DUMP;
}

static void read_pid(Request *req, pid_t pid) {
        int r = jobs_open_target(req, pid, true, target_read);

        if (r != 0)
                reply_job_error(req, r, NULL);
}

/* A reused reading's details, read again: what changed is read whole, as if nothing had been kept. */
static void reuse_rechecked(Request *req, int r, const char *why) {
        pid_t pid = req->target->pid;

        if (r != JOBS_E_CHANGED) {
                target_opened(req, r, why);
                return;
        }
        target_cache_forget(req->broker->targets, pid);
        request_set_target(req, NULL);
        req->audit.target_facts_reused = false;
        req->audit.target_facts_age_usec = 0;
        read_pid(req, pid);
}

static void open_pid(Request *req, pid_t pid) {
        int r;

        req->audit.have_target = true;
        req->audit.target_pid = pid;
        req->audit.target_uid = (uid_t)-1;
        if (!reuse_target(req, pid)) {
                read_pid(req, pid);
                return;
        }
        if (!details_must_be_fresh(req)) {
                target_opened(req, 0, NULL);
                return;
        }
        r = jobs_recheck_target(req, reuse_rechecked);
        if (r != 0)
                reply_job_error(req, r, NULL);
}

/* "orders.service runs several .NET processes (3): 1234, 1240, 1300; name one by pid" */
static void reply_several(Request *req, const pid_t *pids, size_t n_listed, size_t n) {
        char why[TARGET_UNIT_MAX + 64 + JOBS_UNIT_PIDS_MAX * 12];
        size_t len;

        len = (size_t)snprintf(why, sizeof(why), "%s runs several .NET processes (%zu):", req->unit, n);
        for (size_t i = 0; i < n_listed && len < sizeof(why); i++)
                len += (size_t)snprintf(why + len, sizeof(why) - len, "%s %d", i > 0 ? "," : "", (int)pids[i]);
        if (len < sizeof(why))
                snprintf(why + len, sizeof(why) - len, "%s; name one by pid", n > n_listed ? ", ..." : "");
        request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, why);
}

static void unit_found(Request *req, int r, const pid_t *pids, size_t n_listed, size_t n) {
        char why[TARGET_UNIT_MAX + 64];

        if (r != 0) {
                reply_job_error(req, r, NULL);
                return;
        }
        if (n == 1 && n_listed == 1) {
                open_pid(req, pids[0]);
                return;
        }
        if (n > 1) {
                reply_several(req, pids, n_listed, n);
                return;
        }
        snprintf(why, sizeof(why), "no .NET process runs in %s", req->unit);
        request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_NO_SUCH_PROCESS, why);
}

void commands_open_target(Request *req, const WireMessage *m, void (*opened)(Request *req)) {
        uint32_t pid;
        int r;

        req->on_target = opened;
        if (wire_message_get_u32(m, WIRE_TAG_PID, &pid) == 0 && pid > 0 && pid <= INT32_MAX) {
                open_pid(req, (pid_t)pid);
                return;
        }
        if (wire_message_get_string(m, WIRE_TAG_UNIT, &req->unit) != 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "a process id or a unit is needed");
                return;
        }
        /* dsctl checks the very same (wire.h): what it sends passes */
        if (!wire_unit_name_is_valid(req->unit, strlen(req->unit))) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                    "not a unit name (like orders.service)");
                return;
        }
        r = jobs_find_unit(req, req->unit, unit_found);
        if (r == -ENAMETOOLONG)
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "the unit's name is too long");
        else if (r != 0)
                reply_job_error(req, r, NULL);
}

/* ---- reaching the runtime ---- */

static void port_connected(int fd, int error, void *userdata) {
        Request *req = userdata;

        req->port_waiter = NULL;
        if (fd < 0) {
                if (error == -ETIMEDOUT)
                        request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                            "the runtime did not connect to its diagnostic port again in time");
                else
                        request_reply_target_error(req, TARGET_E_GONE, NULL);
                return;
        }
        req->on_runtime(req, fd);
}

/* Through the port the runtime connected in on, if it did. Return: whether it did (the request goes on there). */
static bool connect_through_port(Request *req) {
        PortRuntime *rt = ports_find(req->broker->ports, req->target);
        int fd = -EBADF, r;

        if (!rt)
                return false;
        r = ports_connect(rt, port_connected, req, &fd, &req->port_waiter);
        if (r == 0)
                req->on_runtime(req, fd);
        else if (r < 0)
                request_reply_errno(req, r, "cannot wait for the runtime's connection");
        return true;
}

bool commands_port_serves(Request *req, int r) {
        if (r != 0 && (r < 0 || r >= JOBS_E_TIMEOUT || r == TARGET_E_GONE))
                return false;
        return ports_find(req->broker->ports, req->target) != NULL;
}

static void socket_found(Request *req, int r, const char *why) {
        int fd;

        if (commands_port_serves(req, r)) {
                (void)connect_through_port(req);
                return;
        }
        if (r != 0) {
                reply_job_error(req, r, why);
                return;
        }
        r = target_connect(req->target, &fd, &why);
        if (r != 0) {
                request_reply_target_error(req, r, why);
                return;
        }
        req->on_runtime(req, fd);
}

void commands_connect_runtime(Request *req, void (*connected)(Request *req, int fd)) {
        int r;

        req->on_runtime = connected;
        r = jobs_find_socket(req, socket_found);
        if (r != 0)
                reply_job_error(req, r, NULL);
}

void commands_connect_again(Request *req, void (*connected)(Request *req, int fd)) {
        const char *why = NULL;
        int fd, r;

        req->on_runtime = connected;
        if (connect_through_port(req))
                return;
        r = target_connect(req->target, &fd, &why);
        if (r != 0) {
                request_reply_target_error(req, r, why);
                return;
        }
        connected(req, fd);
}

void commands_put_port_fields(WireWriter *w, Request *req) {
        PortRuntime *rt = ports_find(req->broker->ports, req->target);

        if (!rt)
                return;
        wire_writer_put_string(w, WIRE_TAG_PORT, port_runtime_path(rt));
        if (port_runtime_waits(rt))
                wire_writer_put_u32(w, WIRE_TAG_SUSPENDED, 1);
}

void commands_call_runtime(Request *req, int fd, DotnetIpcCommand command, RuntimeCallDone done, void *userdata,
                           RuntimeCall **ret_call) {
        uint8_t request[DOTNET_IPC_HEADER_SIZE];
        size_t size;
        int r;

        r = dotnet_ipc_request_encode(command, NULL, 0, request, sizeof(request), &size);
        if (r == 0)
                r = runtime_call_start(req->broker->event, fd, request, size, req->broker->config.runtime_timeout_usec,
                                       done, userdata, ret_call);
        else
                safe_close(fd);
        if (r != 0)
                request_reply_errno(req, r < 0 ? r : -EINVAL, "cannot start the runtime call");
}

/* ---- info ---- */

typedef struct InfoWork {
        Request *request;
        RuntimeCall *call;
        DotnetIpcCommand command;
} InfoWork;

static void info_work_free(void *p) {
        InfoWork *work = p;

        if (!work)
                return;
        runtime_call_free(work->call);
        free(work);
}

static void info_reply(Request *req, const DotnetProcessInfo *info) {
        _cleanup_free_ WireWriter *w = malloc(sizeof(*w));
        const Target *t = req->target;
        int r;

        if (!w) {
                request_reply_errno(req, -ENOMEM, "cannot serve the request");
                return;
        }
        wire_writer_begin(w, WIRE_REPLY_PROCESS);
        commands_put_target_fields(w, t);
        commands_put_untrusted_string(w, WIRE_TAG_NAME, info->entry_assembly ? info->entry_assembly : t->name);
        wire_writer_put_u64(w, WIRE_TAG_RUNTIME_PID, info->pid);
        wire_writer_put_bytes(w, WIRE_TAG_COOKIE, info->cookie, sizeof(info->cookie));
        commands_put_untrusted_string(w, WIRE_TAG_COMMAND_LINE, info->command_line);
        commands_put_untrusted_string(w, WIRE_TAG_OS, info->os);
        commands_put_untrusted_string(w, WIRE_TAG_ARCH, info->arch);
        commands_put_untrusted_string(w, WIRE_TAG_ENTRY_ASSEMBLY, info->entry_assembly);
        commands_put_untrusted_string(w, WIRE_TAG_RUNTIME_VERSION, info->runtime_version);
        commands_put_untrusted_string(w, WIRE_TAG_RUNTIME_ID, info->runtime_identifier);
        commands_put_port_fields(w, req);
        r = connection_queue_frame(req->connection, w);
        if (r < 0) {
                request_reply_errno(req, r, "cannot queue the reply");
                return;
        }
        request_reply_done(req, req->verdict.rule_name, "process info read");
}

/* Older runtimes answer newer ProcessInfo versions with "unknown command". */
static DotnetIpcCommand process_info_fallback(DotnetIpcCommand command) {
        switch (command) {
        case DOTNET_IPC_PROCESS_INFO3: return DOTNET_IPC_PROCESS_INFO2;
        case DOTNET_IPC_PROCESS_INFO2: return DOTNET_IPC_PROCESS_INFO;
        default: return 0;
        }
}

static void info_connected(Request *req, int fd);

static void info_call_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        _cleanup_(dotnet_process_info_done) DotnetProcessInfo info = DOTNET_PROCESS_INFO_NULL;
        InfoWork *work = userdata;
        Request *req = work->request;
        DotnetIpcCommand older;

        if (error != 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                    runtime_call_error_text(error));
                return;
        }
        older = process_info_fallback(work->command);
        if (!reply->ok && reply->hresult == DOTNET_IPC_HR_UNKNOWN_COMMAND && older != 0) {
                work->call = runtime_call_free(work->call);
                work->command = older;
                commands_connect_again(req, info_connected);
                return;
        }
        if (!reply->ok) {
                request_reply_runtime_error(req, reply->hresult, "the runtime refused ProcessInfo");
                return;
        }
        if (dotnet_process_info_decode(work->command, reply->payload, reply->payload_size, &info) != 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                    "the runtime sent a malformed ProcessInfo reply");
                return;
        }
        if (info.pid != (uint64_t)target_ns_pid(req->target)) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_SOCKET_UNTRUSTED,
                                    "the runtime reported another process id");
                return;
        }
        info_reply(req, &info);
}

static void info_connected(Request *req, int fd) {
        InfoWork *work = req->work;

        commands_call_runtime(req, fd, work->command, info_call_done, work, &work->call);
}

static void info_decided(Request *req) {
        InfoWork *work;

        req->audit.rule = req->verdict.rule_name;
        if (!req->verdict.allowed) {
                request_reply_error(req, AUDIT_DECISION_DENIED, WIRE_ERROR_DENIED, req->verdict.reason);
                return;
        }
        test_hook_pause("after-decision");
        work = calloc(1, sizeof(*work));
        if (!work) {
                request_reply_errno(req, -ENOMEM, "cannot serve the request");
                return;
        }
        *work = (InfoWork){ .request = req, .command = DOTNET_IPC_PROCESS_INFO3 };
        req->work = work;
        req->work_free = info_work_free;
        commands_connect_runtime(req, info_connected);
}

static void info_opened(Request *req) {
        req->ask = (PolicyRequest){ .command = POLICY_COMMAND_INFO };
        decide(req, req->target, true, info_decided);
}

/* ---- explain ---- */

/* Reads the command and its parameters an explain request asks about. */
static bool explain_request_of(Request *req, const WireMessage *m, PolicyRequest *q) {
        _cleanup_free_ char *command = NULL, *dump_type = NULL;
        uint64_t seconds = 0;

        *q = (PolicyRequest){};
        if (wire_message_get_string(m, WIRE_TAG_COMMAND, &command) != 0 ||
            (q->command = policy_command_from_string(command)) == _POLICY_COMMAND_INVALID) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "explain needs a known command");
                return false;
        }
        if (wire_message_get_string(m, WIRE_TAG_DUMP_TYPE, &dump_type) == 0 &&
            (q->dump_type = policy_dump_type_from_string(dump_type)) == _POLICY_DUMP_INVALID) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "unknown dump type");
                return false;
        }
        /* a dump without a type is asked about as the smallest one */
        if (q->command == POLICY_COMMAND_DUMP && q->dump_type == POLICY_DUMP_NONE)
                q->dump_type = POLICY_DUMP_MINI;
        if (wire_message_get_u64(m, WIRE_TAG_DURATION, &seconds) == 0) {
                if (seconds > UINT64_MAX / 1000000) {
                        request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "duration too long");
                        return false;
                }
                q->duration_usec = seconds * 1000000;
        }
        return true;
}

static void explain_decided(Request *req) {
        _cleanup_free_ WireWriter *w = malloc(sizeof(*w));
        const PolicyVerdict *v = &req->verdict;
        char reason[256];
        int r;

        if (!w) {
                request_reply_errno(req, -ENOMEM, "cannot serve the request");
                return;
        }
        wire_writer_begin(w, WIRE_REPLY_VERDICT);
        wire_writer_put_u32(w, WIRE_TAG_ALLOWED, v->allowed);
        wire_writer_put_string(w, WIRE_TAG_COMMAND, policy_command_to_string(req->ask.command));
        wire_writer_put_string(w, WIRE_TAG_RULE, v->rule_name);
        wire_writer_put_string(w, WIRE_TAG_MESSAGE, v->reason);
        commands_put_target_fields(w, req->target);
        r = connection_queue_frame(req->connection, w);
        if (r < 0) {
                request_reply_errno(req, r, "cannot queue the reply");
                return;
        }
        snprintf(reason, sizeof(reason), "explained %s: %s (%s)", policy_command_to_string(req->ask.command),
                 v->allowed ? "would be allowed" : "would be denied", v->reason);
        request_reply_done(req, v->rule_name, reason);
}

static void explain_opened(Request *req) {
        decide(req, req->target, false, explain_decided);
}

/*
 * explain: would the caller be allowed, and by which rule or why not. The
 * answer speaks only of rules that name the caller, and asking does not use
 * up a rate limit.
 */
static void explain_start(Request *req, const WireMessage *m) {
        if (!explain_request_of(req, m, &req->ask))
                return;
        if (wire_message_get_string(m, WIRE_TAG_TRACE_PROFILE, &req->trace_profile) < 0) {
                request_reply_errno(req, -ENOMEM, "cannot serve the request");
                return;
        }
        req->ask.trace_profile = req->trace_profile;
        commands_open_target(req, m, explain_opened);
}

/* ---- ps ---- */

/*
 * A listing costs what the caller may see: a worker finds the processes that
 * may run a runtime among those whose owner the caller could see at all
 * (discover.h); each of those is then opened, decided, and its socket found
 * in a worker of its own, one after the other, each frame sent as it is
 * made. When the client does not read, the listing waits; at its deadline it
 * ends.
 */
typedef struct PsWork {
        Request *request;        /* the listing; while a probe runs, its target is the process probed */
        CandidateWaiter *waiter; /* while it waits for a walk of /proc */
        pid_t *pids;
        size_t n, next;
        unsigned count;
} PsWork;

static void ps_work_free(void *p) {
        PsWork *work = p;

        if (work) {
                candidate_waiter_cancel(work->waiter);
                free(work->pids);
                /* the work ends with its probe (at the listing's deadline, say): the process that
                 * probe looked at is not what the listing's record is about, nor one to forget */
                request_set_target(work->request, NULL);
        }
        free(work);
}

static void ps_next(Request *req);

/*
 * A probe that answers badly leaves its process out (ps_opened()); one that cannot even be
 * submitted (this user's worker queue is full) ends the listing with that error, since the
 * processes still to look at would otherwise be missing from it without a word. The error
 * replaces the listing: its record, like any listing's, is about no one process, and counts
 * none.
 */
static void ps_cut_short(Request *req, int r) {
        request_set_target(req, NULL);
        if (r == JOBS_E_WORKER)
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BUSY,
                                    "no worker could look at the processes to list now; try again");
        else
                reply_job_error(req, r, NULL);
}

static void ps_emit(Request *req) {
        _cleanup_free_ WireWriter *w = malloc(sizeof(*w));
        PsWork *work = req->work;

        if (!w)
                return;
        wire_writer_begin(w, WIRE_REPLY_PROCESS);
        commands_put_target_fields(w, req->target);
        commands_put_untrusted_string(w, WIRE_TAG_NAME, req->target->name);
        commands_put_port_fields(w, req);
        if (connection_queue_frame(req->connection, w) == 0)
                work->count++;
}

static void ps_socket_found(Request *req, int r, const char *why) {
        if (r == 0 || commands_port_serves(req, r))
                ps_emit(req);
        ps_next(req);
}

static void ps_opened(Request *req, int r, const char *why) {
        PolicyRequester who = requester_of(req);
        PolicyRequest q = { .command = POLICY_COMMAND_PS };
        PolicyTarget pt;
        PolicyVerdict v;

        if (r != 0) {
                ps_next(req); /* gone, or not answering: not listed */
                return;
        }
        /* listing is not rate limited: it shows what may be done, it does nothing */
        pt = policy_target_of(req->target);
        policy_check(req->policy, &who, &pt, &q, &v);
        if (!v.allowed) {
                ps_next(req);
                return;
        }
        r = jobs_find_socket(req, ps_socket_found);
        if (r != 0)
                ps_cut_short(req, r);
}

static void ps_on_room(Request *req, uint32_t revents) {
        (void)connection_watch_client(req->connection, 0, NULL);
        if (revents & (EPOLLHUP | EPOLLERR)) {
                /* nobody will read the rest: else its socket, ready for ever, woke the loop for
                 * nothing until the listing's deadline */
                request_reply_errno(req, -ECONNRESET, "the client went away during the listing");
                return;
        }
        ps_next(req);
}

static void ps_next(Request *req) {
        PsWork *work = req->work;

        /* the last probe is over: whatever ends the listing now, its record is about no one process */
        request_set_target(req, NULL);
        /* a client that reads slowly slows the listing down; one that does not read stops it */
        if (connection_flush(req->connection) > PS_QUEUE_HIGH) {
                int r = connection_watch_client(req->connection, EPOLLOUT, ps_on_room);
                if (r < 0)
                        request_reply_errno(req, r, "cannot wait for the client");
                else
                        test_hook_note("listing waits for its client to read");
                return;
        }
        if (work->next < work->n) {
                int r = jobs_open_target(req, work->pids[work->next++], false, ps_opened);
                if (r != 0)
                        ps_cut_short(req, r);
                return;
        }
        req->audit.have_result_count = true;
        req->audit.result_count = work->count;
        request_reply_done(req, NULL, "listed the processes the requester may act on");
}

/* Runtimes that connected in on a port may have no socket the candidates' search finds: they are added. */
/* Only those of users the requester could see at all: each costs a worker's look. */
static size_t ps_add_port_runtimes(Request *req, pid_t *pids, size_t n, size_t max) {
        PolicyRequester who = requester_of(req);
        pid_t port_pids[PS_PORT_RUNTIMES_MAX];
        uid_t uids[PS_VISIBLE_UIDS_MAX];
        size_t n_uids = 0, n_port;
        bool anybody;

        anybody = policy_visible_uids(req->policy, &who, uids, PS_VISIBLE_UIDS_MAX, &n_uids);
        n_port = ports_list_pids(req->broker->ports, anybody ? NULL : uids, n_uids, port_pids, PS_PORT_RUNTIMES_MAX);

        for (size_t i = 0; i < n_port && n < max; i++) {
                bool listed = false;

                for (size_t j = 0; j < n && !listed; j++)
                        listed = pids[j] == port_pids[i];
                if (!listed)
                        pids[n++] = port_pids[i];
        }
        return n;
}

static void ps_candidates_found(Request *req, int r, const pid_t *pids, size_t n) {
        PsWork *work = req->work;

        work->waiter = NULL; /* freed before this callback */
        if (r != 0) {
                reply_job_error(req, r, NULL);
                return;
        }
        work->pids = malloc((n + PS_PORT_RUNTIMES_MAX) * sizeof(pid_t));
        if (!work->pids) {
                request_reply_errno(req, -ENOMEM, "cannot serve the request");
                return;
        }
        if (n > 0)
                memcpy(work->pids, pids, n * sizeof(pid_t));
        work->n = ps_add_port_runtimes(req, work->pids, n, n + PS_PORT_RUNTIMES_MAX);
        req->job_timeout_usec = PS_PROBE_TIMEOUT_USEC;
        ps_next(req);
}

static void ps_walk(Request *req) {
        PsWork *work = req->work;
        int r = candidate_walks_join(req->broker->walks, req, ps_candidates_found, &work->waiter);

        if (r != 0)
                reply_job_error(req, r, NULL);
}

static void ps_names_resolved(Request *req, int r, const char *why) {
        ps_walk(req); /* without them if need be: a record leaves out a name it does not hold */
}

/*
 * The names for the record are looked up in a job of the requester's own, not in the shared walk:
 * NSS may wait on a directory service, and that wait is this request's alone.
 */
static void ps_resolve_names(Request *req) {
        int r;

        if (audit_names_known(req->peer->uid, req->peer->gid, (uid_t)-1)) {
                ps_walk(req);
                return;
        }
        r = jobs_resolve_names(req, ps_names_resolved);
        if (r != 0)
                reply_job_error(req, r, NULL);
}

static void ps_list(Request *req) {
        PsWork *work = calloc(1, sizeof(*work));
        char what[64];

        if (!work) {
                request_reply_errno(req, -ENOMEM, "cannot serve the request");
                return;
        }
        work->request = req;
        req->work = work;
        req->work_free = ps_work_free;
        /* the whole listing gets the reply's deadline */
        snprintf(what, sizeof(what), "the agent's deadline for a listing (%llu s)",
                 (unsigned long long)(req->broker->config.reply_timeout_usec / 1000000));
        (void)commands_set_deadline(req, req->broker->config.reply_timeout_usec, what);
        ps_resolve_names(req);
}

static void ps_after_pam(int result, const char *message, void *userdata) {
        Request *req = userdata;

        req->pam_query = NULL;
        if (result != 0) {
                request_reply_error(req, AUDIT_DECISION_DENIED, WIRE_ERROR_DENIED,
                                    message && *message ? message : "the PAM account check could not be made");
                return;
        }
        ps_list(req);
}

/* A listing is decided per process, but the requester's PAM account check once. */
static void ps_start(Request *req) {
        const char *service = req->policy->agent.pam_service;
        int r;

        if (!service) {
                ps_list(req);
                return;
        }
        r = req->broker->pam ? pam_checker_query(req->broker->pam, service, req->peer->uid, ps_after_pam, req,
                                                 &req->pam_query)
                             : PAM_CHECK_E_UNAVAILABLE;
        if (r != 0)
                ps_after_pam(PAM_CHECK_E_UNAVAILABLE, NULL, req);
}

/* The command a request's audit record names; NULL for what is no request. */
static const char *command_name(uint16_t type) {
        switch (type) {
        case WIRE_REQUEST_PS: return policy_command_to_string(POLICY_COMMAND_PS);
        case WIRE_REQUEST_INFO: return policy_command_to_string(POLICY_COMMAND_INFO);
        case WIRE_REQUEST_ENV: return policy_command_to_string(POLICY_COMMAND_ENV);
        case WIRE_REQUEST_EXPLAIN: return "explain";
        case WIRE_REQUEST_DUMP: return policy_command_to_string(POLICY_COMMAND_DUMP);
        case WIRE_REQUEST_DUMPS: return "dumps";
        case WIRE_REQUEST_TRACE: return policy_command_to_string(POLICY_COMMAND_TRACE);
        case WIRE_REQUEST_COUNTERS: return policy_command_to_string(POLICY_COMMAND_COUNTERS);
        case WIRE_REQUEST_STACKS: return policy_command_to_string(POLICY_COMMAND_STACKS);
        case WIRE_REQUEST_GCDUMP: return policy_command_to_string(POLICY_COMMAND_GCDUMP);
        case WIRE_REQUEST_EXCEPTIONS: return policy_command_to_string(POLICY_COMMAND_EXCEPTIONS);
        case WIRE_REQUEST_LOGS: return policy_command_to_string(POLICY_COMMAND_LOGS);
        case WIRE_REQUEST_RESUME: return policy_command_to_string(POLICY_COMMAND_RESUME);
        case WIRE_REQUEST_REMOVE_DUMP: return "remove-dump";
        case WIRE_REQUEST_IPC: return "proxy"; /* until its IPC command is known */
        default: return NULL;
        }
}

void commands_dispatch(Request *req, const WireMessage *m) {
        req->audit.command = command_name(m->type);
        /* before anything is looked at: while the policy files are broken, only root is served */
        if (broker_policy_refuses(req->broker, req->peer->uid)) {
                request_reply_policy_broken(req);
                return;
        }
        announce_first_deadline(req, m);
        switch (m->type) {
        case WIRE_REQUEST_PS:
                ps_start(req);
                break;
        case WIRE_REQUEST_INFO:
                commands_open_target(req, m, info_opened);
                break;
        case WIRE_REQUEST_ENV:
                env_start(req, m);
                break;
        case WIRE_REQUEST_EXPLAIN:
                explain_start(req, m);
                break;
        case WIRE_REQUEST_DUMP:
                dump_start(req, m);
                break;
        case WIRE_REQUEST_DUMPS:
                dumps_list(req);
                break;
        case WIRE_REQUEST_TRACE:
                session_start_trace(req, m);
                break;
        case WIRE_REQUEST_COUNTERS:
                session_start_counters(req, m);
                break;
        case WIRE_REQUEST_STACKS:
                session_start_stacks(req, m);
                break;
        case WIRE_REQUEST_GCDUMP:
                session_start_gcdump(req, m);
                break;
        case WIRE_REQUEST_EXCEPTIONS:
                session_start_exceptions(req, m);
                break;
        case WIRE_REQUEST_LOGS:
                session_start_logs(req, m);
                break;
        case WIRE_REQUEST_REMOVE_DUMP:
                dumps_remove(req, m);
                break;
        case WIRE_REQUEST_IPC:
                proxy_start(req, m);
                break;
        case WIRE_REQUEST_RESUME:
                resume_start(req, m);
                break;
        default:
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "not a request");
                break;
        }
}
