/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* When a [[collect]] table fires on one process, and what its limits keep (agent/collect/collect-trigger.h,
 * collect-ledger.h) */
#include <string.h>

#include "agent/collect/collect-ledger.h"
#include "agent/collect/collect-trigger.h"
#include "policy/policy-compile.h"
#include "tests/unit/tap.h"
#include "policy/toml.h"

#define SEC 1000000ULL

static int no_user(const char *name, uid_t *ret, void *userdata) {
        return -ENOENT;
}

static Policy *compile(const char *text) {
        static const PolicyResolver resolver = { .user = no_user, .group = no_user };
        PolicyDiagnostics d = {};
        TomlValue *root = NULL;
        Policy *p = NULL;
        TomlError e;

        check(toml_parse(text, strlen(text), &root, &e) == 0);
        check(policy_compile(&(PolicySource){ .path = "p.toml", .root = root, .is_main = true }, 1, &resolver, &p,
                             &d) == 0);
        for (size_t i = 0; i < d.n; i++)
                printf("# %s\n", d.messages[i]);
        policy_diagnostics_done(&d);
        toml_value_free(root);
        return p;
}

static CollectLedger *ledger;

#define OWNER 1001

/* A trigger of @table on the process @pid of @owner, with its limits from the ledger, as the watcher makes it. */
static void init_of(CollectTrigger *t, pid_t pid, uid_t owner, const PolicyCollect *table) {
        collect_trigger_init(t, table, collect_ledger_process_limit(ledger, pid, 1000 + pid, table),
                             collect_ledger_table_limit(ledger, table, owner));
}

static void init(CollectTrigger *t, pid_t pid, const PolicyCollect *table) {
        init_of(t, pid, OWNER, table);
}

/* The watch ends: its limits stay in the ledger. */
static void done(CollectTrigger *t) {
        collect_ledger_release(ledger, t->process_limit);
        collect_ledger_release(ledger, t->table_limit);
        collect_trigger_done(t);
}

static NettraceCounter sample(const char *provider, const char *name, const char *tags, double value) {
        return (NettraceCounter){ .kind = NETTRACE_COUNTER_GAUGE, .provider = (char *)provider, .name = (char *)name,
                                  .tags = (char *)tags, .has_value = true, .value = value };
}

#define QUEUE "[[collect]]\nname = \"q\"\ntargets.any = true\n" \
              "when.counter = \"Bars.Target:bars-queue-depth[queue=bars-q2]\"\nwhen.above = 300\n" \
              "then.dump = \"mini\"\n"

static CollectVerdict feed(CollectTrigger *t, const char *tags, double value, uint64_t now) {
        NettraceCounter c = sample("Bars.Target", "bars-queue-depth", tags, value);
        double seen = -1;
        CollectVerdict v = collect_trigger_counter(t, &c, now, &seen);

        if (v != COLLECT_QUIET)
                check(seen == value);
        return v;
}

