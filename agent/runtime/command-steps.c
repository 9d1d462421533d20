/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The steps the commands about one process share (command-steps.h): pin the target, reach its
 * runtime, call it, move the deadline and tell the client; commands.c and every command module call them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/loop/broker-state.h"
#include "common/cleanup.h"
#include "agent/runtime/command-steps.h"
#include "agent/loop/connection.h"
#include "agent/decide/decision.h"
#include "common/dotnet-ipc.h"
#include "agent/workers/jobs.h"
#include "agent/ports/ports.h"
#include "policy/policy.h"
#include "agent/runtime/runtime-call.h"
#include "agent/targets/target-cache.h"
#include "agent/support/test-hooks.h"
#include "common/text.h"

void commands_put_egress(WireWriter *w, const PolicyEgress *egress) {
        char store[1024]; /* an endpoint of at most 280 bytes, a bucket of 63, a prefix of 256 */

        if (!egress)
                return;
        wire_writer_put_string(w, WIRE_TAG_EGRESS, egress->name);
        if (snprintf(store, sizeof(store), "%s/%s/%s", egress->endpoint, egress->bucket, egress->prefix ? egress->prefix : "") <
            (int)sizeof(store))
                wire_writer_put_string(w, WIRE_TAG_EGRESS_STORE, store);
}

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

void commands_announce_first_deadline(Request *req, const WireMessage *m) {
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

/* The socket's failures, whichever module found them: what the client is told. */
static void reply_socket_error(Request *req, uint32_t wire_error, const char *why) {
        request_reply_error(req, AUDIT_DECISION_FAILED, wire_error,
                            why ? why : "the diagnostic socket failed verification");
}

void commands_reply_job_error(Request *req, int r, const char *why) {
        switch (r) {
        case JOBS_E_TIMEOUT:
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                    "looking at the process did not finish in time: its files or its memory "
                                    "did not answer");
                break;
        case JOBS_E_WORKER:
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BUSY,
                                    "no worker could look at the process now; try again");
                break;
        case JOBS_E_GONE:
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_NO_SUCH_PROCESS, REQUEST_NO_SUCH_PROCESS);
                break;
        case JOBS_E_NO_SOCKET:
                reply_socket_error(req, WIRE_ERROR_NOT_DOTNET, why ? why : "no diagnostic socket found");
                break;
        case JOBS_E_SOCKET_UNTRUSTED:
        case JOBS_E_IMPOSTOR:
                reply_socket_error(req, WIRE_ERROR_SOCKET_UNTRUSTED, why);
                break;
        case JOBS_E_UNREACHABLE:
                reply_socket_error(req, WIRE_ERROR_RUNTIME_UNREACHABLE, why);
                break;
        case JOBS_E_UNSAFE_FS:
                reply_socket_error(req, WIRE_ERROR_UNSAFE_FS, why);
                break;
        default:
                request_reply_errno(req, r < 0 ? r : -EIO, "internal error looking at the process");
                break;
        }
}

void commands_reply_connect_error(Request *req, int r, const char *why) {
        switch (r) {
        case TARGET_E_GONE:
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_NO_SUCH_PROCESS, REQUEST_NO_SUCH_PROCESS);
                break;
        case TARGET_E_NO_SOCKET:
                reply_socket_error(req, WIRE_ERROR_NOT_DOTNET, why ? why : "no diagnostic socket found");
                break;
        case TARGET_E_SOCKET_UNTRUSTED:
        case TARGET_E_IMPOSTOR:
                reply_socket_error(req, WIRE_ERROR_SOCKET_UNTRUSTED, why);
                break;
        case TARGET_E_UNREACHABLE:
                reply_socket_error(req, WIRE_ERROR_RUNTIME_UNREACHABLE, why);
                break;
        case TARGET_E_UNSAFE_FS:
                reply_socket_error(req, WIRE_ERROR_UNSAFE_FS, why);
                break;
        default:
                request_reply_errno(req, r < 0 ? r : -EIO, "internal error looking at the process");
                break;
        }
}

/* ---- opening the target ---- */

/*
 * Whether the process opened is in the unit the request named, if it named one. A unit's pid is
 * found in one walk of /proc and opened after it: by then it may have exited and its pid gone to
 * a process elsewhere. And a pid named with its unit (dsctl exec UNIT) is served only while it
 * runs there: the unit's process the caller was told of, never a successor under its pid.
 */
static bool target_in_named_unit(const Request *req) {
        return !req->unit || (req->target->unit && strcmp(req->target->unit, req->unit) == 0);
}

