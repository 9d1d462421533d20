/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The diagnostic-port proxy's agent side (proxy.h): decodes one IPC request of a stock tool,
 * decides it as its command and answers in the runtime's encoding; commands.c dispatches to it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/loop/broker-state.h"
#include "common/cleanup.h"
#include "agent/runtime/command-steps.h"
#include "agent/decide/decision.h"
#include "common/dotnet-ipc.h"
#include "agent/dumps/dump.h"
#include "agent/runtime/env.h"
#include "policy/ipc-policy.h"
#include "common/ipc-request.h"
#include "agent/runtime/proxy.h"
#include "agent/runtime/runtime-call.h"
#include "agent/runtime/session.h"
#include "agent/ports/startup.h"
#include "common/text.h"
#include "common/unaligned.h"

/*
 * The most of a runtime's environment block relayed to a tool. The frames
 * that carry it are queued whole, and a connection queues at most 256 KiB.
 */
#define PROXY_ENVIRONMENT_MAX (192u * 1024u)
#define PROXY_CHUNK_MAX (WIRE_IPC_MESSAGE_MAX - 64u)

/* One call to the runtime for a tool: the request as the agent encoded it, and its answer. */
typedef struct ProxyWork {
        Request *request;
        DotnetIpcCommand command;
        uint8_t message[DOTNET_IPC_MESSAGE_MAX];
        size_t message_size;
        RuntimeCall *call;
        bool name_for_command_line; /* ProcessInfo under a grant of another command, not of info */
        char info_denied[sizeof(((PolicyVerdict *)0)->reason)]; /* why info was refused */
        /* ProcessEnvironment: the block that follows the OK reply, and the names it returned */
        EnvReader env;
        AuditEnvNames env_names;
} ProxyWork;

static void proxy_work_free(void *p) {
        ProxyWork *work = p;

        if (!work)
                return;
        runtime_call_free(work->call);
        audit_env_names_done(&work->env_names);
        free(work);
}

/* Queues @size bytes for the tool, in frames of at most PROXY_CHUNK_MAX. Return: 0 or a negative errno. */
static int proxy_queue_bytes(Request *req, const uint8_t *bytes, size_t size) {
        _cleanup_free_ WireWriter *w = malloc(sizeof(*w));

        if (!w)
                return -ENOMEM;
        do {
                size_t n = size < PROXY_CHUNK_MAX ? size : PROXY_CHUNK_MAX;
                int r;

                wire_writer_begin(w, WIRE_REPLY_IPC);
                wire_writer_put_bytes(w, WIRE_TAG_IPC_MESSAGE, bytes, n);
                r = connection_queue_frame(req->connection, w);
                if (r < 0)
                        return r;
                bytes += n;
                size -= n;
        } while (size > 0);
        return 0;
}

/* The runtime's OK reply, its header encoded here, its payload checked by the caller. */
static int proxy_queue_ok(Request *req, const DotnetIpcResponse *reply) {
        uint8_t buf[DOTNET_IPC_MESSAGE_MAX];
        size_t size;
        int r;

        r = ipc_request_reply_ok_encode(reply->payload, reply->payload_size, buf, sizeof(buf), &size);
        if (r != 0)
                return r < 0 ? r : -EMSGSIZE;
        return proxy_queue_bytes(req, buf, size);
}

static void proxy_relayed(Request *req) {
        request_reply_done(req, req->verdict.rule_name, "the runtime answered the tool's request");
}

/* What a tool is shown of a value env withholds (policy_env_value_hidden()). */
static char proxy_redacted_value[] = "<redacted>";

/*
 * ProcessEnvironment's answer for the tool: the OK reply with the block's size, then the
 * block. Values the requester may not see are replaced as env withholds them, and the block
 * encoded again; otherwise it goes as the runtime sent it.
 */
