/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The commands a client asks for (commands.h): which module carries out each request; the loop calls
 * it through Broker.dispatch.
 */
#include "agent/loop/broker-state.h"
#include "agent/collect/collect-list.h"
#include "agent/runtime/command-steps.h"
#include "agent/runtime/commands.h"
#include "agent/crashes/crashes.h"
#include "agent/dumps/dump.h"
#include "agent/runtime/env.h"
#include "agent/runtime/explain.h"
#include "agent/runtime/info.h"
#include "policy/policy.h"
#include "agent/runtime/proxy.h"
#include "agent/runtime/ps.h"
#include "agent/runtime/resolve.h"
#include "agent/runtime/session.h"
#include "agent/ports/startup.h"

/* The command a request's audit record names; NULL for what is no request. */
static const char *command_name(uint16_t type) {
        switch (type) {
        case WIRE_REQUEST_PS: return policy_command_to_string(POLICY_COMMAND_PS);
        case WIRE_REQUEST_INFO: return policy_command_to_string(POLICY_COMMAND_INFO);
        case WIRE_REQUEST_ENV: return policy_command_to_string(POLICY_COMMAND_ENV);
        case WIRE_REQUEST_EXPLAIN: return "explain";
        case WIRE_REQUEST_DUMP: return policy_command_to_string(POLICY_COMMAND_DUMP);
        case WIRE_REQUEST_DUMPS: return "dumps";
        case WIRE_REQUEST_COLLECT: return "collect";
        case WIRE_REQUEST_TRACE: return policy_command_to_string(POLICY_COMMAND_TRACE);
        case WIRE_REQUEST_COUNTERS: return policy_command_to_string(POLICY_COMMAND_COUNTERS);
        case WIRE_REQUEST_STACKS: return policy_command_to_string(POLICY_COMMAND_STACKS);
        case WIRE_REQUEST_GCDUMP: return policy_command_to_string(POLICY_COMMAND_GCDUMP);
        case WIRE_REQUEST_EXCEPTIONS: return policy_command_to_string(POLICY_COMMAND_EXCEPTIONS);
        case WIRE_REQUEST_LOGS: return policy_command_to_string(POLICY_COMMAND_LOGS);
        case WIRE_REQUEST_RESUME: return policy_command_to_string(POLICY_COMMAND_RESUME);
        case WIRE_REQUEST_REMOVE_DUMP: return "remove-dump";
        case WIRE_REQUEST_IPC: return "proxy"; /* until its IPC command is known */
        case WIRE_REQUEST_RESOLVE: return "resolve";
        case WIRE_REQUEST_CRASHES: return policy_command_to_string(POLICY_COMMAND_CRASHES);
        case WIRE_REQUEST_CRASH: return "crash";
        case WIRE_REQUEST_DUMP_URL: return "dump-url";
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
                info_start(req, m);
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
        case WIRE_REQUEST_GCDUMP:
                session_start_gcdump(req, m);
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
        case WIRE_REQUEST_RESOLVE:
                resolve_start(req, m);
                break;
        case WIRE_REQUEST_COLLECT:
                collect_list(req);
                break;
        case WIRE_REQUEST_CRASHES:
                crashes_list(req, m);
                break;
        case WIRE_REQUEST_CRASH:
                crash_copy_start(req, m);
                break;
        case WIRE_REQUEST_DUMP_URL:
                dumps_url(req, m);
                break;
        default:
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "not a request");
                break;
        }
}
