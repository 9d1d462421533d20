/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One client request and the helpers that end it (request.h): each writes the one audit record of
 * its decision and queues the last frame.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/loop/broker-state.h"
#include "common/cleanup.h"
#include "agent/loop/connection.h"
#include "common/dotnet-ipc.h"
#include "agent/decide/pam-check.h"
#include "agent/loop/request.h"
#include "agent/targets/target-cache.h"
#include "agent/workers/worker-pool.h"

void request_init(Request *req, Connection *c, uint64_t id) {
        *req = (Request){ .connection = c, .broker = c->broker, .id = id, .peer = &c->peer };
        req->audit.request_id = id;
        req->audit.reservation = &req->audit_room;
}

void request_cancel_work(Request *req) {
        pam_query_cancel(req->pam_query);
        req->pam_query = NULL;
        worker_job_cancel(req->job);
        req->job = NULL;
        /* through the hooks their modules set: those modules call this one, not the other way round */
        if (req->startup)
                req->startup = req->startup_free(req->startup);
        if (req->port_waiter)
                req->port_waiter = req->port_waiter_cancel(req->port_waiter);
        if (req->work_free)
                req->work_free(req->work);
        req->work = NULL;
        req->work_free = NULL;
}

static int request_audit(Request *req);

/*
 * A request that held room for its records was told nothing yet: the agent is stopping. What it
 * began may have happened (its work, just cancelled, recorded its own end), so its record says so.
 */
static void request_record_unfinished(Request *req) {
        req->audit.decision = AUDIT_DECISION_FAILED;
        req->audit.reason = "the agent stopped before the request finished; what it had begun in the runtime "
                            "was cut off";
        (void)request_audit(req);
}

void request_done(Request *req) {
        request_cancel_work(req);
        if (!req->finished && req->audit_room.records > 0)
                request_record_unfinished(req);
        audit_reservation_release(&req->audit_room);
        policy_unref(req->policy);
        free(req->trace_profile);
        free(req->unit);
        target_unref(req->target);
}

void request_set_target(Request *req, Target *t) {
        target_unref(req->target);
        req->target = t;
}

uint64_t request_now_usec(const Request *req) {
        uint64_t now = 0;

        (void)sd_event_now(req->broker->event, CLOCK_MONOTONIC, &now);
        return now;
}

bool request_admit(Request *req) {
        if (!req->admitted)
                req->admitted = broker_admit_request(req->broker, req->peer->charged_uid);
        return req->admitted;
}

static int request_audit(Request *req) {
        AuditRecord *a = &req->audit;

        a->client_uid = req->peer->uid;
        a->client_gid = req->peer->gid;
        a->client_pid = req->peer->pid;
        a->client_pidfd_id = req->peer->pidfd_id;
        a->client_charged_other = req->peer->charged_uid != req->peer->uid;
        a->client_charged_uid = req->peer->charged_uid;
        if (req->target) {
                a->have_target = true;
                a->target_pid = req->target->pid;
                a->target_uid = target_euid(req->target);
                a->target_unit = req->target->unit;
                a->target_exe = req->target->exe;
                a->target_container_id = req->target->container_id;
                a->target_pod_uid = req->target->pod_uid;
                a->target_cgroup = req->target->cgroup;
                a->target_cgroup_vouched = req->target->cgroup_vouched;
        }
        return audit_log_request(req->broker->config.audit_sink, a);
}

bool request_hold_audit(Request *req) {
        unsigned records = req->audit_records > 0 ? req->audit_records : 1;
        int r;

        if (req->audit_room.records > 0)
                return true;
        r = audit_reserve(req->broker->config.audit_sink, records, &req->audit_room);
        if (r == 0)
                return true;
        /* recorded if that one record still fits; else counted as refused, and answered the same */
        request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_AUDIT_UNAVAILABLE,
                            "audit unavailable: no room could be held for the records of what the runtime would be "
                            "asked, so nothing was sent to it");
        return false;
}

/*
 * A decision nobody can audit is not carried out: the client gets "audit unavailable" instead, at
 * once (the record's output never holds the loop: audit.h), and the record that counts such
 * requests (DSAGENT_AUDIT_REFUSED=) counts it.
 */
static void request_fail_unaudited(Request *req) {
        connection_discard_output(req->connection);
        connection_queue_error(req->connection, WIRE_ERROR_AUDIT_UNAVAILABLE, 0,
                               "audit unavailable: the decision could not be recorded, so it was not carried out",
                               req->id);
}

