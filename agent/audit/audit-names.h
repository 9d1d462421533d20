/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The names of the ids a record carries: looked up by workers, remembered by the loop (audit-names.c). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Names beside ids: records carry DSAGENT_CLIENT_USER=, DSAGENT_CLIENT_GROUP=
 * and DSAGENT_TARGET_USER= next to the uids and gid. A lookup goes through
 * NSS, which may block (sssd, LDAP), so the loop never makes one: a worker
 * does, in the job that opens a request's target or lists candidates for ps
 * (blocking costs that one request its deadline), and sends the names back.
 * The loop remembers them in a small bounded cache, and a record takes what
 * the cache holds: a name it does not hold is left out, never waited for.
 */
#define AUDIT_NAME_MAX 64       /* a longer name is left out */

typedef struct AuditNames {
        uint32_t client_uid, client_gid, target_uid; /* (uint32_t) -1: not asked */
        char client_user[AUDIT_NAME_MAX];            /* "": not known */
        char client_group[AUDIT_NAME_MAX];
        char target_user[AUDIT_NAME_MAX];
} AuditNames;

/* In a worker only (it may block): the names of these ids, from NSS or this process's own cache. */
void audit_names_resolve(AuditNames *ret, uid_t client_uid, gid_t client_gid, uid_t target_uid);
/* In the loop: keep what a worker resolved, for the records to come. */
void audit_names_remember(const AuditNames *n);
/*
 * In the loop: whether a record about these ids would carry all their names, as a worker's job
 * gives them; @target_uid (uid_t)-1 is a record about no process (a listing), with no target's name.
 */
bool audit_names_known(uid_t client_uid, gid_t client_gid, uid_t target_uid);

/* In the loop: the name a worker last told it of @uid (@gid), however old; NULL when none is known. */
const char *audit_user_name(uid_t uid);
const char *audit_group_name(gid_t gid);
