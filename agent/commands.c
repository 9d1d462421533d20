/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "cleanup.h"
#include "connection.h"
#include "commands.h"
#include "dotnet-ipc.h"
#include "decision.h"
#include "dump.h"
#include "pam-check.h"
#include "policy.h"
#include "runtime-call.h"
#include "session.h"
#include "test-hooks.h"
#include "text.h"

typedef struct InfoWork {
        Request *request;
        RuntimeCall *call;
        DotnetIpcCommand command;
        const char *rule;
} InfoWork;

static void put_target_fields(WireWriter *w, const Target *t);

void commands_reply_target_error(Request *req, int r, const char *why) {
        if (!why)
                why = r == TARGET_E_NO_SOCKET ? "no diagnostic socket found" : "the diagnostic socket failed verification";

        switch (r) {
        case TARGET_E_GONE:
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_NO_SUCH_PROCESS, REQUEST_NO_SUCH_PROCESS);
                break;
        case TARGET_E_NO_SOCKET:
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_NOT_DOTNET, why);
                break;
        case TARGET_E_SOCKET_UNTRUSTED:
        case TARGET_E_IMPOSTOR:
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_SOCKET_UNTRUSTED, why);
                break;
        case TARGET_E_UNREACHABLE:
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE, why);
                break;
        case TARGET_E_UNSAFE_FS:
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_UNSAFE_FS, why);
                break;
        default:
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, strerror(-r));
                break;
        }
}

static void put_target_fields(WireWriter *w, const Target *t) {
        wire_writer_put_u32(w, WIRE_TAG_PID, (uint32_t)t->pid);
        wire_writer_put_u32(w, WIRE_TAG_UID, target_euid(t));
        wire_writer_put_string(w, WIRE_TAG_UNIT, t->unit);
        wire_writer_put_string(w, WIRE_TAG_EXE, t->exe);
}

/* Strings the agent only passes along are checked here once, so an odd
 * command line from a target can only shorten a field, never fail a reply. */
static void put_untrusted_string(WireWriter *w, WireTag tag, const char *s) {
        char buf[WIRE_STRING_MAX + 1];
        size_t len;

        if (!s)
                return;
        len = strlen(s);
        if (len <= WIRE_STRING_MAX && utf8_is_valid(s, len)) {
                wire_writer_put_string(w, tag, s);
                return;
        }
        len = len > WIRE_STRING_MAX ? WIRE_STRING_MAX : len;
        while (len > 0 && !utf8_is_valid(s, len))
                len--;
        memcpy(buf, s, len);
        buf[len] = '\0';
        wire_writer_put_string(w, tag, buf);
}

static void ps_run(Request *req) {
        PolicyRequester who = requester_of(req);
        PolicyRequest q = { .command = POLICY_COMMAND_PS };
        _cleanup_free_ WireWriter *w = NULL;
        unsigned count = 0;
        struct dirent *de;
        DIR *proc;
        int r = 0;

        w = malloc(sizeof(*w));
        proc = opendir("/proc");
        if (!w || !proc) {
                if (proc)
                        closedir(proc);
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "cannot list processes");
                return;
        }

        while (r >= 0 && (de = readdir(proc))) {
                _cleanup_(target_freep) Target *t = NULL;
                _cleanup_close_ int socket_fd = -EBADF;
                const char *why;
                PolicyTarget pt;
                PolicyVerdict v;
                pid_t pid;

                /* listing is not rate limited: it shows what may be done, it does nothing */
                if (parse_pid(de->d_name, &pid) < 0 || target_open(pid, &t) != 0 || target_read_details(t) != 0)
                        continue;
                pt = policy_target_of(t);
                policy_check(req->policy, &who, &pt, &q, &v);
                if (!v.allowed || target_open_socket(t, &socket_fd, &why) != 0)
                        continue;

                wire_writer_begin(w, WIRE_REPLY_PROCESS);
                put_target_fields(w, t);
                put_untrusted_string(w, WIRE_TAG_NAME, t->name);
                r = connection_queue_frame(req->connection, w);
                count++;
        }
        closedir(proc);

        if (r < 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "listing too large");
                return;
        }
        req->audit.have_result_count = true;
        req->audit.result_count = count;
        request_reply_done(req, NULL, "listed the processes the requester may act on");
}

