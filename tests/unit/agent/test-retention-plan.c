/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Retention's plan: each rule takes the oldest first, budgets keep each owner's newest, room comes from yielding tables */
#include <string.h>

#include "agent/dumps/retention-plan.h"
#include "tests/unit/tap.h"

#define HOUR (3600ULL * 1000000)
#define NOBODY ((uid_t)-1)
#define NOW (1000 * HOUR)

/* An artifact written @hours_ago, of @bytes, asked for by @requester or of table @table. */
#define E(hours_ago, bytes_, requester_, table_)                                                        \
        ((RetentionEntry){ .mtime_usec = NOW - (uint64_t)(hours_ago) * HOUR, .bytes = (bytes_),            \
                           .order = __LINE__, .requester = (requester_), .table = (table_) })

static size_t plan(const RetentionEntry *e, size_t n, const RetentionSettings *s, RetentionVictim *out) {
        size_t got = 0;

        check(retention_plan(e, n, s, out, &got) == 0);
        return got;
}

static void test_nothing_to_do(void) {
        RetentionEntry e[] = { E(1, 100, 1001, -1), E(2, 100, NOBODY, 0) };
        RetentionVictim v[2];

        check(plan(e, 2, &(RetentionSettings){ .now_usec = NOW }, v) == 0);
        check(plan(e, 0, &(RetentionSettings){ .now_usec = NOW, .max_age_usec = HOUR, .max_files = 1 }, v) == 0);
        check(plan(e, 2, &(RetentionSettings){ .now_usec = NOW, .max_age_usec = 3 * HOUR, .max_files = 2 }, v) == 0);
}

static void test_max_age_takes_every_older_one_oldest_first(void) {
        RetentionEntry e[] = { E(10, 1, 1001, -1), E(80, 1, NOBODY, 0), E(72, 1, 1002, -1), E(73, 1, NOBODY, -1) };
        RetentionVictim v[4];
        size_t n = plan(e, 4, &(RetentionSettings){ .now_usec = NOW, .max_age_usec = 72 * HOUR }, v);

        /* 72 hours old is not older than 72 hours */
        check(n == 2 && v[0].entry == 1 && v[1].entry == 3);
        check(n == 2 && v[0].reason == RETENTION_MAX_AGE && v[0].limit == 72 * HOUR && v[0].total == 80 * HOUR);
        /* a file from the future (a clock set back) is not old */
        e[0].mtime_usec = NOW + HOUR;
        n = plan(e, 4, &(RetentionSettings){ .now_usec = NOW, .max_age_usec = HOUR }, v);
        check(n == 3 && v[0].entry == 1 && v[1].entry == 3 && v[2].entry == 2);
}

static void test_max_files_counts_what_age_left(void) {
        RetentionEntry e[] = { E(5, 1, 1001, -1), E(1, 1, 1001, -1), E(9, 1, NOBODY, 0), E(3, 1, 1002, -1),
                               E(100, 1, 1003, -1) };
        RetentionVictim v[5];
        size_t n = plan(e, 5, &(RetentionSettings){ .now_usec = NOW, .max_age_usec = 50 * HOUR, .max_files = 2 }, v);

        /* age takes the 100-hour one, then files keep the two newest of the four left */
        check(n == 3 && v[0].entry == 4 && v[0].reason == RETENTION_MAX_AGE);
        check(n == 3 && v[1].entry == 2 && v[1].reason == RETENTION_MAX_FILES && v[1].limit == 2 && v[1].total == 4);
        check(n == 3 && v[2].entry == 0 && v[2].reason == RETENTION_MAX_FILES && v[2].total == 3);
}

/* One holder's many files never count another's out: the largest holding gives way, oldest first. */
static void test_max_files_takes_from_the_largest_holder(void) {
        RetentionTable tables[] = { {} };
        RetentionEntry e[] = {
                E(50, 1, 1001, -1),                                             /* alice: the oldest file */
                E(4, 1, 1002, -1), E(3, 1, 1002, -1), E(2, 1, 1002, -1), E(1, 1, 1002, -1), /* mallory: 4 */
                E(40, 1, NOBODY, 0), E(30, 1, NOBODY, -1),                      /* a table's, root's */
        };
        RetentionVictim v[7];
        RetentionSettings s = { .now_usec = NOW, .max_files = 4, .tables = tables, .n_tables = 1 };
        size_t n = plan(e, 7, &s, v);

        /* 7 files, 4 may stay: each of 4 holders keeps one; mallory's three oldest go, oldest first */
        check(n == 3 && v[0].entry == 1 && v[1].entry == 2 && v[2].entry == 3);
        check(n == 3 && v[0].reason == RETENTION_MAX_FILES && v[0].total == 7 && v[2].total == 5);
        /* room for 5: mallory keeps two, the rest keep theirs */
        s.max_files = 5;
        n = plan(e, 7, &s, v);
        check(n == 2 && v[0].entry == 1 && v[1].entry == 2);
        /* room for 2 of 4 holders at one each: the holders whose file would go last are the newest keep it */
        s.max_files = 2;
        n = plan(e, 7, &s, v);
        check(n == 5 && v[0].entry == 0 && v[1].entry == 5 && v[2].entry == 1 && v[3].entry == 2 && v[4].entry == 3);
        /* one holder alone: the oldest go, whoever else there is not */
        s.max_files = 1;
        n = plan(e + 1, 4, &s, v);
        check(n == 3 && v[0].entry == 0 && v[1].entry == 1 && v[2].entry == 2);
}

