/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What retention removes of dump_dir, and why (retention-plan.h): pure. */
#include <errno.h>
#include <stdlib.h>

#include "common/cleanup.h"
#include "agent/dumps/retention-plan.h"

const char *retention_reason_to_string(RetentionReason r) {
        static const char *const names[_RETENTION_REASON_MAX] = {
                [RETENTION_MAX_AGE] = "max_age",
                [RETENTION_MAX_FILES] = "max_files",
                [RETENTION_USER_BUDGET] = "max_use_per_user",
                [RETENTION_TABLE_BUDGET] = "table-max_use",
                [RETENTION_MAKE_ROOM] = "make-room",
        };

        return r >= 0 && r < _RETENTION_REASON_MAX ? names[r] : "unknown";
}

typedef struct Plan {
        const RetentionEntry *entries;
        size_t *oldest_first;   /* indices into entries */
        size_t n;
        bool *taken;
        RetentionVictim *out;
        size_t n_out;
        uint64_t freed;
} Plan;

static const RetentionEntry *sort_entries;

static int by_age(const void *a, const void *b) {
        const RetentionEntry *x = &sort_entries[*(const size_t *)a], *y = &sort_entries[*(const size_t *)b];

        if (x->mtime_usec != y->mtime_usec)
                return x->mtime_usec < y->mtime_usec ? -1 : 1;
        return x->order < y->order ? -1 : x->order > y->order;
}

static void take(Plan *p, size_t i, RetentionReason reason, uint64_t limit, uint64_t total) {
        p->taken[i] = true;
        p->freed += p->entries[i].bytes;
        p->out[p->n_out++] = (RetentionVictim){ .entry = i, .reason = reason, .limit = limit, .total = total };
}

static void plan_age(Plan *p, const RetentionSettings *s) {
        if (s->max_age_usec == 0)
                return;
        for (size_t k = 0; k < p->n; k++) {
                size_t i = p->oldest_first[k];
                uint64_t written = p->entries[i].mtime_usec;

                if (written < s->now_usec && s->now_usec - written > s->max_age_usec)
                        take(p, i, RETENTION_MAX_AGE, s->max_age_usec, s->now_usec - written);
        }
}

/*
 * Who holds an entry, for max_files: the user who asked for it, else its table, else nobody's (root's
 * and unlabelled files, together). Users' uids, tables' indices and "nobody" never share a value.
 */
static int64_t holder_of(const RetentionEntry *e) {
        if (e->requester != (uid_t)-1)
                return (int64_t)e->requester;
        return e->table >= 0 ? -2 - (int64_t)e->table : -1;
}

static int by_holder_then_age(const void *a, const void *b) {
        int64_t x = holder_of(&sort_entries[*(const size_t *)a]), y = holder_of(&sort_entries[*(const size_t *)b]);

        if (x != y)
                return x < y ? -1 : 1;
        return by_age(a, b);
}

/* One holder's files left after age, oldest first: @first in the sorted array, @n of them, @keep to stay. */
typedef struct Holding {
        size_t first, n, keep;
} Holding;

/* What by_spared_file_newest_first() compares: the sorted files, the holdings, the level */
static const size_t *spare_files;
static const Holding *spare_holdings;
static size_t spare_level;

/* The file a holding above the level would lose last, kept at the level: its newest to go. */
static size_t file_at_level(const Holding *h) {
        return spare_files[h->first + h->n - spare_level - 1];
}

/* Holdings (indices) by that file, the newest first: they keep one more when room is left. */
static int by_spared_file_newest_first(const void *a, const void *b) {
        size_t x = file_at_level(&spare_holdings[*(const size_t *)a]),
               y = file_at_level(&spare_holdings[*(const size_t *)b]);

        return -by_age(&x, &y);
}

/*
 * max_files: the files left go, until no more than max_files are, from whoever holds the most (one
 * user's many dumps never count another's out); among holders at the same count, the older file goes
 * first; each holder's own go oldest first. That is: every holder keeps the same number of files, L,
 * the most that fits, or all of theirs when they hold fewer; what room is left keeps one more for the
 * holders above L whose file to go would be the newest. Victims in the order oldest first.
 */
