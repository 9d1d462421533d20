/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The info command (info.h): the runtime's ProcessInfo of one process, decided under policy;
 * commands.c dispatches to it.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/cleanup.h"
#include "agent/runtime/command-steps.h"
#include "agent/loop/connection.h"
#include "agent/decide/decision.h"
#include "common/dotnet-ipc.h"
#include "agent/runtime/info.h"
#include "policy/policy.h"
#include "agent/runtime/runtime-call.h"
#include "agent/support/test-hooks.h"

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
                request_reply_oom(req);
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
                request_reply_oom(req);
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

void info_start(Request *req, const WireMessage *m) {
        commands_open_target(req, m, info_opened);
}