static void test_equal_times_go_by_order(void) {
        RetentionEntry e[] = { E(5, 1, 1001, -1), E(5, 1, 1001, -1), E(5, 1, 1001, -1) };
        RetentionVictim v[3];
        size_t n;

        e[0].order = 30, e[1].order = 10, e[2].order = 20;
        n = plan(e, 3, &(RetentionSettings){ .now_usec = NOW, .max_files = 1 }, v);
        check(n == 2 && v[0].entry == 1 && v[1].entry == 2);
}

static void test_user_budget_keeps_each_users_newest(void) {
        RetentionEntry e[] = {
                E(4, 60, 1001, -1), E(3, 60, 1001, -1), E(1, 60, 1001, -1), /* alice: 180 of 100 */
                E(9, 500, 1002, -1),                                         /* bob: one, over alone: kept */
                E(8, 90, NOBODY, 0), E(7, 90, NOBODY, -1),                   /* a table's, root's: no user's */
        };
        RetentionVictim v[6];
        size_t n = plan(e, 6, &(RetentionSettings){ .now_usec = NOW, .user_max_use = 100 }, v);

        check(n == 2 && v[0].entry == 0 && v[1].entry == 1);
        check(n == 2 && v[0].reason == RETENTION_USER_BUDGET && v[0].limit == 100 && v[0].total == 180);
        check(n == 2 && v[1].total == 120);
}

static void test_table_budget_is_the_tables_own(void) {
        RetentionTable tables[] = { { .max_use = 100 }, { .max_use = 0 }, { .max_use = 1000 } };
        RetentionEntry e[] = {
                E(5, 80, NOBODY, 0), E(4, 80, NOBODY, 0), E(3, 80, NOBODY, 0), /* table 0: 240 of 100 */
                E(9, 900, NOBODY, 1), E(8, 900, NOBODY, 1),                    /* table 1: no budget */
                E(7, 400, NOBODY, 2), E(6, 400, NOBODY, 2),                    /* table 2: 800 of 1000 */
                E(10, 900, 1001, -1),                                          /* a user's: not a table's */
        };
        RetentionVictim v[8];
        size_t n = plan(e, 8, &(RetentionSettings){ .now_usec = NOW, .tables = tables, .n_tables = 3 }, v);

        check(n == 2 && v[0].entry == 0 && v[1].entry == 1 && v[0].reason == RETENTION_TABLE_BUDGET);
}

static void test_room_comes_from_yielding_tables_oldest_first(void) {
        RetentionTable tables[] = { { .yields = true }, { .yields = false }, { .yields = true } };
        RetentionEntry e[] = {
                E(3, 100, NOBODY, 0), E(9, 100, NOBODY, 1), E(5, 100, NOBODY, 2), E(1, 100, NOBODY, 0),
                E(20, 100, 1001, -1), E(30, 100, NOBODY, -1),
        };
        RetentionVictim v[6];
        RetentionSettings s = { .now_usec = NOW, .tables = tables, .n_tables = 3, .room = 150 };
        size_t n = plan(e, 6, &s, v);

        /* the yielding tables' two oldest make 200 >= 150; nobody's user dump, and no other table's, goes */
        check(n == 2 && v[0].entry == 2 && v[1].entry == 0 && v[0].reason == RETENTION_MAKE_ROOM);
        /* what the other rules free counts toward the room */
        s.max_age_usec = 25 * HOUR;
        n = plan(e, 6, &s, v);
        check(n == 2 && v[0].entry == 5 && v[0].reason == RETENTION_MAX_AGE);
        check(n == 2 && v[1].entry == 2 && v[1].reason == RETENTION_MAKE_ROOM && v[1].total == 100);
        /* room past every yielding artifact: all of them, and no more */
        s = (RetentionSettings){ .now_usec = NOW, .tables = tables, .n_tables = 3, .room = 10000 };
        n = plan(e, 6, &s, v);
        check(n == 3 && v[0].entry == 2 && v[1].entry == 0 && v[2].entry == 3);
}

static void test_each_artifact_goes_once(void) {
        RetentionTable tables[] = { { .max_use = 10, .yields = true } };
        RetentionEntry e[] = { E(100, 50, NOBODY, 0), E(90, 50, 1001, -1), E(80, 50, NOBODY, 0), E(1, 50, 1001, -1) };
        RetentionVictim v[4];
        RetentionSettings s = { .now_usec = NOW, .max_age_usec = 85 * HOUR, .max_files = 3, .user_max_use = 10,
                                .tables = tables, .n_tables = 1, .room = 1000 };
        size_t n = plan(e, 4, &s, v);
        bool seen[4] = {};

        for (size_t i = 0; i < n; i++) {
                check(!seen[v[i].entry]);
                seen[v[i].entry] = true;
        }
        /* age: 0 and 1; the newest of each user's and table's stays under budgets; room takes table 0's last */
        check(n == 3 && v[0].entry == 0 && v[1].entry == 1 && v[2].entry == 2 && v[2].reason == RETENTION_MAKE_ROOM);
}

static void test_reason_names(void) {
        check(strcmp(retention_reason_to_string(RETENTION_MAX_AGE), "max_age") == 0);
        check(strcmp(retention_reason_to_string(RETENTION_MAKE_ROOM), "make-room") == 0);
        check(strcmp(retention_reason_to_string(_RETENTION_REASON_MAX), "unknown") == 0);
}

int main(void) {
        run_test(test_nothing_to_do);
        run_test(test_max_age_takes_every_older_one_oldest_first);
        run_test(test_max_files_counts_what_age_left);
        run_test(test_max_files_takes_from_the_largest_holder);
        run_test(test_equal_times_go_by_order);
        run_test(test_user_budget_keeps_each_users_newest);
        run_test(test_table_budget_is_the_tables_own);
        run_test(test_room_comes_from_yielding_tables_oldest_first);
        run_test(test_each_artifact_goes_once);
        run_test(test_reason_names);
        return tap_finish();
}
