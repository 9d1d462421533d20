/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Runtimes suspended at startup (startup.h): telling one, what the agent answers for it, and the
 * resume command; commands, ports and sessions call it.
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
#include "agent/ports/ports.h"
#include "agent/targets/procfs.h"
#include "agent/runtime/runtime-call.h"
#include "agent/ports/startup.h"
#include "agent/support/test-hooks.h"

/*
 * One request's question to a runtime about its startup: the ProcessInfo
 * call, and where the answer goes. startup_probe() hands over the state;
 * startup_connect() the state and, when the runtime was not asked, the
 * socket it found (else -EBADF: commands_connect_again()).
 */
struct StartupProbe {
        RuntimeCall *call;      /* ProcessInfo; then resume's ResumeRuntime */
        StartupState state;     /* the answer, once there */
        void (*probed)(Request *req, StartupState state);
        void (*ready)(Request *req, StartupState state, int fd);
        /* startup_connect_runtime(): the caller's next step, and what it wants */
        void (*connected)(Request *req, int fd);
        const char *what;
        /* resume: the ports it went through so far, for the answer ("" until one) */
        char resumed_ports[512];
        unsigned n_resumed_ports;
};

/* Frees a request's probe (request_cancel_work()); NULL is fine. Return: NULL. */
static StartupProbe *startup_probe_free(StartupProbe *p) {
        if (p)
                runtime_call_free(p->call);
        free(p);
        return NULL;
}

static StartupProbe *probe_of(Request *req) {
        if (!req->startup) {
                req->startup = calloc(1, sizeof(StartupProbe));
                req->startup_free = startup_probe_free;
        }
        return req->startup;
}

/* A runtime that connected in on a port of the agent's waits for a resume dsctl resume sends there. */
static StartupState state_of(Request *req, const DotnetProcessInfo *info) {
        const Target *t = req->target;

        if (!procfs_command_line_is_exe(info->command_line, t->exe))
                return STARTUP_STARTED;
        if ((t->startup_suspend & PROCFS_SUSPEND_DEFAULT_PORT) || ports_find(req->broker->ports, t))
                return STARTUP_SUSPENDED;
        return STARTUP_SUSPENDED_PORTS;
}

static void probe_answered(Request *req, StartupState state) {
        StartupProbe *p = req->startup;

        p->state = state;
        if (p->ready)
                p->ready(req, state, -EBADF);
        else
                p->probed(req, state);
}

/* Answers a call that got no reply (@error), or whose reply is the runtime's refusal. Return: whether it did. */
static bool reply_call_failed(Request *req, int error, const DotnetIpcResponse *reply, const char *refused) {
        if (error != 0)
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                    runtime_call_error_text(error));
        else if (!reply->ok)
                request_reply_runtime_error(req, reply->hresult, refused);
        return error != 0 || !reply->ok;
}

static void probe_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        _cleanup_(dotnet_process_info_done) DotnetProcessInfo info = DOTNET_PROCESS_INFO_NULL;
        Request *req = userdata;
        StartupProbe *p = req->startup;

        if (reply_call_failed(req, error, reply, "the runtime refused ProcessInfo"))
                return;
        if (dotnet_process_info_decode(DOTNET_IPC_PROCESS_INFO, reply->payload, reply->payload_size, &info) != 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                    "the runtime sent a malformed ProcessInfo reply");
                return;
        }
        if (info.pid != (uint64_t)target_ns_pid(req->target)) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_SOCKET_UNTRUSTED,
                                    "the runtime reported another process id");
                return;
        }
        p->call = runtime_call_free(call);
        probe_answered(req, state_of(req, &info));
}

/* Asks the runtime on @fd (taken); a runtime whose environment pauses nothing is not asked, and @fd is ready's. */
static void probe_on(Request *req, int fd) {
        StartupProbe *p = req->startup;

        if (!req->target->startup_suspend) {
                p->state = STARTUP_STARTED;
                p->ready(req, STARTUP_STARTED, fd); /* startup_probe() does not get here */
                return;
        }
        commands_call_runtime(req, fd, DOTNET_IPC_PROCESS_INFO, probe_done, req, &p->call);
}

/*
 * A runtime that connected in on a port told the agent at once, on its first
 * connection: it waits until ResumeRuntime comes through that port. Return:
 * whether it did, with its state.
 */
static bool port_state(Request *req, StartupState *ret) {
        PortRuntime *rt = ports_find(req->broker->ports, req->target);

        if (!rt || !port_runtime_settled(rt))
                return false; /* the probe below tells, as for any runtime */
        *ret = port_runtime_waits(rt) ? STARTUP_SUSPENDED : STARTUP_STARTED;
        return true;
}

void startup_probe(Request *req, void (*probed)(Request *req, StartupState state)) {
        StartupProbe *p;
        StartupState state;

        if (port_state(req, &state)) {
                probed(req, state);
                return;
        }
        if (!req->target->startup_suspend) {
                probed(req, STARTUP_STARTED);
                return;
        }
        p = probe_of(req);
        if (!p) {
                request_reply_oom(req);
                return;
        }
        *p = (StartupProbe){ .probed = probed };
        commands_connect_again(req, probe_on);
}

/*
 * Finds req->target's runtime socket, learns whether the runtime is suspended at startup,
 * and hands @ready the state, and the connection to the runtime when it was not asked
 * (else -EBADF). Failures are answered here.
 */
static void startup_connect(Request *req, void (*ready)(Request *req, StartupState state, int fd)) {
        StartupProbe *p = probe_of(req);

        if (!p) {
                request_reply_oom(req);
                return;
        }
        p->ready = ready;
        if (port_state(req, &p->state)) {
                ready(req, p->state, -EBADF);
                return;
        }
        commands_connect_runtime(req, probe_on);
}