/* The line held for when.for, by the agent's clock; a dip starts the run over */
static void test_counter_for(void) {
        Policy *p = compile(QUEUE "when.for = \"2s\"\nlimit = \"3/1h\"\n");
        CollectTrigger t;

        if (!p)
                return;
        init(&t, 1, &p->collect[0]);
        check(feed(&t, "queue=bars-q2", 301, 0) == COLLECT_QUIET);
        check(feed(&t, "queue=bars-q2", 500, 1 * SEC) == COLLECT_QUIET);
        check(feed(&t, "queue=bars-q2", 300, 2 * SEC) == COLLECT_QUIET); /* at the line is not above it */
        check(feed(&t, "queue=bars-q2", 301, 3 * SEC) == COLLECT_QUIET);
        check(feed(&t, "queue=bars-q2", 302, 4 * SEC) == COLLECT_QUIET);
        check(feed(&t, "queue=bars-q2", 303, 5 * SEC) == COLLECT_FIRE);
        /* a run that fired starts over: a whole when.for again */
        check(feed(&t, "queue=bars-q2", 304, 6 * SEC) == COLLECT_QUIET);
        check(feed(&t, "queue=bars-q2", 305, 7 * SEC) == COLLECT_QUIET);
        check(feed(&t, "queue=bars-q2", 306, 8 * SEC) == COLLECT_FIRE);
        /* others' samples change nothing: another queue, another instrument, no tags, no value */
        check(feed(&t, "queue=bars-q1", 900, 9 * SEC) == COLLECT_QUIET);
        check(feed(&t, "queue=bars-q1", 900, 20 * SEC) == COLLECT_QUIET);
        check(feed(&t, NULL, 900, 20 * SEC) == COLLECT_QUIET);
        {
                NettraceCounter c = sample("Bars.Target", "bars-queue-length", "queue=bars-q2", 900);
                NettraceCounter h = sample("Bars.Target", "bars-queue-depth", "queue=bars-q2", 900);
                NettraceCounter none = sample("Bars.Target", "bars-queue-depth", "queue=bars-q2", 0);
                double v;

                h.kind = NETTRACE_COUNTER_HISTOGRAM;
                none.has_value = false;
                check(collect_trigger_counter(&t, &c, 21 * SEC, &v) == COLLECT_QUIET);
                check(collect_trigger_counter(&t, &h, 21 * SEC, &v) == COLLECT_QUIET);
                check(collect_trigger_counter(&t, &none, 21 * SEC, &v) == COLLECT_QUIET);
        }
        /* a new run begins at 30 s: fires at 32 s, not before */
        check(feed(&t, "queue=bars-q2", 400, 30 * SEC) == COLLECT_QUIET);
        check(feed(&t, "queue=bars-q2", 400, 32 * SEC - 1) == COLLECT_QUIET);
        check(feed(&t, "queue=bars-q2", 400, 32 * SEC) == COLLECT_FIRE);
        check(t.process_limit->n_fired == 3 && t.process_limit->n_limited == 0);
        done(&t);
        policy_unref(p);
}

/* The limit per process: a runtime that floods samples beyond the line gets limit.count artifacts a period */
static void test_counter_limit(void) {
        Policy *p = compile(QUEUE "limit = \"2/1h\"\n");
        CollectTrigger t, other;
        unsigned fired = 0, limited = 0;

        if (!p)
                return;
        init(&t, 1, &p->collect[0]);
        init(&other, 2, &p->collect[0]);
        /* no when.for: each sample beyond the line meets the condition */
        for (unsigned i = 0; i < 100000; i++)
                switch (feed(&t, "queue=bars-q2,host=a", 1e9, i)) {
                case COLLECT_FIRE: fired++; break;
                case COLLECT_LIMITED: limited++; break;
                default: break;
                }
        check(fired == 2 && limited == 99998 && t.process_limit->n_fired == 2 && t.process_limit->n_limited == 99998);
        /* another process has its own */
        check(feed(&other, "queue=bars-q2", 301, 10) == COLLECT_FIRE);
        /* the window slides: an hour after the first, one more */
        check(feed(&t, "queue=bars-q2", 301, 3600 * SEC - 1) == COLLECT_LIMITED);
        check(feed(&t, "queue=bars-q2", 301, 3600 * SEC) == COLLECT_FIRE);
        check(feed(&t, "queue=bars-q2", 301, 3600 * SEC) == COLLECT_LIMITED);
        check(feed(&t, "queue=bars-q2", 301, 3600 * SEC + 1) == COLLECT_FIRE);
        done(&t);
        done(&other);
        policy_unref(p);
}