static void proxy_environment_read(Request *req, const uint8_t *block, size_t size, const DotnetEnvironment *env) {
        _cleanup_free_ DotnetEnvVariable *shown = calloc(env->n > 0 ? env->n : 1, sizeof(DotnetEnvVariable));
        _cleanup_free_ uint8_t *redacted = NULL;
        ProxyWork *work = req->work;
        size_t check_budget = POLICY_ENV_CHECK_BUDGET;
        uint8_t payload[6];
        DotnetIpcResponse ok = { .ok = true, .payload = payload, .payload_size = sizeof(payload) };
        int r = shown ? 0 : -ENOMEM;

        for (size_t i = 0; r == 0 && i < env->n; i++) {
                bool hidden = policy_env_value_hidden(req->policy, &req->verdict, env->variables[i].name,
                                                      env->variables[i].value, &check_budget);

                shown[i] = env->variables[i];
                if (hidden)
                        shown[i].value = proxy_redacted_value;
                r = audit_env_names_add(&work->env_names, env->variables[i].name, hidden);
        }
        if (r == 0 && work->env_names.n_hidden > 0) {
                r = dotnet_environment_encode(shown, env->n, &redacted, &size);
                if (r == 0 && size > PROXY_ENVIRONMENT_MAX)
                        r = DOTNET_IPC_E_TOO_LARGE;
                if (r > 0) {
                        request_reply_error_hresult(req, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_FAILED,
                                                    DOTNET_IPC_HR_NOT_SUPPORTED,
                                                    "the environment, redacted, is larger than the proxy relays");
                        return;
                }
                block = redacted;
        }
        unaligned_write_le32(payload, (uint32_t)size);
        unaligned_write_le16(payload + 4, 0);
        if (r == 0)
                r = proxy_queue_ok(req, &ok);
        if (r == 0)
                r = proxy_queue_bytes(req, block, size);
        if (r < 0) {
                request_reply_errno(req, r, "cannot relay the environment");
                return;
        }
        req->audit.env = &work->env_names;
        proxy_relayed(req);
}

/* ProcessInfo's answer must be of the pinned process, as for info (info.c). */
static bool proxy_info_is_of_target(ProxyWork *work, const DotnetIpcResponse *reply) {
        _cleanup_(dotnet_process_info_done) DotnetProcessInfo info = DOTNET_PROCESS_INFO_NULL;

        return dotnet_process_info_decode(work->command, reply->payload, reply->payload_size, &info) == 0 &&
               info.pid == (uint64_t)target_ns_pid(work->request->target);
}

/*
 * ProcessInfo's answer with the process's name (as dsctl ps shows it, up to the first byte that
 * is not UTF-8) in place of the runtime's command line, which may carry secrets; the rest as the
 * runtime sent it. The command line is the first string, after ProcessInfo3's version (u32), the
 * pid (u64) and the cookie (16 bytes). The reply was decoded whole before
 * (proxy_info_is_of_target()).
 */
static void proxy_queue_info_named(Request *req, DotnetIpcCommand command, const DotnetIpcResponse *reply) {
        const char *name = req->target->name ? req->target->name : "";
        size_t at = (command == DOTNET_IPC_PROCESS_INFO3 ? 4 : 0) + 8 + 16, rest, name_size = 0;
        uint8_t payload[DOTNET_IPC_MESSAGE_MAX], encoded[4 + 2 * (TARGET_NAME_MAX + 1)];
        char shown[TARGET_NAME_MAX + 1];
        DotnetIpcResponse named = { .ok = true, .payload = payload };
        int r = -EBADMSG;

        snprintf(shown, sizeof(shown), "%.*s", (int)utf8_valid_prefix(name, strnlen(name, TARGET_NAME_MAX)), name);
        if (dotnet_ipc_string_encode(shown, encoded, sizeof(encoded), &name_size) != 0)
                r = -EINVAL; /* valid UTF-8 of at most TARGET_NAME_MAX bytes: it always fits */
        else if (reply->payload_size >= at + 4) {
                rest = at + 4 + 2 * (size_t)unaligned_read_le32(reply->payload + at);
                if (rest <= reply->payload_size && at + name_size + (reply->payload_size - rest) <= sizeof(payload)) {
                        memcpy(payload, reply->payload, at);
                        memcpy(payload + at, encoded, name_size);
                        memcpy(payload + at + name_size, reply->payload + rest, reply->payload_size - rest);
                        named.payload_size = at + name_size + reply->payload_size - rest;
                        r = proxy_queue_ok(req, &named);
                }
        }
        if (r < 0) {
                request_reply_errno(req, r, "cannot queue the reply");
                return;
        }
        request_reply_done(req, req->verdict.rule_name,
                           "the runtime answered ProcessInfo, relayed with the process's name in place of its command "
                           "line, under a grant of a command other than info");
}

static void proxy_call_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        ProxyWork *work = userdata;
        Request *req = work->request;
        int r;

        if (error != 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                    runtime_call_error_text(error));
                return;
        }
        if (!reply->ok) {
                /* the tool reads the runtime's own HRESULT: "unknown command" makes it fall back */
                request_reply_runtime_error(req, reply->hresult, "the runtime refused the tool's request");
                return;
        }
        switch (work->command) {
        case DOTNET_IPC_PROCESS_ENVIRONMENT:
                env_read(&work->env, call, 0, reply);
                return;
        case DOTNET_IPC_PROCESS_INFO:
        case DOTNET_IPC_PROCESS_INFO2:
        case DOTNET_IPC_PROCESS_INFO3:
                if (!proxy_info_is_of_target(work, reply)) {
                        request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_SOCKET_UNTRUSTED,
                                            "the runtime's ProcessInfo is malformed or of another process");
                        return;
                }
                break;
        default:
                break;
        }
        if (work->name_for_command_line) {
                proxy_queue_info_named(req, work->command, reply);
                return;
        }
        r = proxy_queue_ok(req, reply);
        if (r < 0) {
                request_reply_errno(req, r, "cannot queue the reply");
                return;
        }
        proxy_relayed(req);
}

