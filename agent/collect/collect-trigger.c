/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* When a [[collect]] table fires on one process: the conditions, the limits (collect-trigger.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/collect/collect-trigger.h"

static void stamps_init(CollectStamps *s, unsigned capacity) {
        *s = (CollectStamps){ .capacity = capacity };
}

static void stamps_clear(CollectStamps *s) {
        s->n = 0;
        s->head = 0;
}

static uint64_t stamps_oldest(const CollectStamps *s) {
        return s->usec[s->head];
}

static uint64_t stamps_newest(const CollectStamps *s) {
        return s->usec[(s->head + s->n - 1) % s->capacity];
}

/*
 * Room for one more. Grown a few at a time, so that a table that allows many costs memory only on
 * processes that use it.
 *
 * Return: 0, or -ENOMEM.
 */
static int stamps_reserve(CollectStamps *s) {
        unsigned grown;
        uint64_t *usecs;

        if (s->n == s->capacity || s->n < s->allocated)
                return 0;
        /* not yet wrapped: head is 0 while n < capacity */
        grown = s->allocated ? s->allocated * 2 : 4;
        if (grown > s->capacity)
                grown = s->capacity;
        usecs = realloc(s->usec, grown * sizeof(uint64_t));
        if (!usecs)
                return -ENOMEM;
        s->usec = usecs;
        s->allocated = grown;
        return 0;
}

/* Adds @usec, dropping the oldest when full. Return: 0, or -ENOMEM (nothing added). */
static int stamps_push(CollectStamps *s, uint64_t usec) {
        if (stamps_reserve(s) < 0)
                return -ENOMEM;
        if (s->n == s->capacity) {
                s->usec[s->head] = usec;
                s->head = (s->head + 1) % s->capacity;
                return 0;
        }
        s->usec[(s->head + s->n) % s->capacity] = usec;
        s->n++;
        return 0;
}

void collect_table_what(const PolicyCollect *table, char *buf, size_t size) {
        if (table->when == POLICY_COLLECT_WHEN_COUNTER)
                snprintf(buf, size, "%s:%s", table->counter_provider, table->counter_name);
        else if (table->when == POLICY_COLLECT_WHEN_CRASH)
                snprintf(buf, size, "crash");
        else
                snprintf(buf, size, "%s", table->exception_type);
}

void collect_limit_init(CollectLimit *l, const PolicyRateLimit *rate) {
        *l = (CollectLimit){ .rate = *rate };
        stamps_init(&l->fired, rate->count);
}

int collect_result_set(CollectResult *r, bool failed, const char *text, uint64_t size, uint64_t usec, pid_t pid) {
        char *copy = strdup(text);

        collect_result_done(r);
        if (!copy)
                return -ENOMEM;
        *r = (CollectResult){ .failed = failed, .text = copy, .size = size, .usec = usec, .pid = pid };
        return 0;
}

void collect_result_done(CollectResult *r) {
        free(r->text);
        *r = (CollectResult){};
}

void collect_limit_done(CollectLimit *l) {
        free(l->fired.usec);
        collect_result_done(&l->last_result);
        *l = (CollectLimit){};
}

/* Has @l counted its N within the window that ends at @now_usec? */
static bool limit_reached(const CollectLimit *l, uint64_t now_usec) {
        const CollectStamps *f = &l->fired;

        return f->n == f->capacity && now_usec - stamps_oldest(f) < l->rate.period_usec;
}

bool collect_limit_holds(const CollectLimit *l, uint64_t now_usec) {
        return l->fired.n > 0 && now_usec - stamps_newest(&l->fired) < l->rate.period_usec;
}

bool collect_limit_has_room(const CollectLimit *l, uint64_t now_usec) {
        return !limit_reached(l, now_usec);
}

bool collect_limit_take(CollectLimit *l, uint64_t now_usec) {
        if (limit_reached(l, now_usec) || stamps_push(&l->fired, now_usec) < 0) {
                l->n_limited++;
                return false;
        }
        l->n_fired++;
        l->last_fired_usec = now_usec;
        return true;
}

void collect_trigger_init(CollectTrigger *t, const PolicyCollect *table, CollectLimit *process_limit,
                          CollectLimit *table_limit) {
        *t = (CollectTrigger){ .table = table, .process_limit = process_limit, .table_limit = table_limit };
        stamps_init(&t->seen, table->exception_count ? table->exception_count : 1);
}

void collect_trigger_done(CollectTrigger *t) {
        free(t->seen.usec);
        *t = (CollectTrigger){};
}

/* The condition is met at @now_usec: do both limits let the action run? It counts in both if they do. */
static CollectVerdict limit_check(CollectTrigger *t, uint64_t now_usec) {
        CollectLimit *process = t->process_limit, *table = t->table_limit;

        /* no room to remember a limit: then it does not run, which errs on the side of fewer artifacts */
        if (!process || !table) {
                if (process)
                        process->n_limited++;
                return COLLECT_LIMITED;
        }
        if (limit_reached(process, now_usec)) {
                process->n_limited++;
                return COLLECT_LIMITED;
        }
        if (limit_reached(table, now_usec) || stamps_reserve(&process->fired) < 0 ||
            stamps_reserve(&table->fired) < 0) {
                process->n_limited++;
                table->n_limited++;
                return COLLECT_LIMITED;
        }
        /* both have room: neither push fails */
        (void)stamps_push(&process->fired, now_usec);
        (void)stamps_push(&table->fired, now_usec);
        process->n_fired++;
        process->last_fired_usec = now_usec;
        table->n_fired++;
        table->last_fired_usec = now_usec;
        return COLLECT_FIRE;
}

/* The value a sample compares against the line; false when it has none. */
static bool sample_value(const NettraceCounter *c, double *ret) {
        switch (c->kind) {
        case NETTRACE_COUNTER_MEAN:
        case NETTRACE_COUNTER_SUM:
        case NETTRACE_COUNTER_GAUGE:
        case NETTRACE_COUNTER_COUNTER:
        case NETTRACE_COUNTER_UP_DOWN:
                if (!c->has_value || c->value != c->value) /* NaN is no value */
                        return false;
                *ret = c->value;
                return true;
        default:
                return false;
        }
}

CollectVerdict collect_trigger_counter(CollectTrigger *t, const NettraceCounter *c, uint64_t now_usec,
                                       double *ret_value) {
        const PolicyCollect *table = t->table;
        CollectVerdict v;
        double value;
        bool beyond;

        if (!policy_collect_counter_matches(table, c->provider, c->name, c->tags) || !sample_value(c, &value))
                return COLLECT_QUIET;
        beyond = (!table->has_above || value > (double)table->above) &&
                 (!table->has_below || value < (double)table->below);
        if (!beyond) {
                t->beyond = false;
                return COLLECT_QUIET;
        }
        if (!t->beyond) {
                t->beyond = true;
                t->beyond_since_usec = now_usec;
        }
        if (now_usec - t->beyond_since_usec < table->for_usec)
                return COLLECT_QUIET;
        t->beyond = false;
        v = limit_check(t, now_usec);
        *ret_value = value;
        return v;
}

CollectVerdict collect_trigger_exception(CollectTrigger *t, const char *type_name, uint64_t now_usec) {
        const PolicyCollect *table = t->table;

        if (!policy_collect_exception_matches(table, type_name))
                return COLLECT_QUIET;
        if (stamps_push(&t->seen, now_usec) < 0)
                return COLLECT_QUIET;
        if (t->seen.n < table->exception_count ||
            (table->exception_count > 1 && now_usec - stamps_oldest(&t->seen) > table->within_usec))
                return COLLECT_QUIET;
        stamps_clear(&t->seen);
        return limit_check(t, now_usec);
}