static void info_work_free(void *p) {
        InfoWork *work = p;

        if (!work)
                return;
        runtime_call_free(work->call);
        free(work);
}

static void info_call(InfoWork *work);

static void info_reply(InfoWork *work, const DotnetProcessInfo *info) {
        Request *req = work->request;
        _cleanup_free_ WireWriter *w = NULL;
        const Target *t = req->target;

        w = malloc(sizeof(*w));
        if (!w) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "out of memory");
                return;
        }
        wire_writer_begin(w, WIRE_REPLY_PROCESS);
        put_target_fields(w, t);
        put_untrusted_string(w, WIRE_TAG_NAME, info->entry_assembly ? info->entry_assembly : t->name);
        wire_writer_put_u64(w, WIRE_TAG_RUNTIME_PID, info->pid);
        wire_writer_put_bytes(w, WIRE_TAG_COOKIE, info->cookie, sizeof(info->cookie));
        put_untrusted_string(w, WIRE_TAG_COMMAND_LINE, info->command_line);
        put_untrusted_string(w, WIRE_TAG_OS, info->os);
        put_untrusted_string(w, WIRE_TAG_ARCH, info->arch);
        put_untrusted_string(w, WIRE_TAG_ENTRY_ASSEMBLY, info->entry_assembly);
        put_untrusted_string(w, WIRE_TAG_RUNTIME_VERSION, info->runtime_version);
        put_untrusted_string(w, WIRE_TAG_RUNTIME_ID, info->runtime_identifier);
        if (connection_queue_frame(req->connection, w) < 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "reply too large");
                return;
        }
        request_reply_done(req, work->rule, "process info read");
}

/* Older runtimes answer newer ProcessInfo versions with "unknown command". */
static DotnetIpcCommand process_info_fallback(DotnetIpcCommand command) {
        switch (command) {
        case DOTNET_IPC_PROCESS_INFO3: return DOTNET_IPC_PROCESS_INFO2;
        case DOTNET_IPC_PROCESS_INFO2: return DOTNET_IPC_PROCESS_INFO;
        default: return 0;
        }
}

static void info_call_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        _cleanup_(dotnet_process_info_done) DotnetProcessInfo info = DOTNET_PROCESS_INFO_NULL;
        InfoWork *work = userdata;
        Request *req = work->request;
        DotnetIpcCommand older;
        int r;

        if (error == RUNTIME_CALL_E_TIMEOUT) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                       "the runtime did not answer in time");
                return;
        }
        if (error != 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                       error == RUNTIME_CALL_E_MALFORMED ? "the runtime sent a malformed reply"
                                                                        : "the runtime closed the connection");
                return;
        }

        older = process_info_fallback(work->command);
        if (!reply->ok && reply->hresult == DOTNET_IPC_HR_UNKNOWN_COMMAND && older != 0) {
                work->call = runtime_call_free(work->call);
                work->command = older;
                info_call(work);
                return;
        }
        if (!reply->ok) {
                request_reply_runtime_error(req, reply->hresult, "the runtime refused ProcessInfo");
                return;
        }

        r = dotnet_process_info_decode(work->command, reply->payload, reply->payload_size, &info);
        if (r != 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                       "the runtime sent a malformed ProcessInfo reply");
                return;
        }
        if (info.pid != (uint64_t)target_ns_pid(req->target)) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_SOCKET_UNTRUSTED,
                                       "the runtime reported another process id");
                return;
        }
        info_reply(work, &info);
}

static void info_call(InfoWork *work) {
        Request *req = work->request;
        uint8_t request[DOTNET_IPC_HEADER_SIZE];
        const char *why = NULL;
        size_t size;
        int fd, r;

        r = target_connect(req->target, &fd, &why);
        if (r != 0) {
                request_reply_target_error(req, r, why);
                return;
        }
        r = dotnet_ipc_request_encode(work->command, NULL, 0, request, sizeof(request), &size);
        if (r == 0)
                r = runtime_call_start(req->broker->event, fd, request, size,
                                       req->broker->config.runtime_timeout_usec, info_call_done, work,
                                       &work->call);
        if (r != 0)
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "cannot start runtime call");
}

