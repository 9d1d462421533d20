/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The explain command (explain.h): would the caller be allowed, and by which rule; commands.c
 * dispatches to it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cleanup.h"
#include "command-steps.h"
#include "connection.h"
#include "decision.h"
#include "explain.h"
#include "policy.h"

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
void explain_start(Request *req, const WireMessage *m) {
        if (!explain_request_of(req, m, &req->ask))
                return;
        if (wire_message_get_string(m, WIRE_TAG_TRACE_PROFILE, &req->trace_profile) < 0) {
                request_reply_errno(req, -ENOMEM, "cannot serve the request");
                return;
        }
        req->ask.trace_profile = req->trace_profile;
        commands_open_target(req, m, explain_opened);
}
