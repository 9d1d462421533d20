/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* When a [[collect]] table fires on one process: the conditions, the limit (collect-trigger.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect-trigger.h"

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

/*
 * Adds @usec, dropping the oldest when full. Grown a few at a time, so that a table that
 * allows many costs memory only on processes that use it.
 *
 * Return: 0, or -ENOMEM (nothing added).
 */
static int stamps_push(CollectStamps *s, uint64_t usec) {
        if (s->n == s->capacity) {
                s->usec[s->head] = usec;
                s->head = (s->head + 1) % s->capacity;
                return 0;
        }
        if (s->n == s->allocated) {
                /* not yet wrapped: head is 0 while n < capacity */
                unsigned grown = s->allocated ? s->allocated * 2 : 4;
                uint64_t *usecs;

                if (grown > s->capacity)
                        grown = s->capacity;
                usecs = realloc(s->usec, grown * sizeof(uint64_t));
                if (!usecs)
                        return -ENOMEM;
                s->usec = usecs;
                s->allocated = grown;
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

void collect_trigger_init(CollectTrigger *t, const PolicyCollect *table) {
        *t = (CollectTrigger){ .table = table };
        stamps_init(&t->seen, table->exception_count ? table->exception_count : 1);
        stamps_init(&t->fired, table->limit.count);
}

void collect_trigger_done(CollectTrigger *t) {
        free(t->seen.usec);
        free(t->fired.usec);
        *t = (CollectTrigger){};
}

/* The condition is met at @now_usec: does the limit let the action run? It counts if it does. */
static CollectVerdict limit_check(CollectTrigger *t, uint64_t now_usec) {
        const CollectStamps *f = &t->fired;

        if (f->n == f->capacity && now_usec - stamps_oldest(f) < t->table->limit.period_usec) {
                t->n_limited++;
                return COLLECT_LIMITED;
        }
        /* no room to remember it: then it does not run, which errs on the side of fewer artifacts */
        if (stamps_push(&t->fired, now_usec) < 0) {
                t->n_limited++;
                return COLLECT_LIMITED;
        }
        t->n_fired++;
        t->last_fired_usec = now_usec;
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

bool collect_trigger_take_limit(CollectTrigger *to, CollectTrigger *from) {
        CollectStamps kept = to->fired;

        if (strcmp(to->table->name, from->table->name) != 0 || to->table->limit.count != from->table->limit.count ||
            to->table->limit.period_usec != from->table->limit.period_usec)
                return false;
        /* the same count: the same capacity, so the stamps fit as they are */
        to->fired = from->fired;
        from->fired = kept;
        to->n_fired = from->n_fired;
        to->n_limited = from->n_limited;
        to->last_fired_usec = from->last_fired_usec;
        from->n_fired = from->n_limited = from->last_fired_usec = 0;
        return true;
}