/* May the requester learn that @t exists? (policy_target_visible()) */
static bool requester_sees(const Request *req, const Target *t) {
        PolicyRequester who = requester_of(req);
        PolicyTarget pt = policy_target_of(t);

        return policy_target_visible(req->policy, &who, &pt);
}

/*
 * A unit's .NET process: the one process in the unit, of those the requester
 * may see, with a diagnostic socket. Processes it may not see count as
 * absent, so the answer tells nobody what runs in a unit that is not theirs.
 * Return: its pid, 0 when there is none, -1 when there are several.
 */
static pid_t unit_dotnet_pid(const Request *req, const char *unit) {
        struct dirent *de;
        pid_t found = 0;
        DIR *proc = opendir("/proc");

        while (proc && (de = readdir(proc))) {
                _cleanup_(target_freep) Target *t = NULL;
                _cleanup_close_ int socket_fd = -EBADF;
                const char *why;
                pid_t pid;

                if (parse_pid(de->d_name, &pid) < 0 || target_open(pid, &t) != 0 || target_read_details(t) != 0 ||
                    !t->unit || strcmp(t->unit, unit) != 0 || !requester_sees(req, t) ||
                    target_open_socket(t, &socket_fd, &why) != 0)
                        continue;
                if (found) {
                        found = -1;
                        break;
                }
                found = pid;
        }
        if (proc)
                closedir(proc);
        return found;
}

/* The PID field, or the .NET process of the UNIT field. Replies and returns 0 when neither works. */
static pid_t requested_pid(Request *req, const WireMessage *m) {
        _cleanup_free_ char *unit = NULL, *why = NULL;
        uint32_t pid;
        pid_t found;

        if (wire_message_get_u32(m, WIRE_TAG_PID, &pid) == 0 && pid > 0 && pid <= INT32_MAX)
                return (pid_t)pid;
        if (wire_message_get_string(m, WIRE_TAG_UNIT, &unit) != 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                       "a process id or a unit is needed");
                return 0;
        }
        found = unit_dotnet_pid(req, unit);
        if (found > 0)
                return found;
        if (asprintf(&why, found == 0 ? "no .NET process runs in %s" : "%s runs several .NET processes; name one by pid",
                     unit) < 0)
                why = NULL;
        request_reply_error(req, AUDIT_DECISION_FAILED, found == 0 ? WIRE_ERROR_NO_SUCH_PROCESS : WIRE_ERROR_BAD_REQUEST,
                               why ? why : "cannot resolve the unit");
        return 0;
}

/*
 * Pins the process the request names (by pid or unit) and reads what the
 * policy decides on. A process the requester may not see is answered
 * exactly as one that does not exist; its record still names it, for the
 * administrator. Replies and returns NULL when that fails.
 */
static Target *open_requested_target(Request *req, const WireMessage *m) {
        Target *t;
        pid_t pid;
        int r;

        pid = requested_pid(req, m);
        if (pid == 0)
                return NULL;
        r = target_open((pid_t)pid, &t);
        if (r == 0) {
                request_set_target(req, t);
                r = target_read_details(t);
        }
        if (r == 0 && !requester_sees(req, t)) {
                request_reply_invisible(req);
                return NULL;
        }
        if (r != 0) {
                req->audit.have_target = true;
                req->audit.target_pid = (pid_t)pid;
                req->audit.target_uid = req->target ? target_euid(req->target) : (uid_t)-1;
                request_reply_target_error(req, r, NULL);
                return NULL;
        }
        return t;
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
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "out of memory");
                return;
        }
        work->request = req;
        work->command = DOTNET_IPC_PROCESS_INFO3;
        work->rule = req->verdict.rule_name;
        req->work = work;
        req->work_free = info_work_free;
        info_call(work);
}