static void test_counter_below_and_kinds(void) {
        Policy *p = compile("[[collect]]\nname = \"low\"\ntargets.any = true\n"
                            "when.counter = \"System.Runtime:threadpool-thread-count\"\nwhen.below = 2\n"
                            "then.stacks = true\nlimit = \"100/1s\"\n");
        CollectTrigger t;
        NettraceCounter c = sample("System.Runtime", "threadpool-thread-count", NULL, 1);
        double v = -1;

        if (!p)
                return;
        init(&t, 1, &p->collect[0]);
        c.kind = NETTRACE_COUNTER_MEAN;
        check(collect_trigger_counter(&t, &c, 0, &v) == COLLECT_FIRE && v == 1);
        c.value = 2;
        check(collect_trigger_counter(&t, &c, 1, &v) == COLLECT_QUIET);
        c.kind = NETTRACE_COUNTER_SUM;
        c.value = -5;
        check(collect_trigger_counter(&t, &c, 2, &v) == COLLECT_FIRE && v == -5);
        c.kind = NETTRACE_COUNTER_UP_DOWN;
        check(collect_trigger_counter(&t, &c, 3, &v) == COLLECT_FIRE);
        c.kind = NETTRACE_COUNTER_COUNTER;
        check(collect_trigger_counter(&t, &c, 4, &v) == COLLECT_FIRE);
        c.kind = NETTRACE_COUNTER_INSTRUMENT;
        check(collect_trigger_counter(&t, &c, 5, &v) == COLLECT_QUIET);
        c.kind = NETTRACE_COUNTER_GAUGE;
        c.value = __builtin_nan("");
        check(collect_trigger_counter(&t, &c, 6, &v) == COLLECT_QUIET);
        done(&t);
        policy_unref(p);
}

/* N exceptions of the type within the window, by the agent's clock; then forgotten */
static void test_exception_window(void) {
        Policy *p = compile("[[collect]]\nname = \"m\"\ntargets.any = true\n"
                            "when.exception = \"BarsMarkerException\"\nwhen.count = 3\nwhen.within = \"10s\"\n"
                            "then.stacks = true\nlimit = \"2/1h\"\n"
                            "[[collect]]\nname = \"one\"\ntargets.any = true\nwhen.exception = \"System.TimeoutException\"\n"
                            "then.stacks = true\n");
        CollectTrigger t, one;

        if (!p)
                return;
        init(&t, 1, &p->collect[0]);
        init(&one, 2, &p->collect[1]);
        check(collect_trigger_exception(&t, "Bars.BarsMarkerException", 0) == COLLECT_QUIET);
        check(collect_trigger_exception(&t, "Bars.BarsMarkerException", 5 * SEC) == COLLECT_QUIET);
        check(collect_trigger_exception(&t, "System.TimeoutException", 6 * SEC) == COLLECT_QUIET);
        /* the first has left the window: three within 10 s are 5, 11, 12 */
        check(collect_trigger_exception(&t, "Bars.BarsMarkerException", 11 * SEC) == COLLECT_QUIET);
        check(collect_trigger_exception(&t, "BarsMarkerException", 12 * SEC) == COLLECT_FIRE);
        /* forgotten: three more */
        check(collect_trigger_exception(&t, "BarsMarkerException", 13 * SEC) == COLLECT_QUIET);
        check(collect_trigger_exception(&t, "BarsMarkerException", 13 * SEC) == COLLECT_QUIET);
        check(collect_trigger_exception(&t, "BarsMarkerException", 14 * SEC) == COLLECT_FIRE);
        for (int i = 0; i < 30; i++)
                check(collect_trigger_exception(&t, "BarsMarkerException", 15 * SEC) ==
                      (i % 3 == 2 ? COLLECT_LIMITED : COLLECT_QUIET));
        check(t.process_limit->n_fired == 2 && t.process_limit->n_limited == 10);
        /* a count of 1: each one, up to the default limit of one an hour */
        check(collect_trigger_exception(&one, "System.TimeoutException", 0) == COLLECT_FIRE);
        check(collect_trigger_exception(&one, "System.TimeoutException", 1) == COLLECT_LIMITED);
        check(collect_trigger_exception(&one, "TimeoutException", 3600 * SEC) == COLLECT_QUIET); /* a full name */
        check(collect_trigger_exception(&one, "System.TimeoutException", 3600 * SEC) == COLLECT_FIRE);
        done(&t);
        done(&one);
        policy_unref(p);
}

