/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The bookkeeping of running dumps and sessions per process, per requester and in all
 * (admission.h); the broker owns one Admission.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>

#include "agent/loop/admission.h"

typedef struct Running {
        AdmissionKind kind;
        AdmissionKey key;
} Running;

struct Admission {
        Running *running;
        size_t n, allocated;
};

Admission *admission_new(void) {
        return calloc(1, sizeof(Admission));
}

Admission *admission_free(Admission *a) {
        if (a)
                free(a->running);
        free(a);
        return NULL;
}

static const char *busy_reason(AdmissionKind kind, int which) {
        static const char *const reasons[_ADMISSION_KIND_MAX][4] = {
                [ADMISSION_DUMP] = { "a dump of this process is already in progress",
                                     "you have as many dumps in progress as max_dumps_per_user allows",
                                     "as many dumps as max_concurrent_dumps allows are in progress",
                                     "as many dumps of users' own processes as max_concurrent_own_dumps allows "
                                     "are in progress" },
                [ADMISSION_SESSION] = { "as many sessions of this process as max_sessions_per_target allows run",
                                        "as many sessions as max_sessions_per_user allows run for you",
                                        "as many sessions as the agent allows run",
                                        "as many sessions as the agent allows run" },
        };
        return reasons[kind][which];
}

int admission_begin(Admission *a, AdmissionKind kind, const AdmissionKey *key, const AdmissionLimits *limits,
                    const char **ret_why) {
        unsigned of_target = 0, of_requester = 0, in_all = 0;

        for (size_t i = 0; i < a->n; i++) {
                const Running *r = &a->running[i];
                if (r->kind != kind)
                        continue;
                in_all += r->key.own == key->own; /* the pools are apart; a process and a requester are not */
                of_target += r->key.pid == key->pid && r->key.start_time == key->start_time;
                of_requester += !r->key.watch && r->key.requester == key->requester;
        }
        if (of_target >= limits->per_target || of_requester >= limits->per_requester ||
            (limits->in_all > 0 && in_all >= limits->in_all + (key->requester == 0))) {
                *ret_why = busy_reason(kind, of_target >= limits->per_target          ? 0
                                             : of_requester >= limits->per_requester ? 1
                                             : key->own                              ? 3
                                                                                     : 2);
                return ADMISSION_E_BUSY;
        }
        if (a->n == a->allocated) {
                size_t n = a->allocated ? a->allocated * 2 : 16;
                Running *grown = realloc(a->running, n * sizeof(*grown));
                if (!grown)
                        return -ENOMEM;
                a->running = grown;
                a->allocated = n;
        }
        a->running[a->n++] = (Running){ .kind = kind, .key = *key };
        return 0;
}

void admission_end(Admission *a, AdmissionKind kind, const AdmissionKey *key) {
        for (size_t i = 0; i < a->n; i++) {
                Running *r = &a->running[i];
                if (r->kind == kind && r->key.pid == key->pid && r->key.start_time == key->start_time &&
                    r->key.requester == key->requester && r->key.own == key->own && r->key.watch == key->watch) {
                        *r = a->running[--a->n];
                        return;
                }
        }
}

/* A session of @key, within @limits: *@ret_key on success. */
static int begin_session(Admission *a, const AdmissionKey *key, const AdmissionLimits *limits, AdmissionKey *ret_key,
                         const char **ret_why) {
        int r;

        r = admission_begin(a, ADMISSION_SESSION, key, limits, ret_why);
        if (r == 0)
                *ret_key = *key;
        return r;
}

int admission_begin_watch(Admission *a, pid_t pid, uint64_t start_time, uid_t owner, unsigned per_target,
                          AdmissionKey *ret_key, const char **ret_why) {
        AdmissionKey key = { .pid = pid, .start_time = start_time, .requester = owner, .watch = true };

        return begin_session(a, &key, &(AdmissionLimits){ .per_target = per_target, .per_requester = UINT_MAX },
                             ret_key, ret_why);
}

int admission_begin_agent_session(Admission *a, pid_t pid, uint64_t start_time, uid_t owner, unsigned per_target,
                                  unsigned per_owner, AdmissionKey *ret_key, const char **ret_why) {
        return begin_session(a, &(AdmissionKey){ .pid = pid, .start_time = start_time, .requester = owner },
                             &(AdmissionLimits){ .per_target = per_target, .per_requester = per_owner }, ret_key,
                             ret_why);
}
