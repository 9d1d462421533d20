/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Audit trail: one structured journal record per decision, stderr when there is no journal */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum AuditSink {
        AUDIT_SINK_AUTO,    /* the journal if reachable, else stderr */
        AUDIT_SINK_JOURNAL,
        AUDIT_SINK_STDERR,
} AuditSink;

typedef enum AuditDecision {
        AUDIT_DECISION_ALLOWED,
        AUDIT_DECISION_DENIED,
        AUDIT_DECISION_FAILED,
} AuditDecision;

typedef struct AuditRecord {
        uint64_t request_id;
        uid_t client_uid;
        gid_t client_gid;
        pid_t client_pid;
        uint64_t client_pidfd_id; /* 0 when unknown */
        const char *command;    /* NULL when no valid request arrived */

        bool have_target;
        pid_t target_pid;
        uid_t target_uid;       /* (uid_t) -1 when unknown */
        const char *target_unit;
        const char *target_exe;

        AuditDecision decision;
        const char *rule;
        const char *reason;
        bool have_result_count;
        unsigned result_count;  /* e.g. how many processes a listing showed */
        int error_errno;        /* a failure's errno (positive), as ERRNO=; 0 when none */
} AuditRecord;

typedef struct AuditPolicyEvent {
        bool loaded;            /* false: refused, the previous policy stays */
        const char *path;
        size_t n_rules, n_files;
        char *const *errors;    /* "path:line:column: text" */
        size_t n_errors;
} AuditPolicyEvent;

typedef struct AuditDumpEvent {
        uint64_t request_id;
        uid_t requester;
        pid_t target_pid;
        uid_t target_uid;
        const char *target_unit;
        const char *target_exe;
        const char *rule;
        const char *path;
        uint64_t size;
        const char *dump_type;
        bool readable;          /* whether the requester got read access */
        uint64_t duration_usec; /* from the request to publication */
} AuditDumpEvent;

/* A trace or counters session: one record when the runtime started it, one when it ended. */
typedef struct AuditSessionEvent {
        bool ended;
        uint64_t request_id;
        uid_t requester;
        pid_t target_pid;
        uid_t target_uid;
        const char *target_unit;
        const char *target_exe;
        const char *rule;
        const char *kind;       /* "trace" or "counters" */
        const char *profile;    /* NULL when providers were named */
        const char *providers;  /* Name:0xKEYWORDS:LEVEL[:args],... as the runtime was asked */
        uint32_t buffer_mb;
        uint64_t duration_limit_usec;
        uint64_t size_limit;
        /* when ended */
        uint64_t bytes;
        const char *how;        /* duration, stopped, size-limit, client-gone, target-ended, ... */
        bool complete;          /* the runtime closed the stream after our stop */
        uint64_t duration_usec;
} AuditSessionEvent;

const char *audit_decision_to_string(AuditDecision d);
int audit_sink_from_string(const char *s, AuditSink *ret);
/* 0 when @sink can take records now; -ENOTCONN for the journal without journald. */
int audit_sink_check(AuditSink sink);
int audit_log_request(AuditSink sink, const AuditRecord *r);
int audit_log_policy(AuditSink sink, const AuditPolicyEvent *e);
int audit_log_dump(AuditSink sink, const AuditDumpEvent *e);
int audit_log_session(AuditSink sink, const AuditSessionEvent *e);
int audit_log_suppressed(AuditSink sink, uid_t uid, uint64_t count);
