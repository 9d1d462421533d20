/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The env command (env.h): asks the runtime for ProcessEnvironment and sends each variable,
 * redacted unless revealed; commands.c and proxy.c call it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/loop/broker-state.h"
#include "common/cleanup.h"
#include "agent/runtime/command-steps.h"
#include "agent/decide/decision.h"
#include "agent/runtime/env.h"

/*
 * The most of an environment block env reads. The variables go to the client in frames
 * queued whole, at most CONNECTION_OUT_MAX (256 KiB) of them, and UTF-16 takes twice the
 * bytes of the ASCII that most environments are: a larger block cannot fit one reply.
 */
#define ENV_BLOCK_MAX (2u * CONNECTION_OUT_MAX)
/* Kept free of the connection's queue for the DONE frame after the variables. */
#define ENV_REPLY_RESERVE 1024u

typedef struct EnvWork {
        EnvReader reader;
        RuntimeCall *call;
        AuditEnvNames names;
} EnvWork;

static void env_work_free(void *p) {
        EnvWork *work = p;

        if (!work)
                return;
        runtime_call_free(work->call);
        audit_env_names_done(&work->names);
        free(work);
}

/* An environment the agent does not carry: refused whole, never cut short. */
static void env_reply_too_large(EnvReader *r, const char *why) {
        if (r->for_tool)
                request_reply_error_hresult(r->request, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_FAILED,
                                            DOTNET_IPC_HR_NOT_SUPPORTED, why);
        else
                request_reply_error(r->request, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, why);
}

static void env_block_read(RuntimeCall *call, int error, const uint8_t *block, size_t size, void *userdata) {
        _cleanup_(dotnet_environment_done) DotnetEnvironment env = DOTNET_ENVIRONMENT_NULL;
        EnvReader *r = userdata;
        int k;

        if (error != 0) {
                request_reply_error(r->request, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                    error == RUNTIME_CALL_E_TIMEOUT
                                            ? "the runtime did not send the whole environment in time"
                                            : "the runtime closed the connection before the whole environment");
                return;
        }
        k = dotnet_environment_decode(block, size, &env);
        if (k < 0) {
                request_reply_errno(r->request, k, "cannot decode the environment");
                return;
        }
        if (k > 0) {
                request_reply_error(r->request, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                    "the runtime sent a malformed environment");
                return;
        }
        r->done(r->request, block, size, &env);
}

void env_read(EnvReader *r, RuntimeCall *call, int error, const DotnetIpcResponse *reply) {
        char why[128];
        uint32_t size;
        int k;

        if (error != 0) {
                request_reply_error(r->request, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                    runtime_call_error_text(error));
                return;
        }
        if (!reply->ok) {
                request_reply_runtime_error(r->request, reply->hresult, "the runtime refused ProcessEnvironment");
                return;
        }
        k = dotnet_ipc_environment_size_decode(reply, &size);
        if (k == DOTNET_IPC_E_MALFORMED) {
                request_reply_error(r->request, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                    "the runtime sent a malformed environment reply");
                return;
        }
        if (k == DOTNET_IPC_E_TOO_LARGE) {
                /* no size was decoded: what the runtime announced is past any process's environment */
                request_reply_error(r->request, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                    "the runtime announced an environment larger than any process has (over 4 MiB)");
                return;
        }
        if (k != 0 || size > r->max) {
                if (r->for_tool)
                        snprintf(why, sizeof(why), "the environment is larger than the proxy relays (%zu KiB)",
                                 r->max / 1024);
                else
                        snprintf(why, sizeof(why), "the environment (%" PRIu32 " bytes from the runtime) is larger "
                                 "than one reply carries (%u KiB)", size, CONNECTION_OUT_MAX / 1024);
                env_reply_too_large(r, why);
                return;
        }
        k = runtime_call_read_block(call, size, env_block_read, r);
        if (k < 0)
                request_reply_errno(r->request, k, "cannot read the environment");
}

