/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What modules ask of the agent's state (broker-state.h): whether the policy is broken, the request budget */
#include <systemd/sd-event.h>

#include "agent/loop/broker-state.h"

bool broker_policy_refuses(const Broker *b, uid_t uid) {
        return b->policy_problem && uid != 0;
}

bool broker_admit_request(Broker *b, uid_t uid) {
        const PolicyAgentSettings *a = &b->policy->agent;
        uint64_t now = 0;
        int enabled = SD_EVENT_OFF;

        (void)sd_event_now(b->event, CLOCK_MONOTONIC, &now);
        if (request_budget_take(b->request_budget, uid, a->max_requests_per_second, a->max_request_burst, now))
                return true;
        (void)sd_event_source_get_enabled(b->suppressed_timer, &enabled);
        if (enabled == SD_EVENT_OFF) {
                (void)sd_event_source_set_time(b->suppressed_timer, now + 1000000);
                (void)sd_event_source_set_enabled(b->suppressed_timer, SD_EVENT_ONESHOT);
        }
        return false;
}