static void request_finish(Request *req) {
        /* a request finishes once: every reply helper but the first one's is turned away above */
        assert(!req->finished);
        req->finished = true;
        connection_start_writing(req->connection);
}

void request_reply_too_many(Request *req) {
        connection_queue_error(req->connection, WIRE_ERROR_BUSY, 0, REQUEST_TOO_MANY, req->id);
        request_finish(req);
}

void request_reply_done(Request *req, const char *rule, const char *reason) {
        _cleanup_free_ WireWriter *w = NULL;

        if (req->finished)
                return;
        req->audit.decision = AUDIT_DECISION_ALLOWED;
        req->audit.rule = rule;
        req->audit.reason = reason;
        if (request_audit(req) < 0) {
                request_fail_unaudited(req);
                request_finish(req);
                return;
        }
        w = malloc(sizeof(*w));
        if (w) {
                wire_writer_begin(w, WIRE_REPLY_DONE);
                wire_writer_put_u64(w, WIRE_TAG_REQUEST_ID, req->id);
                (void)connection_queue_frame(req->connection, w);
        }
        request_finish(req);
}

/* @message is what the client reads; the record says @reason. */
static void request_reply_error_full(Request *req, AuditDecision decision, WireError error, uint32_t hresult,
                                     const char *reason, const char *message) {
        if (req->finished)
                return;
        /* whatever went wrong but the runtime's own answer, the next request reads the process afresh */
        if (req->target && decision == AUDIT_DECISION_FAILED && error != WIRE_ERROR_RUNTIME_FAILED)
                target_cache_forget(req->broker->targets, req->target->pid);
        /* a partial listing must not look complete: the error replaces it */
        connection_discard_output(req->connection);
        if (!request_admit(req)) {
                request_reply_too_many(req);
                return;
        }
        req->audit.decision = decision;
        req->audit.reason = reason;
        if (request_audit(req) < 0)
                request_fail_unaudited(req);
        else
                connection_queue_error(req->connection, error, hresult, message, req->id);
        request_finish(req);
}

void request_reply_error(Request *req, AuditDecision decision, WireError error, const char *reason) {
        request_reply_error_full(req, decision, error, 0, reason, reason);
}

void request_reply_error_hresult(Request *req, AuditDecision decision, WireError error, uint32_t hresult,
                                 const char *reason) {
        request_reply_error_full(req, decision, error, hresult, reason, reason);
}

void request_reply_error_as(Request *req, AuditDecision decision, WireError error, const char *reason,
                            const char *message) {
        request_reply_error_full(req, decision, error, 0, reason, message);
}

/*
 * The requester may not see the target: the reply is the very one a process
 * that does not exist gets, while the record tells the administrator what
 * was asked of which process, and that it was refused.
 */
void request_reply_invisible(Request *req) {
        request_reply_error_full(req, AUDIT_DECISION_DENIED, WIRE_ERROR_NO_SUCH_PROCESS, 0,
                                 "the requester may not act on this process, which is answered as absent",
                                 REQUEST_NO_SUCH_PROCESS);
}

void request_reply_policy_broken(Request *req) {
        char reason[1024];

        snprintf(reason, sizeof(reason), "the policy is broken, only root is served: %s",
                 req->broker->policy_problem ? req->broker->policy_problem : "no policy is loaded");
        request_reply_error_full(req, AUDIT_DECISION_FAILED, WIRE_ERROR_POLICY_BROKEN, 0, reason,
                                 REQUEST_POLICY_BROKEN);
}

void request_reply_errno(Request *req, int error, const char *what) {
        char buf[256];
        int e = error < 0 ? -error : error > 0 ? error : EIO;

        snprintf(buf, sizeof(buf), "%s: %s", what, strerror(e));
        req->audit.error_errno = e;
        request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, buf);
}

void request_reply_oom(Request *req) {
        request_reply_errno(req, -ENOMEM, "cannot serve the request");
}

void request_reply_runtime_error(Request *req, uint32_t hresult, const char *reason) {
        const char *name = dotnet_ipc_hresult_name(hresult);
        char buf[256];

        snprintf(buf, sizeof(buf), "%s: HRESULT 0x%08x%s%s%s", reason, hresult, name ? " (" : "",
                 name ? name : "", name ? ")" : "");
        request_reply_error_full(req, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_FAILED, hresult, buf, buf);
}

