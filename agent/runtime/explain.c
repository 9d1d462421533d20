/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The explain command (explain.h): would the caller be allowed, and by which rule; commands.c
 * dispatches to it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/cleanup.h"
#include "agent/runtime/command-steps.h"
#include "agent/loop/connection.h"
#include "agent/decide/decision.h"
#include "agent/runtime/explain.h"
#include "policy/policy.h"
#include "eventpipe/session-config.h"

/* A trace asked about by its providers: what they are, for the policy and for the answer. */
typedef struct ExplainTrace {
        EventPipeConfig config;
        PolicyProvider providers[EVENTPIPE_PROVIDERS_MAX];
        char *providers_text;
} ExplainTrace;

static void explain_trace_free(void *p) {
        ExplainTrace *t = p;

        if (!t)
                return;
        eventpipe_config_done(&t->config);
        free(t->providers_text);
        free(t);
}

static void explain_trace_freep(ExplainTrace **t) {
        explain_trace_free(*t);
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
        _cleanup_free_ WireWriter *w = malloc(sizeof(*w));
        const PolicyVerdict *v = &req->verdict;
        char reason[256];
        int r;

        if (!w) {
                request_reply_oom(req);
                return;
        }
        wire_writer_begin(w, WIRE_REPLY_VERDICT);
        wire_writer_put_u32(w, WIRE_TAG_ALLOWED, v->allowed);
        wire_writer_put_string(w, WIRE_TAG_COMMAND, policy_command_to_string(req->ask.command));
        wire_writer_put_string(w, WIRE_TAG_RULE, v->rule_name);
        wire_writer_put_string(w, WIRE_TAG_MESSAGE, v->reason);
        if (req->work)
                wire_writer_put_string(w, WIRE_TAG_PROVIDERS, ((ExplainTrace *)req->work)->providers_text);
        /* where the artifact would go too: a rule's egress uploads its dumps, and the copies dump_dir keeps of its
         * traces and gcdumps (docs/egress.md); nothing of another command */
        if (v->allowed && v->rule && (POLICY_COMMANDS_EGRESS & (1u << req->ask.command)))
                commands_put_egress(w, v->rule->egress);
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

static const char *trace_config_error(int r) {
        switch (r) {
        case EVENTPIPE_E_UNKNOWN: return "unknown trace profile";
        case EVENTPIPE_E_NOT_STOCK: return "dotnet-trace collect does not take that profile (collect-linux's)";
        case EVENTPIPE_E_LIMIT: return "the provider list is too long";
        default: return "bad profile or provider list";
        }
}

/*
 * A trace asked about by one of the table's profiles is decided as that profile (policy.h); by a list
 * of them, or by providers, as what stock dotnet-trace collect sends for `--profile LIST --providers
 * SPEC` (eventpipe_stock_trace_config()). Either way the answer says the providers. Return: false
 * when it replied.
 */
static bool explain_trace_of(Request *req, const WireMessage *m) {
        _cleanup_free_ char *providers = NULL;
        _cleanup_(explain_trace_freep) ExplainTrace *t = NULL;
        const char *profile;
        int r;

        if (wire_message_get_string(m, WIRE_TAG_TRACE_PROFILE, &req->trace_profile) < 0 ||
            wire_message_get_string(m, WIRE_TAG_PROVIDERS, &providers) < 0) {
                request_reply_oom(req);
                return false;
        }
        profile = req->trace_profile;
        if (req->ask.command != POLICY_COMMAND_TRACE || (!profile && !providers))
                return true;
        t = calloc(1, sizeof(*t));
        if (!t) {
                request_reply_oom(req);
                return false;
        }
        if (!providers && eventpipe_profile_is_known(profile)) {
                req->ask.trace_profile = profile;
                r = eventpipe_profile_config(profile, &t->config);
        } else
                r = eventpipe_stock_trace_config(profile, providers, &t->config);
        if (r < 0) {
                request_reply_errno(req, r, "cannot read the provider list");
                return false;
        }
        if (r > 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, trace_config_error(r));
                return false;
        }
        t->providers_text = eventpipe_config_to_string(&t->config);
        if (!t->providers_text) {
                request_reply_oom(req);
                return false;
        }
        for (size_t i = 0; i < t->config.n_providers; i++)
                t->providers[i] = (PolicyProvider){ .name = t->config.providers[i].name,
                                                    .keywords = t->config.providers[i].keywords,
                                                    .level = t->config.providers[i].level,
                                                    .arguments = t->config.providers[i].arguments };
        if (!req->ask.trace_profile) {
                req->ask.providers = t->providers;
                req->ask.n_providers = t->config.n_providers;
        }
        req->work = TAKE_PTR(t);
        req->work_free = explain_trace_free;
        return true;
}

/*
 * explain: would the caller be allowed, and by which rule or why not. The
 * answer speaks only of rules that name the caller, and asking does not use
 * up a rate limit.
 */
void explain_start(Request *req, const WireMessage *m) {
        if (!explain_request_of(req, m, &req->ask) || !explain_trace_of(req, m))
                return;
        commands_open_target(req, m, explain_opened);
}