static void proxy_connected(Request *req, int fd) {
        ProxyWork *work = req->work;
        int r;

        r = runtime_call_start(req->broker->event, fd, work->message, work->message_size,
                               req->broker->config.runtime_timeout_usec, proxy_call_done, work, &work->call);
        if (r != 0)
                request_reply_errno(req, r < 0 ? r : -EINVAL, "cannot start the runtime call");
}

static void proxy_decided(Request *req) {
        req->audit.rule = req->verdict.rule_name;
        if (!req->verdict.allowed) {
                request_reply_error_hresult(req, AUDIT_DECISION_DENIED, WIRE_ERROR_DENIED, DOTNET_IPC_HR_ACCESS_DENIED,
                                            req->verdict.reason);
                return;
        }
        commands_connect_runtime(req, proxy_connected);
}

static void proxy_opened(Request *req) {
        decide(req, req->target, true, proxy_decided);
}

/* ---- ResumeRuntime ---- */

/*
 * dotnet-trace and dotnet-counters send ResumeRuntime after every session they start, whether
 * the runtime waits or not. To a runtime that runs it changes nothing (the runtime ignores it),
 * so it is answered OK without a grant of resume, and recorded as that no-op; the runtime is
 * not asked. A runtime suspended at startup, or one the agent cannot tell, still needs the grant.
 */
static void proxy_resume_probed(Request *req, StartupState state) {
        static const uint8_t hresult_ok[4] = {};
        DotnetIpcResponse ok = { .ok = true, .payload = hresult_ok, .payload_size = sizeof(hresult_ok) };
        int r;

        if (state != STARTUP_STARTED) {
                request_reply_error_hresult(req, AUDIT_DECISION_DENIED, WIRE_ERROR_DENIED, DOTNET_IPC_HR_ACCESS_DENIED,
                                            req->verdict.reason);
                return;
        }
        r = proxy_queue_ok(req, &ok);
        if (r < 0) {
                request_reply_errno(req, r, "cannot queue the reply");
                return;
        }
        request_reply_done(req, NULL, "the runtime is not suspended at startup: ResumeRuntime is a no-op, "
                                      "answered OK without asking the runtime or a grant of resume");
}

static void proxy_resume_decided(Request *req) {
        if (req->verdict.allowed) {
                proxy_decided(req);
                return;
        }
        req->audit.rule = req->verdict.rule_name;
        startup_probe(req, proxy_resume_probed);
}

static void proxy_resume_opened(Request *req) {
        decide(req, req->target, true, proxy_resume_decided);
}

/* ---- ProcessInfo ---- */

/*
 * Tools ask ProcessInfo for the runtime's version (dotnet-counters monitor, before its session)
 * and for the process's name (the client library's GetProcessInfo(), dotnet-monitor). Under a
 * grant of info it is relayed whole. Else under a grant of any command that reaches the runtime
 * (all but ps and info) it is relayed with the name dsctl ps shows in place of the command line:
 * a tool works under the grant of its own command alone, and shows the process by the name its
 * user finds in the listing. Under ps alone, or nothing, it is refused with info's reason.
 */
#define PROXY_INFO_NAMED_COMMANDS (POLICY_COMMANDS_LIVE & ~((1u << POLICY_COMMAND_PS) | (1u << POLICY_COMMAND_INFO)))

static void proxy_info_named_decided(Request *req) {
        ProxyWork *work = req->work;

        if (!req->verdict.allowed) {
                req->audit.rule = NULL;
                request_reply_error_hresult(req, AUDIT_DECISION_DENIED, WIRE_ERROR_DENIED, DOTNET_IPC_HR_ACCESS_DENIED,
                                            work->info_denied);
                return;
        }
        work->name_for_command_line = true;
        proxy_decided(req);
}

static void proxy_info_decided(Request *req) {
        ProxyWork *work = req->work;

        if (req->verdict.allowed) {
                proxy_decided(req);
                return;
        }
        snprintf(work->info_denied, sizeof(work->info_denied), "%s", req->verdict.reason);
        req->ask = (PolicyRequest){ .command = POLICY_COMMAND_INFO, .any_of = PROXY_INFO_NAMED_COMMANDS };
        decide(req, req->target, false, proxy_info_named_decided);
}

static void proxy_info_opened(Request *req) {
        decide(req, req->target, true, proxy_info_decided);
}

