/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What runs now, counted, so that nobody takes more than a fair share: dumps
 * (one per process at a time, max_dumps_per_user for each requester, and in
 * all max_concurrent_dumps, or max_concurrent_own_dumps for dumps users take
 * of their own processes, which thus never hold the host's slots from anyone
 * else) and trace or counters sessions (per process and per requester). Pure bookkeeping: the caller says what
 * starts and what ends. The requester is the uid charged (userns.h); root
 * (requester 0) has one more in all than anyone, so a flood of others never
 * shuts the administrator out.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum {
        _ADMISSION_E_SUCCESS,
        ADMISSION_E_BUSY, /* over a limit; *ret_why says which */
};

typedef struct Admission Admission;

/* Something running for @requester on the process @pid started at @start_time. */
typedef struct AdmissionKey {
        pid_t pid;
        uint64_t start_time;
        uid_t requester;
        /* counted in the own pool's in_all, apart from everything else's: a user's dump of its own process */
        bool own;
        /* counted per process only, in no requester's per_requester: a [[collect]] table's watch */
        bool watch;
} AdmissionKey;

typedef struct AdmissionLimits {
        unsigned per_target;    /* dumps: 1; sessions: max_sessions_per_target */
        unsigned per_requester;
        unsigned in_all;        /* of @key's pool (AdmissionKey.own); 0: no bound in all */
} AdmissionLimits;

typedef enum AdmissionKind {
        ADMISSION_DUMP,
        ADMISSION_SESSION,
        _ADMISSION_KIND_MAX,
} AdmissionKind;

Admission *admission_new(void);
Admission *admission_free(Admission *a);

/**
 * admission_begin() - count one more @kind for @key, if the limits allow it
 *
 * Return: 0 (counted: admission_end() must follow), ADMISSION_E_BUSY with
 * *@ret_why, or -ENOMEM.
 */
int admission_begin(Admission *a, AdmissionKind kind, const AdmissionKey *key, const AdmissionLimits *limits,
                    const char **ret_why);
void admission_end(Admission *a, AdmissionKind kind, const AdmissionKey *key);

/**
 * admission_begin_watch() - count a [[collect]] table's watch of a process as one of its sessions
 *
 * The watch of the process @pid started at @start_time counts against @per_target
 * (max_sessions_per_target) with clients' sessions, so that together they never hold more of the
 * runtime's sessions than the policy allows. It is charged to @owner, the process's owner (the uid
 * its work is charged to, userns.h), and counts against no requester's max_sessions_per_user: the
 * tables watch the processes they cover, which is the policy's doing, not the owner's.
 *
 * Return: as admission_begin(); on 0, *@ret_key is what admission_end() takes.
 */
int admission_begin_watch(Admission *a, pid_t pid, uint64_t start_time, uid_t owner, unsigned per_target,
                          AdmissionKey *ret_key, const char **ret_why);

/**
 * admission_begin_agent_session() - count a session the agent opens on its own for @owner
 *
 * For a [[collect]] table's action (a trace, the stacks, counters, a heap dump) and an [[on_start]]
 * trace: work the agent starts of a process, charged to the process's owner (the uid its work is
 * charged to, userns.h) and counted as that owner's own sessions are: against @per_target
 * (max_sessions_per_target) with every session of the process, and against @per_owner
 * (max_sessions_per_user) with the owner's own. So a user's processes get from the agent what the
 * user could ask for, and take nothing another requester needs.
 *
 * Return: as admission_begin(); on 0, *@ret_key is what admission_end() takes.
 */
int admission_begin_agent_session(Admission *a, pid_t pid, uint64_t start_time, uid_t owner, unsigned per_target,
                                  unsigned per_owner, AdmissionKey *ret_key, const char **ret_why);
