/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <string.h>

#include "decision.h"
#include "pam-check.h"
#include "ratelimit.h"

PolicyRequester requester_of(const Connection *c) {
        return (PolicyRequester){
                .uid = c->peer.uid,
                .gid = c->peer.gid,
                .groups = c->peer.groups,
                .n_groups = c->peer.n_groups,
        };
}

PolicyTarget policy_target_of(const Target *t) {
        PolicyTarget pt = { .unit = t->unit, .name = t->name };

        memcpy(pt.uid, t->status.uid, sizeof(pt.uid));
        memcpy(pt.gid, t->status.gid, sizeof(pt.gid));
        return pt;
}

static uint64_t now_usec(const Connection *c) {
        uint64_t now = 0;

        (void)sd_event_now(c->broker->event, CLOCK_MONOTONIC, &now);
        return now;
}

static void apply_rate_limit(Connection *c) {
        PolicyVerdict *v = &c->verdict;
        uint64_t wait_usec = 0;
        int r;

        if (!v->allowed || !v->rule || !v->rule->has_rate_limit)
                return;
        r = rate_limiter_check(c->broker->rate_limiter, v->rule->name, c->peer.uid, &v->rule->rate_limit,
                               now_usec(c), c->consume_rate, &wait_usec);
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
        Connection *c = userdata;

        c->pam_query = NULL;
        if (result != 0) {
                c->verdict.allowed = false;
                c->verdict.rule = NULL;
                snprintf(c->verdict.reason, sizeof(c->verdict.reason), "%s",
                         message && *message ? message : "the PAM account check could not be made");
        }
        apply_rate_limit(c);
        c->decided(c);
}

/**
 * decide() - the whole decision on c->request: the policy, then (when the policy names
 * a PAM service) the requester's PAM account check, then the deciding rule's
 * rate limit, which a request uses up only once everything else allowed it.
 * @decided runs with c->verdict filled, now or when PAM has answered.
 */
void decide(Connection *c, const Target *t, bool consume_rate, void (*decided)(Connection *c)) {
        PolicyRequester who = requester_of(c);
        PolicyTarget pt = policy_target_of(t);
        const char *service = c->policy->agent.pam_service;
        int r;

        c->consume_rate = consume_rate;
        c->decided = decided;
        policy_check(c->policy, &who, &pt, &c->request, &c->verdict);
        if (!c->verdict.allowed || !service) {
                apply_rate_limit(c);
                decided(c);
                return;
        }
        r = c->broker->pam ? pam_checker_query(c->broker->pam, service, who.uid, on_pam_checked, c, &c->pam_query)
                           : PAM_CHECK_E_UNAVAILABLE;
        if (r != 0)
                on_pam_checked(PAM_CHECK_E_UNAVAILABLE, "the PAM account check could not be made", c);
}