/* A command that is one call and one answer: ProcessInfo, environment, resume, perf maps, code injection. */
static void proxy_start_call(Request *req, const WireMessage *m, const IpcRequest *ipc) {
        ProxyWork *work = calloc(1, sizeof(*work));
        int r;

        if (!work) {
                request_reply_oom(req);
                return;
        }
        *work = (ProxyWork){ .request = req, .command = ipc->command,
                             .env = { .request = req, .max = PROXY_ENVIRONMENT_MAX, .for_tool = true,
                                      .done = proxy_environment_read } };
        req->work = work;
        req->work_free = proxy_work_free;
        r = ipc_request_encode(ipc, work->message, sizeof(work->message), &work->message_size);
        if (r == 0)
                r = ipc_policy_request(ipc, NULL, 0, &req->ask);
        if (r != 0) {
                request_reply_error_hresult(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                            ipc_request_error_hresult(r), "the tool's request cannot be encoded");
                return;
        }
        switch (ipc->command) {
        case DOTNET_IPC_RESUME_RUNTIME:
                commands_open_target(req, m, proxy_resume_opened);
                break;
        case DOTNET_IPC_PROCESS_INFO:
        case DOTNET_IPC_PROCESS_INFO2:
        case DOTNET_IPC_PROCESS_INFO3:
                commands_open_target(req, m, proxy_info_opened);
                break;
        default:
                commands_open_target(req, m, proxy_opened);
                break;
        }
}

static const char *proxy_decode_error(int r) {
        switch (r) {
        case IPC_REQUEST_E_UNKNOWN_COMMAND: return "the tool sent a command no runtime knows";
        case IPC_REQUEST_E_UNSUPPORTED: return "the tool sent a command the proxy does not carry";
        case IPC_REQUEST_E_OVERSIZED: return "the tool's request is too large";
        default: return "the tool's request is malformed";
        }
}

/* Dumps go through the agent's own staging; the tool's path is dsctl's to write, as the caller, from an fd
 * of the unnamed file: dump_dir keeps no copy the tool's user would not know of. */
static void proxy_start_dump(Request *req, const WireMessage *m, const IpcRequest *ipc) {
        if (ipc->command != DOTNET_IPC_GENERATE_CORE_DUMP &&
            (ipc->dump.flags & (IPC_REQUEST_DUMP_FLAG_CRASH_REPORT | IPC_REQUEST_DUMP_FLAG_CRASH_REPORT_ONLY))) {
                req->ask = (PolicyRequest){ .command = POLICY_COMMAND_DUMP,
                                            .dump_type = ipc_policy_dump_type(ipc->dump.type) };
                request_reply_error_hresult(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                            DOTNET_IPC_HR_NOT_SUPPORTED,
                                            "crash reports are not taken through the proxy");
                return;
        }
        dump_start_as(req, m, ipc_policy_dump_type(ipc->dump.type), DUMP_DELIVER_FD_ONLY);
}

void proxy_start(Request *req, const WireMessage *m) {
        _cleanup_(ipc_request_done) IpcRequest ipc = IPC_REQUEST_NULL;
        const DotnetIpcCommandInfo *info;
        const uint8_t *message;
        size_t size;
        int r;

        if (wire_message_get_bytes(m, WIRE_TAG_IPC_MESSAGE, &message, &size) != 0 || size > WIRE_IPC_MESSAGE_MAX) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "no IPC message");
                return;
        }
        r = ipc_request_decode(message, size, &ipc);
        if (r < 0) {
                request_reply_errno(req, r, "cannot decode the tool's request");
                return;
        }
        if (r > 0) {
                request_reply_error_hresult(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                            ipc_request_error_hresult(r), proxy_decode_error(r));
                return;
        }
        info = dotnet_ipc_command_lookup((uint8_t)(ipc.command >> 8), (uint8_t)(ipc.command & 0xFF));
        req->audit.ipc_command = info ? info->name : NULL;
        req->audit.command = policy_command_to_string(ipc_policy_command(ipc.command));

        switch (ipc.command) {
        case DOTNET_IPC_STOP_TRACING:
                request_reply_error_hresult(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                            DOTNET_IPC_HR_INVALID_ARG,
                                            "StopTracing ends a session of the same dsctl port, which answers it");
                break;
        case DOTNET_IPC_COLLECT_TRACING:
        case DOTNET_IPC_COLLECT_TRACING2:
        case DOTNET_IPC_COLLECT_TRACING3:
        case DOTNET_IPC_COLLECT_TRACING4:
        case DOTNET_IPC_COLLECT_TRACING5:
                session_start_proxy(req, m, &ipc);
                break;
        case DOTNET_IPC_GENERATE_CORE_DUMP:
        case DOTNET_IPC_GENERATE_CORE_DUMP2:
        case DOTNET_IPC_GENERATE_CORE_DUMP3:
                proxy_start_dump(req, m, &ipc);
                break;
        default:
                proxy_start_call(req, m, &ipc);
                break;
        }
}
