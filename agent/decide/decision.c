/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Deciding one request (decision.h): the policy's verdict, the PAM account check and the rule's
 * rate limit, in that order; every command calls it before it acts.
 */
#include <stdio.h>
#include <string.h>

#include "agent/loop/broker-state.h"
#include "agent/decide/decision.h"
#include "agent/decide/pam-check.h"
#include "agent/loop/ratelimit.h"

PolicyRequester requester_of(const Request *req) {
        return (PolicyRequester){
                .uid = req->peer->uid,
                .gid = req->peer->gid,
                .groups = req->peer->groups,
                .n_groups = req->peer->n_groups,
        };
}

PolicyTarget policy_target_of(const Target *t) {
        /* a cgroup root does not vouch for is named by whoever it was delegated to: no selector matches it */
        PolicyTarget pt = {
                .unit = t->unit,
                .name = t->name,
                .cgroup = t->cgroup_vouched ? t->cgroup : NULL,
                .container_id = t->cgroup_vouched ? t->container_id : NULL,
        };

        memcpy(pt.uid, t->status.uid, sizeof(pt.uid));
        memcpy(pt.gid, t->status.gid, sizeof(pt.gid));
        return pt;
}

static void apply_rate_limit(Request *req) {
        PolicyVerdict *v = &req->verdict;
        uint64_t wait_usec = 0;
        int r;

        if (!v->allowed || !v->rule || !v->rule->has_rate_limit)
                return;
        r = rate_limiter_check(req->broker->rate_limiter, v->rule->name, req->peer->charged_uid, &v->rule->rate_limit,
                               request_now_usec(req), req->consume_rate, &wait_usec);
        if (r == 0)
                return;
        v->allowed = false;
        if (r == RATE_LIMIT_E_EXCEEDED)
                snprintf(v->reason, sizeof(v->reason), "rate limit of rule '%s' reached (%u per %llus); retry in %llus",
                         v->rule->name, v->rule->rate_limit.count,
                         (unsigned long long)(v->rule->rate_limit.period_usec / 1000000),
                         (unsigned long long)((wait_usec + 999999) / 1000000));
        else
                snprintf(v->reason, sizeof(v->reason), "rate limit of rule '%s' cannot be tracked", v->rule->name);
        v->rule = NULL;
}

static void on_pam_checked(int result, const char *message, void *userdata) {
        Request *req = userdata;

        req->pam_query = NULL;
        if (result != 0) {
                req->verdict.allowed = false;
                req->verdict.rule = NULL;
                snprintf(req->verdict.reason, sizeof(req->verdict.reason), "%s",
                         message && *message ? message : "the PAM account check could not be made");
        }
        apply_rate_limit(req);
        req->decided(req);
}

/**
 * decide() - the whole decision on req->ask: the policy, then (when the policy names
 * a PAM service) the requester's PAM account check, then the deciding rule's
 * rate limit, which a request uses up only once everything else allowed it.
 * @decided runs with req->verdict filled, now or when PAM has answered.
 */
/* The verdict is in req->verdict: PAM and the rate limit now, or at once when it denies. */
static void decide_rest(Request *req, bool consume_rate, void (*decided)(Request *req)) {
        const char *service = req->policy->agent.pam_service;
        int r;

        req->consume_rate = consume_rate;
        req->decided = decided;
        if (!req->verdict.allowed || !service) {
                apply_rate_limit(req);
                decided(req);
                return;
        }
        r = req->broker->pam ? pam_checker_query(req->broker->pam, service, req->peer->uid, on_pam_checked, req,
                                                 &req->pam_query)
                             : PAM_CHECK_E_UNAVAILABLE;
        if (r != 0)
                on_pam_checked(PAM_CHECK_E_UNAVAILABLE, "the PAM account check could not be made", req);
}

void decide(Request *req, const Target *t, bool consume_rate, void (*decided)(Request *req)) {
        PolicyRequester who = requester_of(req);
        PolicyTarget pt = policy_target_of(t);

        policy_check(req->policy, &who, &pt, &req->ask, &req->verdict);
        decide_rest(req, consume_rate, decided);
}

void decide_crash(Request *req, const PolicyTarget *crashed, bool consume_rate, void (*decided)(Request *req)) {
        PolicyRequester who = requester_of(req);

        policy_crash_check(req->policy, &who, crashed, &req->verdict);
        decide_rest(req, consume_rate, decided);
}