/* both lines: strictly between them */
static void test_counter_between(void) {
        Policy *p = compile("[[collect]]\nname = \"b\"\ntargets.any = true\n"
                            "when.counter = \"Bars.Target:bars-queue-depth\"\nwhen.above = 10\nwhen.below = 20\n"
                            "then.stacks = true\nlimit = \"100/1s\"\n");
        CollectTrigger t;

        if (!p)
                return;
        init(&t, 1, &p->collect[0]);
        check(feed(&t, NULL, 10, 0) == COLLECT_QUIET);
        check(feed(&t, NULL, 11, 1) == COLLECT_FIRE);
        check(feed(&t, NULL, 19.5, 2) == COLLECT_FIRE);
        check(feed(&t, NULL, 20, 3) == COLLECT_QUIET);
        check(feed(&t, NULL, 1e9, 4) == COLLECT_QUIET);
        done(&t);
        policy_unref(p);
}

/* A watch that ends (the process re-bound its socket, a walk missed it) and a new one of the same process: the
 * limit is the ledger's, by pid and start time, and holds; another process (or the same pid started anew)
 * has its own */
static void test_limit_outlives_the_watch(void) {
        Policy *p = compile(QUEUE "limit = \"1/1h\"\n");
        CollectTrigger first, again, other;

        if (!p)
                return;
        init(&first, 1, &p->collect[0]);
        check(feed(&first, "queue=bars-q2", 301, 1) == COLLECT_FIRE);
        done(&first);
        collect_ledger_prune(ledger, p, 2 * SEC); /* a walk: it still holds the firing back */
        init(&again, 1, &p->collect[0]);
        check(again.process_limit && again.process_limit->n_fired == 1 && again.process_limit->last_fired_usec == 1);
        check(feed(&again, "queue=bars-q2", 301, 3 * SEC) == COLLECT_LIMITED);
        collect_trigger_init(&other, &p->collect[0], collect_ledger_process_limit(ledger, 1, 99, &p->collect[0]),
                             collect_ledger_table_limit(ledger, &p->collect[0], OWNER));
        check(feed(&other, "queue=bars-q2", 301, 4 * SEC) == COLLECT_FIRE);
        /* an hour after the firing it holds nothing back: the watched one stays, the other goes once released */
        done(&other);
        collect_ledger_prune(ledger, p, 4 * SEC + 3600 * SEC);
        check(collect_ledger_size(ledger) == 2); /* again's limit, and the table's */
        check(feed(&again, "queue=bars-q2", 301, 3600 * SEC + 1) == COLLECT_FIRE);
        done(&again);
        collect_ledger_forget_process(ledger, 1, 1001);
        check(collect_ledger_size(ledger) == 1); /* the table's, still in its window */
        collect_ledger_prune(ledger, p, 3 * 3600 * SEC);
        check(collect_ledger_size(ledger) == 0);
        policy_unref(p);
}

/* limit_total: the table over all the processes of one owner; fresh processes bring no budget beyond it */
static void test_limit_total(void) {
        Policy *p = compile(QUEUE "limit = \"1/1h\"\nlimit_total = \"3/1h\"\n");
        CollectTrigger t[5];
        unsigned fired = 0;

        if (!p)
                return;
        for (int i = 0; i < 5; i++) {
                init(&t[i], 10 + i, &p->collect[0]);
                fired += feed(&t[i], "queue=bars-q2", 301, (uint64_t)i * SEC) == COLLECT_FIRE;
        }
        check(fired == 3);
        check(t[3].process_limit->n_limited == 1 && t[3].process_limit->n_fired == 0);
        check(t[0].table_limit == t[4].table_limit && t[0].table_limit->n_fired == 3 && t[0].table_limit->n_limited == 2);
        /* the processes held back by the table still have their own limit whole, once the table's window slides */
        check(feed(&t[3], "queue=bars-q2", 301, 3600 * SEC) == COLLECT_FIRE);
        check(feed(&t[4], "queue=bars-q2", 301, 3600 * SEC) == COLLECT_LIMITED); /* 1, 2 s: still within it */
        check(feed(&t[4], "queue=bars-q2", 301, 3602 * SEC) == COLLECT_FIRE);
        for (int i = 0; i < 5; i++)
                done(&t[i]);
        collect_ledger_prune(ledger, p, 10 * 3600 * SEC);
        check(collect_ledger_size(ledger) == 0);
        policy_unref(p);
}

