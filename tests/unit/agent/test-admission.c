/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Admission: dumps per process, per requester and in all, with users' own dumps in a pool apart */
#include <string.h>

#include "agent/loop/admission.h"
#include "tests/unit/tap.h"

static const AdmissionLimits SHARED = { .per_target = 1, .per_requester = 1, .in_all = 1 };
static const AdmissionLimits OWN = { .per_target = 1, .per_requester = 1, .in_all = 2 };

#define KEY(p, r, o) (&(AdmissionKey){ .pid = (p), .start_time = 7, .requester = (r), .own = (o) })

static void test_own_dumps_leave_the_shared_slots_alone(void) {
        Admission *a = admission_new();
        AdmissionKey mine = *KEY(100, 1001, true);
        const char *why = NULL;

        check(admission_begin(a, ADMISSION_DUMP, &mine, &OWN, &why) == 0);
        /* root's, and a rule's, dump of another process still find the one shared slot */
        check(admission_begin(a, ADMISSION_DUMP, KEY(200, 0, false), &SHARED, &why) == 0);
        /* which they then hold from each other */
        why = NULL;
        check(admission_begin(a, ADMISSION_DUMP, KEY(300, 1002, false), &SHARED, &why) == ADMISSION_E_BUSY);
        check(why && strstr(why, "max_concurrent_dumps"));
        /* another user's own dump finds a slot of the own pool */
        check(admission_begin(a, ADMISSION_DUMP, KEY(400, 1003, true), &OWN, &why) == 0);
        /* the own pool is bounded too */
        why = NULL;
        check(admission_begin(a, ADMISSION_DUMP, KEY(500, 1004, true), &OWN, &why) == ADMISSION_E_BUSY);
        check(why && strstr(why, "max_concurrent_own_dumps"));
        admission_end(a, ADMISSION_DUMP, &mine);
        check(admission_begin(a, ADMISSION_DUMP, KEY(500, 1004, true), &OWN, &why) == 0);
        admission_free(a);
}

static void test_a_requester_and_a_process_count_over_both_pools(void) {
        Admission *a = admission_new();
        const char *why = NULL;

        check(admission_begin(a, ADMISSION_DUMP, KEY(100, 1001, true), &OWN, &why) == 0);
        /* its own dumps count against its max_dumps_per_user wherever its next one would go */
        check(admission_begin(a, ADMISSION_DUMP, KEY(200, 1001, false), &SHARED, &why) == ADMISSION_E_BUSY);
        check(why && strstr(why, "max_dumps_per_user"));
        /* and a process has one dump at a time, whoever takes it */
        check(admission_begin(a, ADMISSION_DUMP, KEY(100, 0, false), &SHARED, &why) == ADMISSION_E_BUSY);
        check(why && strstr(why, "already in progress"));
        /* ending one in the other pool ends nothing */
        admission_end(a, ADMISSION_DUMP, KEY(100, 1001, false));
        check(admission_begin(a, ADMISSION_DUMP, KEY(100, 0, false), &SHARED, &why) == ADMISSION_E_BUSY);
        admission_free(a);
}

/* The agent's own sessions (watches, tables' actions, startup traces) share the process's seats with
 * clients'. A watch counts against no requester's limit; an action or a startup trace is its owner's, and
 * counts as the owner's own sessions do. */
static void test_agent_sessions_share_the_processs_seats(void) {
        static const AdmissionLimits CLIENT = { .per_target = 2, .per_requester = 1 };
        Admission *a = admission_new();
        AdmissionKey watch, action, other;
        const char *why = NULL;

        check(admission_begin_watch(a, 100, 7, 1001, 2, &watch, &why) == 0);
        check(watch.pid == 100 && watch.start_time == 7 && watch.requester == 1001 && watch.watch && !watch.own);
        /* the watch is not the owner's own: the owner's session of another process still runs */
        check(admission_begin(a, ADMISSION_SESSION, KEY(200, 1001, false), &CLIENT, &why) == 0);
        admission_end(a, ADMISSION_SESSION, KEY(200, 1001, false));
        check(admission_begin_agent_session(a, 100, 7, 1001, 2, 1, &action, &why) == 0);
        check(action.requester == 1001 && !action.watch);
        /* both seats taken: a client's session is told so, as is a third of the agent's */
        why = NULL;
        check(admission_begin(a, ADMISSION_SESSION, KEY(100, 1002, false), &CLIENT, &why) == ADMISSION_E_BUSY);
        check(why && strstr(why, "max_sessions_per_target"));
        check(admission_begin_agent_session(a, 100, 7, 1002, 2, 1, &other, &why) == ADMISSION_E_BUSY);
        /* the action is the owner's: with max_sessions_per_user = 1, neither the owner's own session of another
         * process nor another action on the owner's behalf runs */
        why = NULL;
        check(admission_begin(a, ADMISSION_SESSION, KEY(200, 1001, false), &CLIENT, &why) == ADMISSION_E_BUSY);
        check(why && strstr(why, "max_sessions_per_user"));
        check(admission_begin_agent_session(a, 200, 7, 1001, 2, 1, &other, &why) == ADMISSION_E_BUSY);
        /* another owner's runs */
        check(admission_begin_agent_session(a, 200, 7, 1002, 2, 1, &other, &why) == 0);
        admission_end(a, ADMISSION_SESSION, &other);
        admission_end(a, ADMISSION_SESSION, &action);
        check(admission_begin(a, ADMISSION_SESSION, KEY(100, 1002, false), &CLIENT, &why) == 0);
        admission_end(a, ADMISSION_SESSION, &watch);
        admission_free(a);
}

int main(void) {
        run_test(test_own_dumps_leave_the_shared_slots_alone);
        run_test(test_a_requester_and_a_process_count_over_both_pools);
        run_test(test_agent_sessions_share_the_processs_seats);
        return tap_finish();
}
