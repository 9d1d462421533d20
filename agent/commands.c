/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The commands a client asks for (commands.h): the dispatcher, and ps, info and explain, on the steps
 * of command-steps.h; connection.c calls it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "broker-state.h"
#include "candidate-walk.h"
#include "cleanup.h"
#include "command-steps.h"
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
#include "test-hooks.h"

/* A listing's probe of one process gets this long: one stuck process must not hold up the rest. */
#define PS_PROBE_TIMEOUT_USEC (2 * 1000000ULL)
/* Past this much queued for a client, a listing waits until the client has read some. */
#define PS_QUEUE_HIGH (64 * 1024)
/* Runtimes that connected in and that a listing adds: as many as the agent registers (ports.h). */
#define PS_PORT_RUNTIMES_MAX PORTS_RUNTIMES_MAX
#define PS_VISIBLE_UIDS_MAX 256

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
                commands_reply_job_error(req, r, NULL);
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
                commands_reply_job_error(req, r, NULL);
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
                commands_reply_job_error(req, r, NULL);
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
                commands_reply_job_error(req, r, NULL);
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
        commands_announce_first_deadline(req, m);
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
