/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Names beside ids (audit-names.h): the process's one cache of user and group names, filled by
 * workers from NSS and, in the loop, by what workers tell it; the records take names from it.
 */
#include <assert.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/audit/audit-names.h"
#include "common/cleanup.h"
#include "common/duration.h"
#include "common/text.h"

/* Names remembered, users and groups together; the oldest goes first. */
#define AUDIT_NAMES_CACHED 128
/* A worker looks a name up again after this long, so that a renamed user shows up in time; the
 * loop keeps what a worker last told it (a session's end is recorded with the names of its start). */
#define AUDIT_NAME_TTL_USEC (5 * 60 * USEC_PER_SEC)
/* getpwuid_r()'s buffer; an entry that needs more goes without a name */
#define AUDIT_NSS_BUFFER 16384

typedef enum AuditNameKind {
        AUDIT_NAME_USER = 1,
        AUDIT_NAME_GROUP,
} AuditNameKind;

typedef struct AuditNameEntry {
        AuditNameKind kind;     /* 0: a free slot */
        uint32_t id;
        uint64_t at_usec;
        char name[AUDIT_NAME_MAX];
} AuditNameEntry;

/* The loop's cache, and each worker's own (a worker starts with the loop's as it was at the fork). */
static AuditNameEntry audit_names[AUDIT_NAMES_CACHED];

static uint64_t audit_now_usec(void) {
        struct timespec ts;

        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * USEC_PER_SEC + (uint64_t)ts.tv_nsec / 1000;
}

static const char *audit_name_cached(AuditNameKind kind, uint32_t id, uint64_t max_age_usec) {
        uint64_t now = audit_now_usec();

        assert(kind == AUDIT_NAME_USER || kind == AUDIT_NAME_GROUP); /* kind 0 is a free slot */
        if (id == (uint32_t)-1)
                return NULL;
        for (size_t i = 0; i < AUDIT_NAMES_CACHED; i++) {
                const AuditNameEntry *e = &audit_names[i];
                if (e->kind == kind && e->id == id && now - e->at_usec < max_age_usec)
                        return e->name;
        }
        return NULL;
}

/* A name goes into messages as it is: one word of valid UTF-8, no control character, space or backslash. */
static bool audit_name_is_plain(const char *name, size_t len) {
        if (len == 0 || len >= AUDIT_NAME_MAX || !utf8_is_valid(name, len))
                return false;
        for (size_t i = 0; i < len; i++)
                if ((unsigned char)name[i] <= ' ' || name[i] == '\x7f' || name[i] == '\\')
                        return false;
        return true;
}

/* What the loop's records take: the name a worker last told it, however old. */
static const char *audit_name_known(AuditNameKind kind, uint32_t id) {
        return audit_name_cached(kind, id, UINT64_MAX);
}

const char *audit_user_name(uid_t uid) {
        return audit_name_known(AUDIT_NAME_USER, uid);
}

const char *audit_group_name(gid_t gid) {
        return audit_name_known(AUDIT_NAME_GROUP, gid);
}

static void audit_name_remember(AuditNameKind kind, uint32_t id, const char *name) {
        AuditNameEntry *slot = &audit_names[0];
        size_t len = strnlen(name, AUDIT_NAME_MAX);

        assert(kind == AUDIT_NAME_USER || kind == AUDIT_NAME_GROUP);
        if (id == (uint32_t)-1 || !audit_name_is_plain(name, len))
                return;
        for (size_t i = 0; i < AUDIT_NAMES_CACHED; i++) {
                AuditNameEntry *e = &audit_names[i];
                if (e->kind == kind && e->id == id) {
                        slot = e;
                        break;
                }
                if (e->at_usec < slot->at_usec)
                        slot = e; /* a free slot is the oldest of all */
        }
        *slot = (AuditNameEntry){ .kind = kind, .id = id, .at_usec = audit_now_usec() };
        memcpy(slot->name, name, len);
}

/* The name from this process's cache, else from NSS (which may block), into @buf; "" when there is none. */
static void audit_name_resolve(AuditNameKind kind, uint32_t id, char buf[static AUDIT_NAME_MAX]) {
        _cleanup_free_ char *nss = NULL;
        const char *name = audit_name_cached(kind, id, AUDIT_NAME_TTL_USEC);

        buf[0] = '\0';
        if (!name && id != (uint32_t)-1 && (nss = malloc(AUDIT_NSS_BUFFER))) {
                struct passwd pw, *pwp = NULL;
                struct group gr, *grp = NULL;

                if (kind == AUDIT_NAME_USER && getpwuid_r(id, &pw, nss, AUDIT_NSS_BUFFER, &pwp) == 0 && pwp)
                        name = pwp->pw_name;
                else if (kind == AUDIT_NAME_GROUP && getgrgid_r(id, &gr, nss, AUDIT_NSS_BUFFER, &grp) == 0 && grp)
                        name = grp->gr_name;
                if (name)
                        audit_name_remember(kind, id, name);
        }
        if (name && audit_name_is_plain(name, strnlen(name, AUDIT_NAME_MAX)))
                strcpy(buf, name);
}

void audit_names_resolve(AuditNames *ret, uid_t client_uid, gid_t client_gid, uid_t target_uid) {
        *ret = (AuditNames){ .client_uid = client_uid, .client_gid = client_gid, .target_uid = target_uid };
        audit_name_resolve(AUDIT_NAME_USER, client_uid, ret->client_user);
        audit_name_resolve(AUDIT_NAME_GROUP, client_gid, ret->client_group);
        audit_name_resolve(AUDIT_NAME_USER, target_uid, ret->target_user);
}

void audit_names_remember(const AuditNames *n) {
        /* the worker's strings: NUL-terminated within their arrays, or not names */
        if (memchr(n->client_user, '\0', AUDIT_NAME_MAX))
                audit_name_remember(AUDIT_NAME_USER, n->client_uid, n->client_user);
        if (memchr(n->client_group, '\0', AUDIT_NAME_MAX))
                audit_name_remember(AUDIT_NAME_GROUP, n->client_gid, n->client_group);
        if (memchr(n->target_user, '\0', AUDIT_NAME_MAX))
                audit_name_remember(AUDIT_NAME_USER, n->target_uid, n->target_user);
}

bool audit_names_known(uid_t client_uid, gid_t client_gid, uid_t target_uid) {
        return audit_name_known(AUDIT_NAME_USER, client_uid) && audit_name_known(AUDIT_NAME_GROUP, client_gid) &&
               (target_uid == (uid_t)-1 || audit_name_known(AUDIT_NAME_USER, target_uid));
}