/* limit_total counts per owner: one owner's processes, which cross the line when their user likes, spending the
 * table's limit_total leave another owner's process its own (before, one count for the table: LIMITED) */
static void test_limit_total_per_owner(void) {
        Policy *p = compile(QUEUE "limit = \"1/1h\"\nlimit_total = \"2/1h\"\n");
        CollectTrigger hers[3], theirs;

        if (!p)
                return;
        for (int i = 0; i < 3; i++)
                init_of(&hers[i], 20 + i, 1003, &p->collect[0]);
        check(feed(&hers[0], "queue=bars-q2", 301, 1) == COLLECT_FIRE);
        check(feed(&hers[1], "queue=bars-q2", 301, 2) == COLLECT_FIRE);
        check(feed(&hers[2], "queue=bars-q2", 301, 3) == COLLECT_LIMITED); /* a fresh one of hers: no budget */
        init_of(&theirs, 30, 987, &p->collect[0]);
        check(theirs.table_limit != hers[0].table_limit);
        check(feed(&theirs, "queue=bars-q2", 301, 4) == COLLECT_FIRE);
        check(hers[0].table_limit->n_fired == 2 && hers[0].table_limit->n_limited == 1);
        check(theirs.table_limit->n_fired == 1 && theirs.table_limit->n_limited == 0);
        for (int i = 0; i < 3; i++)
                done(&hers[i]);
        done(&theirs);
        collect_ledger_prune(ledger, p, 10 * 3600 * SEC);
        check(collect_ledger_size(ledger) == 0);
        policy_unref(p);
}

/* A reload: the same table (by name, with the same limits) in the new policy finds what the old one counted,
 * per process and in all; a table whose limit changed starts afresh, and what nobody has any more goes */
static void test_limit_across_a_reload(void) {
        Policy *before = compile(QUEUE "limit = \"2/1h\"\n");
        Policy *after = compile(QUEUE "limit = \"2/1h\"\n");
        Policy *changed = compile(QUEUE "limit = \"3/1h\"\n");
        CollectTrigger old, same, other;

        if (!before || !after || !changed)
                return;
        init(&old, 1, &before->collect[0]);
        check(feed(&old, "queue=bars-q2", 301, 1) == COLLECT_FIRE);
        check(feed(&old, "queue=bars-q2", 301, 2) == COLLECT_FIRE);
        check(feed(&old, "queue=bars-q2", 301, 3) == COLLECT_LIMITED);
        done(&old);

        init(&other, 1, &changed->collect[0]);
        check(feed(&other, "queue=bars-q2", 301, 4) == COLLECT_FIRE);
        /* the table's limit_total is the same: it counted all three */
        check(other.table_limit->n_fired == 3);
        done(&other);

        collect_ledger_prune(ledger, after, 5);
        init(&same, 1, &after->collect[0]);
        check(same.process_limit->n_fired == 2 && same.process_limit->last_fired_usec == 2);
        check(feed(&same, "queue=bars-q2", 301, 5) == COLLECT_LIMITED);
        /* the window still slides from the firings before the reload */
        check(feed(&same, "queue=bars-q2", 301, 3600 * SEC + 1) == COLLECT_FIRE);
        done(&same);
        /* "changed" is not the policy's: its limit on the process went at the reload's prune */
        check(collect_ledger_size(ledger) == 2);
        collect_ledger_prune(ledger, after, 10 * 3600 * SEC);
        check(collect_ledger_size(ledger) == 0);
        policy_unref(before);
        policy_unref(after);
        policy_unref(changed);
}

/* No room in the ledger for a limit: the table does not fire (fewer artifacts, never more) */
static void test_no_limit_no_firing(void) {
        Policy *p = compile(QUEUE);
        CollectTrigger t;

        if (!p)
                return;
        collect_trigger_init(&t, &p->collect[0], NULL, collect_ledger_table_limit(ledger, &p->collect[0], OWNER));
        check(feed(&t, "queue=bars-q2", 301, 1) == COLLECT_LIMITED);
        check(t.table_limit->n_fired == 0);
        done(&t);
        collect_ledger_prune(ledger, p, 2);
        check(collect_ledger_size(ledger) == 0);
        policy_unref(p);
}