static void target_opened(Request *req, int r, const char *why) {
        char missing[TARGET_UNIT_MAX + 64];

        if (r == 0 && !requester_sees(req, req->target)) {
                request_reply_invisible(req);
                return;
        }
        if (r != 0) {
                commands_reply_job_error(req, r, why);
                return;
        }
        if (!target_in_named_unit(req) && req->unit_pinned) {
                /* answered as the pid's absence, the same whether the caller may see the process or not */
                request_reply_error_as(req, AUDIT_DECISION_FAILED, WIRE_ERROR_NO_SUCH_PROCESS,
                                      "the process no longer runs in the unit the request named",
                                      REQUEST_NO_SUCH_PROCESS);
                return;
        }
        if (!target_in_named_unit(req)) {
                snprintf(missing, sizeof(missing), "no .NET process runs in %s", req->unit);
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_NO_SUCH_PROCESS, missing);
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
        return policy_selects_by_name_or_cgroup(req->policy) || req->ask.command == POLICY_COMMAND_DUMP ||
               req->unit != NULL;
}

static void read_pid(Request *req, pid_t pid) {
        int r = jobs_open_target(req, pid, true, target_read);

        if (r != 0)
                commands_reply_job_error(req, r, NULL);
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
                commands_reply_job_error(req, r, NULL);
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
                commands_reply_job_error(req, r, NULL);
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
        bool has_pid;
        int r;

        req->on_target = opened;
        has_pid = wire_message_get_u32(m, WIRE_TAG_PID, &pid) == 0 && pid > 0 && pid <= INT32_MAX;
        if (wire_message_get_string(m, WIRE_TAG_UNIT, &req->unit) != 0 && !has_pid) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "a process id or a unit is needed");
                return;
        }
        /* dsctl checks the very same (wire.h): what it sends passes */
        if (req->unit && !wire_unit_name_is_valid(req->unit, strlen(req->unit))) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                    "not a unit name (like orders.service)");
                return;
        }
        /* both: that pid, only while it runs in that unit (target_in_named_unit()) */
        if (has_pid) {
                req->unit_pinned = req->unit != NULL;
                open_pid(req, (pid_t)pid);
                return;
        }
        r = jobs_find_unit(req, req->unit, unit_found);
        if (r == -ENAMETOOLONG)
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "the unit's name is too long");
        else if (r != 0)
                commands_reply_job_error(req, r, NULL);
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
                        request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_NO_SUCH_PROCESS,
                                            REQUEST_NO_SUCH_PROCESS);
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
        req->port_waiter_cancel = ports_waiter_cancel;
        r = ports_connect(rt, port_connected, req, &fd, &req->port_waiter);
        if (r == 0)
                req->on_runtime(req, fd);
        else if (r < 0)
                request_reply_errno(req, r, "cannot wait for the runtime's connection");
        return true;
}

bool commands_port_serves(Request *req, int r) {
        switch (r) {
        case 0:
        case JOBS_E_NO_SOCKET:
        case JOBS_E_SOCKET_UNTRUSTED:
        case JOBS_E_IMPOSTOR:
        case JOBS_E_UNREACHABLE:
        case JOBS_E_UNSAFE_FS:
                return ports_find(req->broker->ports, req->target) != NULL;
        default:
                return false; /* gone, a lookup that did not finish, or the agent's own failure */
        }
}

static void socket_found(Request *req, int r, const char *why) {
        int fd;

        if (commands_port_serves(req, r)) {
                (void)connect_through_port(req);
                return;
        }
        if (r != 0) {
                commands_reply_job_error(req, r, why);
                return;
        }
        r = target_connect(req->target, &fd, &why);
        if (r != 0) {
                commands_reply_connect_error(req, r, why);
                return;
        }
        req->on_runtime(req, fd);
}

void commands_connect_runtime(Request *req, void (*connected)(Request *req, int fd)) {
        int r;

        if (!request_hold_audit(req))
                return;
        req->on_runtime = connected;
        r = jobs_find_socket(req, socket_found);
        if (r != 0)
                commands_reply_job_error(req, r, NULL);
}

void commands_connect_again(Request *req, void (*connected)(Request *req, int fd)) {
        const char *why = NULL;
        int fd, r;

        if (!request_hold_audit(req))
                return;
        req->on_runtime = connected;
        if (connect_through_port(req))
                return;
        r = target_connect(req->target, &fd, &why);
        if (r != 0) {
                commands_reply_connect_error(req, r, why);
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