void startup_reply_suspended(Request *req, StartupState state, const char *what) {
        char why[256];

        if (state == STARTUP_SUSPENDED_PORTS)
                snprintf(why, sizeof(why), "the runtime waits for the tools of DOTNET_DiagnosticPorts to resume it, "
                         "and %s cannot be had before; dsctl resume does not serve those ports", what);
        else
                snprintf(why, sizeof(why), "the runtime waits to be resumed, and %s cannot be had before; "
                         "dsctl resume %d", what, (int)req->target->pid);
        request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_SUSPENDED, why);
}

static void connect_ready(Request *req, StartupState state, int fd) {
        StartupProbe *p = req->startup;

        if (state != STARTUP_STARTED) {
                safe_close(fd);
                startup_reply_suspended(req, state, p->what);
                return;
        }
        if (fd < 0)
                commands_connect_again(req, p->connected);
        else
                p->connected(req, fd);
}

void startup_connect_runtime(Request *req, const char *what, void (*connected)(Request *req, int fd)) {
        StartupProbe *p = probe_of(req);

        if (!p) {
                request_reply_oom(req);
                return;
        }
        *p = (StartupProbe){ .connected = connected, .what = what };
        startup_connect(req, connect_ready);
}

/* ---- resume ---- */

/* The answer: the process, and in MESSAGE what the resume did. */
static void resume_reply(Request *req, const char *what) {
        _cleanup_free_ WireWriter *w = malloc(sizeof(*w));
        const Target *t = req->target;
        int r;

        if (!w) {
                request_reply_oom(req);
                return;
        }
        wire_writer_begin(w, WIRE_REPLY_PROCESS);
        commands_put_target_fields(w, t);
        commands_put_untrusted_string(w, WIRE_TAG_NAME, t->name);
        wire_writer_put_string(w, WIRE_TAG_MESSAGE, what);
        r = connection_queue_frame(req->connection, w);
        if (r < 0) {
                request_reply_errno(req, r, "cannot queue the reply");
                return;
        }
        request_reply_done(req, req->verdict.rule_name, what);
}

static void resume_send(Request *req, int fd);

static void resume_note_port(StartupProbe *p, const char *path) {
        size_t n = strlen(p->resumed_ports);

        snprintf(p->resumed_ports + n, sizeof(p->resumed_ports) - n, "%s%s", n > 0 ? ", " : "", path);
        p->n_resumed_ports++;
}

static void resume_call_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        Request *req = userdata;
        StartupProbe *p = req->startup;

        PortRuntime *rt;
        char what[700];

        if (reply_call_failed(req, error, reply, "the runtime refused ResumeRuntime"))
                return;
        p->call = runtime_call_free(call);
        rt = ports_find(req->broker->ports, req->target);
        if (rt && (port_runtime_waits(rt) || p->state == STARTUP_SUSPENDED)) {
                port_runtime_resumed(rt);
                resume_note_port(p, port_runtime_path(rt));
                /* a runtime suspended on several ports starts only once each has resumed it */
                rt = ports_find(req->broker->ports, req->target);
                if (rt && port_runtime_waits(rt)) {
                        commands_connect_again(req, resume_send);
                        return;
                }
                snprintf(what, sizeof(what), "resumed through its diagnostic port%s %s: it was suspended at startup "
                         "and starts its managed code now", p->n_resumed_ports > 1 ? "s" : "",
                         p->resumed_ports);
                resume_reply(req, what);
        } else if (p->state == STARTUP_STARTED)
                resume_reply(req, "not suspended at startup: nothing to resume (the runtime ignores ResumeRuntime)");
        else if (req->target->startup_suspend & PROCFS_SUSPEND_PORTS)
                resume_reply(req, "resumed on its own socket; it starts once the tools of DOTNET_DiagnosticPorts "
                                  "resume it too");
        else
                resume_reply(req, "resumed: it was suspended at startup and starts its managed code now");
}

/* The probe's call is done: its slot carries this one. Through the port that waits, if one does. */
static void resume_send(Request *req, int fd) {
        commands_call_runtime(req, fd, DOTNET_IPC_RESUME_RUNTIME, resume_call_done, req, &req->startup->call);
}

/*
 * ResumeRuntime goes to every runtime the requester may resume: to one that
 * runs it changes nothing, and one the agent cannot tell is waiting (its
 * environment unread, its executable seen by another path) is resumed all
 * the same. Only a runtime that waits for its DOTNET_DiagnosticPorts tools
 * alone is not asked: the resume would not reach them.
 */
static void resume_ready(Request *req, StartupState state, int fd) {
        if (state == STARTUP_SUSPENDED_PORTS) {
                safe_close(fd);
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_SUSPENDED,
                                    "the runtime waits for the tools of DOTNET_DiagnosticPorts to resume it; "
                                    "dsctl resume does not serve those ports");
                return;
        }
        if (fd < 0)
                commands_connect_again(req, resume_send);
        else
                resume_send(req, fd);
}

static void resume_decided(Request *req) {
        req->audit.rule = req->verdict.rule_name;
        if (!req->verdict.allowed) {
                request_reply_error(req, AUDIT_DECISION_DENIED, WIRE_ERROR_DENIED, req->verdict.reason);
                return;
        }
        test_hook_pause("after-decision");
        startup_connect(req, resume_ready);
}

static void resume_opened(Request *req) {
        req->ask = (PolicyRequest){ .command = POLICY_COMMAND_RESUME };
        decide(req, req->target, true, resume_decided);
}

void resume_start(Request *req, const WireMessage *m) {
        commands_open_target(req, m, resume_opened);
}