#define CRASHES "[[collect]]\nname = \"cores\"\ntargets.any = true\nwhen.crash = true\nthen.core = true\n"

/* One crash of @key's at @now: has the table's limit on it room, and then counted. */
static bool crash_counted(const PolicyCollect *table, const char *key, uint64_t now) {
        CollectLimit *l = collect_ledger_key_limit(ledger, table, key);
        bool counted = l && collect_limit_has_room(l, now) && collect_limit_take(l, now);

        collect_ledger_release(ledger, l);
        return counted;
}

/* A crash table's limit per unit: kept while it holds, across a reload that keeps the table's name and limit,
 * never dropped to make room for the units of other crashes (those could be anyone's: each login is a unit, any
 * program a key of its own); past the ledger's room a new key gets no limit, and so no copy */
static void test_key_limits_hold_and_are_never_pushed_out(void) {
        Policy *p = compile(CRASHES "limit = \"1/1h\"\n"), *reloaded = compile(CRASHES "limit = \"1/1h\"\n");
        Policy *changed = compile(CRASHES "limit = \"2/1h\"\n");
        CollectLimit *idle;
        char key[32];

        if (!p || !reloaded || !changed)
                return;
        check(crash_counted(&p->collect[0], "orders.service", 1));
        check(!crash_counted(&p->collect[0], "orders.service", 2 * SEC));
        /* a key looked at and not counted holds nothing: the next prune drops it */
        idle = collect_ledger_key_limit(ledger, &p->collect[0], "idle.service");
        check(idle && collect_ledger_size(ledger) == 2);
        collect_ledger_release(ledger, idle);
        collect_ledger_prune(ledger, p, 3 * SEC);
        check(collect_ledger_size(ledger) == 1);
        /* every other room taken by crashes of other units: orders.service's count stays, the next unit has none */
        for (unsigned i = 1; i < COLLECT_LEDGER_LIMITS_MAX; i++) {
                snprintf(key, sizeof(key), "login-%u.service", i);
                check(crash_counted(&p->collect[0], key, 4 * SEC));
        }
        check(collect_ledger_key_limit(ledger, &p->collect[0], "one-more.service") == NULL);
        collect_ledger_prune(ledger, reloaded, 5 * SEC);
        check(collect_ledger_size(ledger) == COLLECT_LEDGER_LIMITS_MAX);
        check(!crash_counted(&reloaded->collect[0], "orders.service", 6 * SEC));
        /* an hour after, nothing is held back: all go, and the unit has its limit again */
        collect_ledger_prune(ledger, reloaded, 4 * SEC + 3600 * SEC);
        check(collect_ledger_size(ledger) == 0);
        check(crash_counted(&reloaded->collect[0], "orders.service", 4 * SEC + 3600 * SEC));
        /* a reload that changes the limit starts afresh, as for the other tables */
        collect_ledger_prune(ledger, changed, 5 * SEC + 3600 * SEC);
        check(collect_ledger_size(ledger) == 0);
        policy_unref(changed);
        policy_unref(reloaded);
        policy_unref(p);
}

/* Each test with a ledger of its own: the tables of different tests share names. */
#define run_with_ledger(fn)                           \
        do {                                          \
                ledger = collect_ledger_new();        \
                run_test(fn);                         \
                ledger = collect_ledger_free(ledger); \
        } while (0)

int main(void) {
        run_with_ledger(test_counter_between);
        run_with_ledger(test_counter_for);
        run_with_ledger(test_counter_limit);
        run_with_ledger(test_counter_below_and_kinds);
        run_with_ledger(test_exception_window);
        run_with_ledger(test_limit_outlives_the_watch);
        run_with_ledger(test_limit_total);
        run_with_ledger(test_limit_total_per_owner);
        run_with_ledger(test_limit_across_a_reload);
        run_with_ledger(test_no_limit_no_firing);
        run_with_ledger(test_key_limits_hold_and_are_never_pushed_out);
        return tap_finish();
}
