/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "commands.h"
#include "dotnet-ipc.h"
#include "policy.h"
#include "runtime-call.h"
#include "text.h"

typedef struct InfoWork {
        Connection *connection;
        RuntimeCall *call;
        DotnetIpcCommand command;
        const char *rule;
} InfoWork;

static PolicyRequester requester_of(const Connection *c) {
        return (PolicyRequester){
                .uid = c->peer.uid,
                .gid = c->peer.gid,
                .groups = c->peer.groups,
                .n_groups = c->peer.n_groups,
        };
}

static PolicyTarget policy_target_of(const Target *t) {
        PolicyTarget pt;

        memcpy(pt.uid, t->status.uid, sizeof(pt.uid));
        memcpy(pt.gid, t->status.gid, sizeof(pt.gid));
        return pt;
}

static void reply_target_error(Connection *c, int r, const char *why) {
        if (!why)
                why = r == TARGET_E_NO_SOCKET ? "no diagnostic socket found" : "the diagnostic socket failed verification";

        switch (r) {
        case TARGET_E_GONE:
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_NO_SUCH_PROCESS, "no such process");
                break;
        case TARGET_E_NO_SOCKET:
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_NOT_DOTNET, why);
                break;
        case TARGET_E_SOCKET_UNTRUSTED:
        case TARGET_E_IMPOSTOR:
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_SOCKET_UNTRUSTED, why);
                break;
        case TARGET_E_UNREACHABLE:
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE, why);
                break;
        default:
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, strerror(-r));
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

static void ps_run(Connection *c) {
        PolicyRequester who = requester_of(c);
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
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "cannot list processes");
                return;
        }

        while (r >= 0 && (de = readdir(proc))) {
                _cleanup_(target_freep) Target *t = NULL;
                _cleanup_close_ int socket_fd = -EBADF;
                const char *why;
                PolicyTarget pt;
                pid_t pid;

                if (parse_pid(de->d_name, &pid) < 0 || target_open(pid, &t) != 0)
                        continue;
                pt = policy_target_of(t);
                if (!policy_check(&who, POLICY_COMMAND_PS, &pt).allowed)
                        continue;
                if (target_read_details(t) != 0 || target_open_socket(t, &socket_fd, &why) != 0)
                        continue;

                wire_writer_begin(w, WIRE_REPLY_PROCESS);
                put_target_fields(w, t);
                put_untrusted_string(w, WIRE_TAG_NAME, t->name);
                r = connection_queue_frame(c, w);
                count++;
        }
        closedir(proc);

        if (r < 0) {
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "listing too large");
                return;
        }
        c->audit.have_result_count = true;
        c->audit.result_count = count;
        connection_reply_done(c, NULL, "listed the processes the requester may act on");
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
        Connection *c = work->connection;
        _cleanup_free_ WireWriter *w = NULL;
        const Target *t = c->target;

        w = malloc(sizeof(*w));
        if (!w) {
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "out of memory");
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
        if (connection_queue_frame(c, w) < 0) {
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "reply too large");
                return;
        }
        connection_reply_done(c, work->rule, "process info read");
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
        Connection *c = work->connection;
        DotnetIpcCommand older;
        int r;

        if (error == RUNTIME_CALL_E_TIMEOUT) {
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                       "the runtime did not answer in time");
                return;
        }
        if (error != 0) {
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
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
                connection_reply_runtime_error(c, reply->hresult, "the runtime refused ProcessInfo");
                return;
        }

        r = dotnet_process_info_decode(work->command, reply->payload, reply->payload_size, &info);
        if (r != 0) {
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                       "the runtime sent a malformed ProcessInfo reply");
                return;
        }
        if (info.pid != (uint64_t)target_ns_pid(c->target)) {
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_SOCKET_UNTRUSTED,
                                       "the runtime reported another process id");
                return;
        }
        info_reply(work, &info);
}

static void info_call(InfoWork *work) {
        Connection *c = work->connection;
        uint8_t request[DOTNET_IPC_HEADER_SIZE];
        const char *why = NULL;
        size_t size;
        int fd, r;

        r = target_connect(c->target, &fd, &why);
        if (r != 0) {
                reply_target_error(c, r, why);
                return;
        }
        r = dotnet_ipc_request_encode(work->command, NULL, 0, request, sizeof(request), &size);
        if (r == 0)
                r = runtime_call_start(c->broker->event, fd, request, size,
                                       c->broker->config.runtime_timeout_usec, info_call_done, work,
                                       &work->call);
        if (r != 0)
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "cannot start runtime call");
}

static void info_start(Connection *c, const WireMessage *m) {
        PolicyRequester who = requester_of(c);
        PolicyVerdict verdict;
        PolicyTarget pt;
        InfoWork *work;
        Target *t;
        uint32_t pid;
        int r;

        if (wire_message_get_u32(m, WIRE_TAG_PID, &pid) != 0 || pid == 0 || pid > INT32_MAX) {
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "info needs a process id");
                return;
        }

        r = target_open((pid_t)pid, &t);
        if (r != 0) {
                c->audit.have_target = true;
                c->audit.target_pid = (pid_t)pid;
                c->audit.target_uid = (uid_t)-1;
                reply_target_error(c, r, NULL);
                return;
        }
        connection_set_target(c, t);

        pt = policy_target_of(t);
        verdict = policy_check(&who, POLICY_COMMAND_INFO, &pt);
        if (!verdict.allowed) {
                connection_reply_error(c, AUDIT_DECISION_DENIED, WIRE_ERROR_DENIED, verdict.reason);
                return;
        }
        c->audit.rule = verdict.rule;

        r = target_read_details(t);
        if (r != 0) {
                reply_target_error(c, r, NULL);
                return;
        }

        work = calloc(1, sizeof(*work));
        if (!work) {
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "out of memory");
                return;
        }
        work->connection = c;
        work->command = DOTNET_IPC_PROCESS_INFO3;
        work->rule = verdict.rule;
        c->work = work;
        c->work_free = info_work_free;
        info_call(work);
}

void commands_dispatch(Connection *c, const WireMessage *m) {
        switch (m->type) {
        case WIRE_REQUEST_PS:
                c->audit.command = policy_command_to_string(POLICY_COMMAND_PS);
                ps_run(c);
                break;
        case WIRE_REQUEST_INFO:
                c->audit.command = policy_command_to_string(POLICY_COMMAND_INFO);
                info_start(c, m);
                break;
        default:
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "not a request");
                break;
        }
}
