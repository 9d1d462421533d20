/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the [[collect]] tables counted against their limits, per process and per table (collect-ledger.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/collect/collect-ledger.h"

typedef struct LedgerLimit LedgerLimit;
typedef struct LedgerProcess LedgerProcess;

/* One limit of one table: the table's name and the limit make its key, with what it counts by for a key's, and
 * the owner for a limit_total's. */
struct LedgerLimit {
        LedgerLimit *next;
        char *table;
        char *key;            /* a keyed limit's: what it counts (a crash table's unit); else NULL */
        uid_t owner;          /* a limit_total's: whose processes it counts; else 0 */
        CollectLimit limit;
};

struct LedgerProcess {
        LedgerProcess *next;
        pid_t pid;
        uint64_t start_time;  /* with the pid, one process for the whole boot */
        bool gone;
        LedgerLimit *limits;  /* its tables' limits on it */
};

struct CollectLedger {
        LedgerProcess *processes;
        LedgerLimit *tables;  /* the tables' limit_total */
        LedgerLimit *keys;    /* the tables' limits on what they count by name (collect_ledger_key_limit()) */
        unsigned n_limits;
};

CollectLedger *collect_ledger_new(void) {
        return calloc(1, sizeof(CollectLedger));
}

static void limit_free(CollectLedger *l, LedgerLimit *e) {
        collect_limit_done(&e->limit);
        free(e->table);
        free(e->key);
        free(e);
        l->n_limits--;
}

static void limits_free(CollectLedger *l, LedgerLimit *list) {
        while (list) {
                LedgerLimit *next = list->next;

                limit_free(l, list);
                list = next;
        }
}

CollectLedger *collect_ledger_free(CollectLedger *l) {
        if (!l)
                return NULL;
        while (l->processes) {
                LedgerProcess *p = l->processes;

                l->processes = p->next;
                limits_free(l, p->limits);
                free(p);
        }
        limits_free(l, l->tables);
        limits_free(l, l->keys);
        free(l);
        return NULL;
}

static bool same_rate(const PolicyRateLimit *a, const PolicyRateLimit *b) {
        return a->count == b->count && a->period_usec == b->period_usec;
}

static bool same_key(const char *a, const char *b) {
        return a == b || (a && b && strcmp(a, b) == 0);
}

/* The limit of @table named @rate (on @key, or NULL; for @owner) in @list, made when missing (@list's head may
 * change). */
static CollectLimit *limit_of(CollectLedger *l, LedgerLimit **list, const char *table, const char *key,
                              const PolicyRateLimit *rate, uid_t owner) {
        LedgerLimit *e;

        for (e = *list; e; e = e->next)
                if (strcmp(e->table, table) == 0 && same_key(e->key, key) && same_rate(&e->limit.rate, rate) &&
                    e->owner == owner) {
                        e->limit.users++;
                        return &e->limit;
                }
        if (l->n_limits >= COLLECT_LEDGER_LIMITS_MAX)
                return NULL;
        e = calloc(1, sizeof(LedgerLimit));
        if (!e || !(e->table = strdup(table)) || (key && !(e->key = strdup(key)))) {
                if (e)
                        free(e->table);
                free(e);
                return NULL;
        }
        collect_limit_init(&e->limit, rate);
        e->owner = owner;
        e->limit.users = 1;
        e->next = *list;
        *list = e;
        l->n_limits++;
        return &e->limit;
}

static LedgerProcess *process_find(const CollectLedger *l, pid_t pid, uint64_t start_time) {
        for (LedgerProcess *p = l->processes; p; p = p->next)
                if (p->pid == pid && p->start_time == start_time)
                        return p;
        return NULL;
}

CollectLimit *collect_ledger_process_limit(CollectLedger *l, pid_t pid, uint64_t start_time,
                                           const PolicyCollect *table) {
        LedgerProcess *p = process_find(l, pid, start_time);

        if (!p) {
                p = calloc(1, sizeof(LedgerProcess));
                if (!p)
                        return NULL;
                *p = (LedgerProcess){ .next = l->processes, .pid = pid, .start_time = start_time };
                l->processes = p;
        }
        p->gone = false; /* a process the walk lists again is alive after all */
        return limit_of(l, &p->limits, table->name, NULL, &table->limit, 0);
}

CollectLimit *collect_ledger_find_process_limit(const CollectLedger *l, pid_t pid, uint64_t start_time,
                                                const PolicyCollect *table) {
        LedgerProcess *p = process_find(l, pid, start_time);

        for (LedgerLimit *e = p ? p->limits : NULL; e; e = e->next)
                if (strcmp(e->table, table->name) == 0 && same_rate(&e->limit.rate, &table->limit))
                        return &e->limit;
        return NULL;
}

CollectLimit *collect_ledger_table_limit(CollectLedger *l, const PolicyCollect *table, uid_t owner) {
        return limit_of(l, &l->tables, table->name, NULL, &table->limit_total, owner);
}

CollectLimit *collect_ledger_key_limit(CollectLedger *l, const PolicyCollect *table, const char *key) {
        return limit_of(l, &l->keys, table->name, key, &table->limit, 0);
}

void collect_ledger_release(CollectLedger *l, CollectLimit *limit) {
        if (limit && limit->users > 0)
                limit->users--;
}

void collect_ledger_forget_process(CollectLedger *l, pid_t pid, uint64_t start_time) {
        LedgerProcess *p = process_find(l, pid, start_time);

        if (p)
                p->gone = true;
        collect_ledger_prune(l, NULL, 0);
}

/* Does @policy (NULL: any) have a table named @table whose limit (@total: limit_total) is @rate? */
static bool policy_has(const Policy *policy, const char *table, const PolicyRateLimit *rate, bool total) {
        if (!policy)
                return true;
        for (size_t i = 0; i < policy->n_collect; i++)
                if (strcmp(policy->collect[i].name, table) == 0 &&
                    same_rate(total ? &policy->collect[i].limit_total : &policy->collect[i].limit, rate))
                        return true;
        return false;
}

/* Drops from @list what nobody holds and what is of no use: @all (the process is gone), a table
 * @policy no longer has, or nothing held back at @now_usec (0: not looked at). */
static void prune_list(CollectLedger *l, LedgerLimit **list, bool all, const Policy *policy, bool total,
                       uint64_t now_usec) {
        for (LedgerLimit **i = list; *i;) {
                LedgerLimit *e = *i;
                bool useless = all || !policy_has(policy, e->table, &e->limit.rate, total) ||
                               (now_usec > 0 && !collect_limit_holds(&e->limit, now_usec));

                if (e->limit.users == 0 && useless) {
                        *i = e->next;
                        limit_free(l, e);
                } else
                        i = &e->next;
        }
}

void collect_ledger_prune(CollectLedger *l, const Policy *policy, uint64_t now_usec) {
        for (LedgerProcess **i = &l->processes; *i;) {
                LedgerProcess *p = *i;

                prune_list(l, &p->limits, p->gone, policy, false, now_usec);
                if (!p->limits) {
                        *i = p->next;
                        free(p);
                } else
                        i = &p->next;
        }
        prune_list(l, &l->tables, false, policy, true, now_usec);
        prune_list(l, &l->keys, false, policy, false, now_usec);
}

void collect_ledger_visit_processes(const CollectLedger *l, void (*visit)(pid_t pid, uint64_t start_time,
                                                                         void *userdata),
                                    void *userdata) {
        for (const LedgerProcess *p = l->processes; p; p = p->next)
                if (!p->gone)
                        visit(p->pid, p->start_time, userdata);
}

unsigned collect_ledger_size(const CollectLedger *l) {
        return l->n_limits;
}