static int plan_files(Plan *p, const RetentionSettings *s) {
        _cleanup_free_ size_t *files = NULL, *above = NULL, *victims = NULL;
        _cleanup_free_ Holding *holdings = NULL;
        size_t n = 0, n_holdings = 0, level = 0, lo, hi, kept = 0, n_above = 0, n_victims = 0, left;

        if (s->max_files == 0)
                return 0;
        files = malloc((p->n ? p->n : 1) * sizeof(size_t));
        holdings = malloc((p->n ? p->n : 1) * sizeof(Holding));
        above = malloc((p->n ? p->n : 1) * sizeof(size_t));
        victims = malloc((p->n ? p->n : 1) * sizeof(size_t));
        if (!files || !holdings || !above || !victims)
                return -ENOMEM;
        for (size_t i = 0; i < p->n; i++)
                if (!p->taken[i])
                        files[n++] = i;
        if (n <= s->max_files)
                return 0;
        sort_entries = p->entries;
        qsort(files, n, sizeof(size_t), by_holder_then_age);
        sort_entries = NULL;
        for (size_t k = 0, end; k < n; k = end) {
                for (end = k; end < n && holder_of(&p->entries[files[end]]) == holder_of(&p->entries[files[k]]); end++)
                        ;
                holdings[n_holdings++] = (Holding){ .first = k, .n = end - k };
        }
        /* the level: the largest L at which everyone keeping min(theirs, L) fits max_files */
        for (lo = 0, hi = n; lo < hi;) {
                size_t mid = lo + (hi - lo + 1) / 2, sum = 0;

                for (size_t h = 0; h < n_holdings; h++)
                        sum += holdings[h].n < mid ? holdings[h].n : mid;
                if (sum <= s->max_files)
                        lo = mid;
                else
                        hi = mid - 1;
        }
        level = lo;
        for (size_t h = 0; h < n_holdings; h++) {
                holdings[h].keep = holdings[h].n < level ? holdings[h].n : level;
                kept += holdings[h].keep;
                if (holdings[h].n > level)
                        above[n_above++] = h;
        }
        /* the room left (fewer than n_above, or the level would be higher) spares the newest files to go */
        spare_files = files;
        spare_holdings = holdings;
        sort_entries = p->entries;
        spare_level = level;
        qsort(above, n_above, sizeof(size_t), by_spared_file_newest_first);
        sort_entries = NULL;
        for (size_t k = 0; k < n_above && kept < s->max_files; k++, kept++)
                holdings[above[k]].keep++;
        for (size_t h = 0; h < n_holdings; h++)
                for (size_t k = 0; k < holdings[h].n - holdings[h].keep; k++)
                        victims[n_victims++] = files[holdings[h].first + k];
        sort_entries = p->entries;
        qsort(victims, n_victims, sizeof(size_t), by_age);
        sort_entries = NULL;
        left = n;
        for (size_t k = 0; k < n_victims; k++, left--)
                take(p, victims[k], RETENTION_MAX_FILES, s->max_files, left);
        return 0;
}

/* Whose budget an entry counts against: its requester's (@tables false) or its table's; -1: none. */
static int64_t owner_of(const RetentionEntry *e, bool tables) {
        if (tables)
                return e->table;
        return e->requester == (uid_t)-1 ? -1 : (int64_t)e->requester;
}

static bool sort_by_table;

static int by_owner_then_age(const void *a, const void *b) {
        int64_t x = owner_of(&sort_entries[*(const size_t *)a], sort_by_table),
                y = owner_of(&sort_entries[*(const size_t *)b], sort_by_table);

        if (x != y)
                return x < y ? -1 : 1;
        return by_age(a, b);
}

/*
 * One owner's artifacts, oldest first (@group, @n of them): its oldest go until what is left fits
 * @budget, but never its newest.
 */
static void plan_group(Plan *p, const size_t *group, size_t n, uint64_t budget, RetentionReason reason) {
        uint64_t total = 0;

        for (size_t k = 0; k < n; k++)
                total += p->entries[group[k]].bytes;
        for (size_t k = 0; k + 1 < n && total > budget; k++) {
                take(p, group[k], reason, budget, total);
                total -= p->entries[group[k]].bytes;
        }
}

/* Each owner's budget (@tables: the tables', else the users'), over what the rules before left. */
static int plan_budgets(Plan *p, const RetentionSettings *s, bool tables) {
        size_t *owned, n = 0;

        owned = malloc((p->n ? p->n : 1) * sizeof(size_t));
        if (!owned)
                return -ENOMEM;
        for (size_t i = 0; i < p->n; i++) {
                int64_t owner = owner_of(&p->entries[i], tables);

                if (p->taken[i] || owner < 0 || (tables && (size_t)owner >= s->n_tables))
                        continue;
                if (tables ? s->tables[owner].max_use > 0 : s->user_max_use > 0)
                        owned[n++] = i;
        }
        sort_entries = p->entries;
        sort_by_table = tables;
        qsort(owned, n, sizeof(size_t), by_owner_then_age);
        sort_entries = NULL;
        for (size_t k = 0, end; k < n; k = end) {
                int64_t owner = owner_of(&p->entries[owned[k]], tables);

                for (end = k; end < n && owner_of(&p->entries[owned[end]], tables) == owner; end++)
                        ;
                plan_group(p, owned + k, end - k, tables ? s->tables[owner].max_use : s->user_max_use,
                           tables ? RETENTION_TABLE_BUDGET : RETENTION_USER_BUDGET);
        }
        free(owned);
        return 0;
}

static void plan_room(Plan *p, const RetentionSettings *s) {
        for (size_t k = 0; k < p->n && p->freed < s->room; k++) {
                size_t i = p->oldest_first[k];
                int t = p->entries[i].table;

                if (!p->taken[i] && t >= 0 && (size_t)t < s->n_tables && s->tables[t].yields)
                        take(p, i, RETENTION_MAKE_ROOM, s->room, p->freed);
        }
}

int retention_plan(const RetentionEntry *entries, size_t n, const RetentionSettings *s, RetentionVictim *ret,
                   size_t *ret_n) {
        Plan p = { .entries = entries, .n = n, .out = ret };
        int r;

        p.oldest_first = malloc((n ? n : 1) * sizeof(size_t));
        p.taken = calloc(n ? n : 1, sizeof(bool));
        if (!p.oldest_first || !p.taken) {
                free(p.oldest_first);
                free(p.taken);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                p.oldest_first[i] = i;
        sort_entries = entries;
        qsort(p.oldest_first, n, sizeof(size_t), by_age);
        sort_entries = NULL;
        plan_age(&p, s);
        r = plan_files(&p, s);
        if (r == 0)
                r = plan_budgets(&p, s, false);
        if (r == 0)
                r = plan_budgets(&p, s, true);
        if (r == 0)
                plan_room(&p, s);
        free(p.oldest_first);
        free(p.taken);
        if (r < 0)
                return r;
        *ret_n = p.n_out;
        return 0;
}