static void info_start(Request *req, const WireMessage *m) {
        Target *t = open_requested_target(req, m);

        if (!t)
                return;
        test_hook_pause("after-target");
        req->ask = (PolicyRequest){ .command = POLICY_COMMAND_INFO };
        decide(req, t, true, info_decided);
}

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
        _cleanup_free_ WireWriter *w = NULL;
        const PolicyVerdict *v = &req->verdict;
        char reason[256];

        w = malloc(sizeof(*w));
        if (!w) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "out of memory");
                return;
        }
        wire_writer_begin(w, WIRE_REPLY_VERDICT);
        wire_writer_put_u32(w, WIRE_TAG_ALLOWED, v->allowed);
        wire_writer_put_string(w, WIRE_TAG_COMMAND, policy_command_to_string(req->ask.command));
        wire_writer_put_string(w, WIRE_TAG_RULE, v->rule_name);
        wire_writer_put_string(w, WIRE_TAG_MESSAGE, v->reason);
        put_target_fields(w, req->target);
        if (connection_queue_frame(req->connection, w) < 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "reply too large");
                return;
        }
        snprintf(reason, sizeof(reason), "explained %s: %s (%s)", policy_command_to_string(req->ask.command),
                 v->allowed ? "would be allowed" : "would be denied", v->reason);
        request_reply_done(req, v->rule_name, reason);
}

/*
 * explain: would the caller be allowed, and by which rule or why not. The
 * answer speaks only of rules that name the caller, and asking does not use
 * up a rate limit.
 */
static void explain_run(Request *req, const WireMessage *m) {
        Target *t;

        if (!explain_request_of(req, m, &req->ask))
                return;
        if (wire_message_get_string(m, WIRE_TAG_TRACE_PROFILE, &req->trace_profile) < 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "out of memory");
                return;
        }
        req->ask.trace_profile = req->trace_profile;
        t = open_requested_target(req, m);
        if (!t)
                return;
        decide(req, t, false, explain_decided);
}

static void ps_after_pam(int result, const char *message, void *userdata) {
        Request *req = userdata;

        req->pam_query = NULL;
        if (result != 0) {
                request_reply_error(req, AUDIT_DECISION_DENIED, WIRE_ERROR_DENIED,
                                       message && *message ? message : "the PAM account check could not be made");
                return;
        }
        ps_run(req);
}

/* A listing is decided per process, but the requester's PAM account check once. */
static void ps_start(Request *req) {
        const char *service = req->policy->agent.pam_service;
        int r;

        if (!service) {
                ps_run(req);
                return;
        }
        r = req->broker->pam ? pam_checker_query(req->broker->pam, service, req->peer->uid, ps_after_pam, req, &req->pam_query)
                           : PAM_CHECK_E_UNAVAILABLE;
        if (r != 0)
                ps_after_pam(PAM_CHECK_E_UNAVAILABLE, NULL, req);
}

void commands_dispatch(Request *req, const WireMessage *m) {
        switch (m->type) {
        case WIRE_REQUEST_PS:
                req->audit.command = policy_command_to_string(POLICY_COMMAND_PS);
                ps_start(req);
                break;
        case WIRE_REQUEST_INFO:
                req->audit.command = policy_command_to_string(POLICY_COMMAND_INFO);
                info_start(req, m);
                break;
        case WIRE_REQUEST_EXPLAIN:
                req->audit.command = "explain";
                explain_run(req, m);
                break;
        case WIRE_REQUEST_DUMP: {
                Target *t;
                req->audit.command = policy_command_to_string(POLICY_COMMAND_DUMP);
                t = open_requested_target(req, m);
                if (t)
                        dump_start(req, m, t);
                break;
        }
        case WIRE_REQUEST_DUMPS:
                req->audit.command = "dumps";
                dumps_list(req);
                break;
        case WIRE_REQUEST_TRACE:
        case WIRE_REQUEST_COUNTERS: {
                bool trace = m->type == WIRE_REQUEST_TRACE;
                Target *t;
                req->audit.command = policy_command_to_string(trace ? POLICY_COMMAND_TRACE : POLICY_COMMAND_COUNTERS);
                t = open_requested_target(req, m);
                if (t && trace)
                        session_start_trace(req, m, t);
                else if (t)
                        session_start_counters(req, m, t);
                break;
        }
        default:
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "not a request");
                break;
        }
}