/* One WIRE_REPLY_ENV: the name, and the value or REDACTED. Return: 0, 1 when the reply is full, -errno. */
static int env_queue_variable(Request *req, WireWriter *w, const DotnetEnvVariable *v, bool hidden) {
        Connection *c = req->connection;

        wire_writer_begin(w, WIRE_REPLY_ENV);
        wire_writer_put_string(w, WIRE_TAG_ENV_NAME, v->name);
        if (hidden)
                wire_writer_put_u32(w, WIRE_TAG_REDACTED, 1);
        else
                wire_writer_put_string(w, WIRE_TAG_ENV_VALUE, v->value); /* sent even when empty */
        if (w->error == WIRE_E_FULL || c->out_size + w->size > CONNECTION_OUT_MAX - ENV_REPLY_RESERVE)
                return 1;
        return connection_queue_frame(c, w);
}

static void env_variables_read(Request *req, const uint8_t *block, size_t size, const DotnetEnvironment *env) {
        _cleanup_free_ WireWriter *w = malloc(sizeof(*w));
        EnvWork *work = req->work;
        size_t check_budget = POLICY_ENV_CHECK_BUDGET;
        char why[160];
        int r;

        if (!w) {
                request_reply_oom(req);
                return;
        }
        for (size_t i = 0; i < env->n; i++) {
                const DotnetEnvVariable *v = &env->variables[i];
                bool hidden = policy_env_value_hidden(req->policy, &req->verdict, v->name, v->value, &check_budget);

                /* a string the protocol cannot carry whole is not cut either */
                if (strlen(v->name) > WIRE_STRING_MAX || (!hidden && strlen(v->value) > WIRE_STRING_MAX)) {
                        snprintf(why, sizeof(why),
                                 "variable %zu of %zu has a name or value longer than a reply carries (%u KiB)",
                                 i + 1, env->n, WIRE_STRING_MAX / 1024);
                        env_reply_too_large(&work->reader, why);
                        return;
                }
                r = env_queue_variable(req, w, v, hidden);
                if (r > 0) {
                        snprintf(why, sizeof(why),
                                 "the environment (%zu variables, %zu bytes from the runtime) is larger than one "
                                 "reply carries (%u KiB)", env->n, size, CONNECTION_OUT_MAX / 1024);
                        env_reply_too_large(&work->reader, why);
                        return;
                }
                if (r == 0)
                        r = audit_env_names_add(&work->names, v->name, hidden);
                if (r < 0) {
                        request_reply_errno(req, r, "cannot queue the reply");
                        return;
                }
        }
        req->audit.env = &work->names;
        snprintf(why, sizeof(why), "environment read: %zu variables, %zu of their values withheld", work->names.n,
                 work->names.n_hidden);
        request_reply_done(req, req->verdict.rule_name, why);
}

static void env_call_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        EnvWork *work = userdata;

        env_read(&work->reader, call, error, reply);
}

static void env_connected(Request *req, int fd) {
        EnvWork *work = req->work;

        commands_call_runtime(req, fd, DOTNET_IPC_PROCESS_ENVIRONMENT, env_call_done, work, &work->call);
}

static void env_decided(Request *req) {
        EnvWork *work;

        req->audit.rule = req->verdict.rule_name;
        if (!req->verdict.allowed) {
                request_reply_error(req, AUDIT_DECISION_DENIED, WIRE_ERROR_DENIED, req->verdict.reason);
                return;
        }
        work = calloc(1, sizeof(*work));
        if (!work) {
                request_reply_oom(req);
                return;
        }
        *work = (EnvWork){ .reader = { .request = req, .max = ENV_BLOCK_MAX, .done = env_variables_read } };
        req->work = work;
        req->work_free = env_work_free;
        commands_connect_runtime(req, env_connected);
}

static void env_opened(Request *req) {
        req->ask = (PolicyRequest){ .command = POLICY_COMMAND_ENV };
        decide(req, req->target, true, env_decided);
}

void env_start(Request *req, const WireMessage *m) {
        commands_open_target(req, m, env_opened);
}
