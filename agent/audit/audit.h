/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Audit trail: one structured record per decision and event; the output is audit-output.h, the names of ids audit-names.h */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "agent/audit/audit-names.h"
#include "agent/audit/audit-output.h"

typedef enum AuditDecision {
        AUDIT_DECISION_ALLOWED,
        AUDIT_DECISION_DENIED,
        AUDIT_DECISION_FAILED,
} AuditDecision;

/*
 * The names an env reply returned, for DSAGENT_ENV_NAMES (never a value): each escaped as every
 * value a target controls is, with a space as \x20 too, one space between two; past
 * AUDIT_ENV_NAMES_MAX bytes the rest are only counted.
 */
#define AUDIT_ENV_NAMES_MAX 8192

typedef struct AuditEnvNames {
        char *text;             /* NULL until a name is added */
        size_t size;
        size_t n;               /* names returned */
        size_t n_hidden;        /* of them, with their value withheld (policy_env_value_hidden()) */
        size_t n_left_out;      /* of them, not in text for want of room */
} AuditEnvNames;

int audit_env_names_add(AuditEnvNames *l, const char *name, bool hidden);
void audit_env_names_done(AuditEnvNames *l);

typedef struct AuditRecord {
        uint64_t request_id;
        uid_t client_uid;
        gid_t client_gid;
        pid_t client_pid;
        uint64_t client_pidfd_id; /* 0 when unknown */
        /* whom the client counts against (userns.h), recorded when that is not client_uid: the owner of
         * the user namespace it runs in, a namespace root made ("userns:INODE"), or USERNS_CHARGE_UNKNOWN
         * ("unknown") */
        bool client_charged_other;
        uid_t client_charged_uid;
        const char *command;    /* NULL when no valid request arrived */
        const char *ipc_command; /* a proxied request's diagnostic IPC command, e.g. "CollectTracing2"; or NULL */

        bool have_target;
        pid_t target_pid;
        uid_t target_uid;       /* (uid_t) -1 when unknown */
        const char *target_unit;
        const char *target_exe;
        const char *target_container_id; /* from its cgroup (procfs_cgroup_container()); NULL when none */
        const char *target_pod_uid;
        const char *target_cgroup;
        /* root vouches for that cgroup (Target.cgroup_vouched): else the two names are recorded as unverified */
        bool target_cgroup_vouched;
        bool target_facts_reused; /* decided on facts read for an earlier request (target-cache.h) */
        uint64_t target_facts_age_usec; /* how long before this request they were read */

        AuditDecision decision;
        const char *rule;
        const char *reason;
        bool have_result_count;
        unsigned result_count;  /* e.g. how many processes a listing showed */
        const AuditEnvNames *env; /* env: the variables returned, or NULL */
        int error_errno;        /* a failure's errno (positive), as ERRNO=; 0 when none */
        AuditReservation *reservation; /* room held for it (audit_reserve()), or NULL */
} AuditRecord;

typedef struct AuditPolicyEvent {
        bool loaded;            /* false: refused */
        bool had_policy;        /* refused: a policy loaded before is in force, and stays */
        const char *path;
        size_t n_rules, n_files;
        char *const *errors;    /* "path:line:column: text" */
        size_t n_errors;
} AuditPolicyEvent;

typedef struct AuditDumpEvent {
        const char *origin;     /* NULL: a client's request, refused without its record; "on_start", "collect": stored
                                 * already */
        uint64_t request_id;
        uid_t requester;
        pid_t target_pid;
        uid_t target_uid;
        const char *target_unit;
        const char *target_exe;
        const char *target_container_id; /* NULL when none, as the two below */
        const char *target_pod_uid;
        const char *target_cgroup;
        bool target_cgroup_vouched; /* as AuditRecord's */
        const char *rule;
        const char *path;       /* NULL: handed to the requester unnamed, not stored (dump.h's DUMP_DELIVER_FD_ONLY) */
        uint64_t size;
        const char *dump_type;
        bool readable;          /* whether the requester got read access */
        uint64_t duration_usec; /* from the request to publication */
        AuditReservation *reservation; /* room held for it (audit_reserve()), or NULL */
} AuditDumpEvent;

/* A trace or counters session: one record when the runtime started it, one when it ended. */
typedef struct AuditSessionEvent {
        bool ended;
        const char *origin;     /* NULL: a client's request; "on_start", "collect": the policy's [[on_start]],
                                 * [[collect]] */
        uint64_t request_id;
        uid_t requester;
        pid_t target_pid;
        uid_t target_uid;
        const char *target_unit;
        const char *target_exe;
        const char *target_container_id; /* NULL when none, as the two below */
        const char *target_pod_uid;
        const char *target_cgroup;
        bool target_cgroup_vouched; /* as AuditRecord's */
        const char *rule;
        const char *kind;       /* "trace" or "counters" */
        const char *profile;    /* NULL when providers were named */
        const char *providers;  /* Name:0xKEYWORDS:LEVEL[:args],... as the runtime was asked */
        const char *ipc_command; /* a tool's session (dsctl port): its CollectTracing version; else NULL */
        const char *ipc_options; /* and what else it asked for: rundown keywords, stacks, format, filters */
        uint32_t buffer_mb;
        uint64_t duration_limit_usec;
        uint64_t size_limit;
        /* when ended */
        uint64_t bytes;
        const char *how;        /* duration, stopped, size-limit, client-gone, target-ended, ... */
        bool complete;          /* the runtime closed the stream after our stop */
        uint64_t duration_usec;
        AuditReservation *reservation; /* room held for it (audit_reserve()), or NULL */
} AuditSessionEvent;

/*
 * A runtime that connected in on a port (ports.h): registered, refused, resumed
 * by the agent after suspend_timeout, or gone. Its identity is the kernel's
 * (SO_PEERCRED, SO_PEERPIDFD); the advertised pid and cookie are the runtime's.
 */
typedef struct AuditPortEvent {
        const char *event;        /* registered, refused, auto-resumed, resume-failed, gone, on-start-failed,
                                   * on-start-skipped */
        const char *path;         /* the port */
        pid_t pid;                /* the peer, in the agent's pid namespace */
        uid_t uid;
        gid_t gid;
        uint64_t pidfd_id;        /* its pidfs inode, 0 when unknown */
        uid_t charged_uid;        /* whom it counts against (userns.h): recorded when not uid */
        uint64_t advertised_pid;  /* 0: no advertise was read */
        const char *cookie;       /* the advertised cookie, hex; NULL when none was read */
        bool suspended;           /* registered suspended at startup */
        uint64_t suspend_timeout_usec;
        const char *reason;
} AuditPortEvent;

/*
 * A policy [[collect]] table (collect.h) and a process it covers: "fired" when its condition was
 * met and its limit let the action run (with the value seen, and how the action began); then,
 * for an action that ends later (a trace), "collected" or "failed".
 */
typedef struct AuditCollectEvent {
        const char *event;      /* fired, collected, failed */
        const char *table;
        const char *trigger;    /* "counter" or "exception" */
        const char *what;       /* the counter ("Provider:name") or the exception type the table watches */
        pid_t pid;
        uid_t uid;
        const char *unit;       /* NULL when none */
        bool has_value;
        double value;           /* fired on a counter: the sample's value */
        const char *exception;  /* fired on an exception: the type seen (its full name); else NULL */
        const char *action;     /* dump, stacks, trace */
        const char *result;     /* what came of the action, or why the watch failed */
        uint64_t limited;       /* times the condition was met past the limit since the last record */
        AuditReservation *reservation; /* room held for it (audit_reserve()), or NULL */
} AuditCollectEvent;

/*
 * Retention (agent/dumps/retention.h) and one artifact of dump_dir: "removing", recorded before the
 * file is removed (a record that cannot be written stops the removal), and "not-removed" when the
 * removal then failed (the file was gone already, say), with the errno.
 */
typedef struct AuditRetentionEvent {
        const char *event;      /* removing, not-removed */
        const char *reason;     /* max_age, max_files, max_use_per_user, table-max_use, make-room */
        const char *detail;     /* for people: the limit and the file's age, its owner's or table's total ... */
        const char *path;
        uint64_t size;          /* its blocks on disk */
        uint64_t age_usec;      /* since it was written */
        const char *dump_type;  /* its label: a dump type, trace, stacks, counters, gcdump; NULL when unlabelled */
        uid_t requester;        /* who asked for it; (uid_t) -1: a table's, or not labelled */
        const char *origin;     /* "collect", "on_start": a table's artifact; else NULL */
        const char *table;
        pid_t target_pid;       /* 0 when unlabelled */
        uid_t target_uid;       /* (uid_t) -1 when unlabelled */
        uint64_t for_request_id; /* make-room: the dump it made room for (0 otherwise), and its requester */
        uid_t for_uid;
        int error_errno;        /* not-removed: why */
} AuditRetentionEvent;

/*
 * An artifact's upload to an [egress.NAME] store (agent/egress/egress-upload.h): "queued", recorded before it is
 * handed to the egress process (a record that cannot be written stops it), then its outcome. Never a credential:
 * nothing here comes from the keys' file.
 */
typedef struct AuditEgressEvent {
        const char *event;      /* queued; retry (a transient failure, handed over again after retry_usec);
                                 * outcome (the last word on the upload); restarted (the egress process's server
                                 * died and is started again: error says how, no target, key or path) */
        const char *target;     /* NAME of [egress.NAME] */
        const char *key;        /* the object's key */
        const char *path;       /* the local copy */
        uint64_t request_id;    /* the artifact's request (0: none) */
        const char *rule;       /* the rule or [[collect]] table it came by */
        uint64_t size;
        const char *sha256;     /* outcome: of the file as read; NULL or "" until hashed */
        unsigned parts, attempts;
        uint64_t usec;          /* outcome: from hand-over to answer */
        const char *result;     /* outcome: uploaded, refused, unavailable, mismatch, changed, timeout, garbage,
                                 * busy, failed */
        long http_status;       /* outcome: of the store's last answer; 0: none */
        const char *s3_code;    /* outcome: S3's <Code>; NULL or "" when none */
        const char *error;      /* outcome: what went wrong, in words; NULL when uploaded */
        bool local_removed;     /* outcome: keep_local = false freed the local copy */
        unsigned handover;      /* retry, outcome: which hand-over to the egress process this was (1: the first) */
        uint64_t retry_usec;    /* retry: how long until the next */
} AuditEgressEvent;

/*
 * Each returns 0 when the record went out or waits in order to go out, or a negative errno (-ENOBUFS:
 * no room). A record whose .reservation still holds room takes it and is not refused.
 */
int audit_log_request(AuditSink sink, const AuditRecord *r);
int audit_log_policy(AuditSink sink, const AuditPolicyEvent *e);
int audit_log_dump(AuditSink sink, const AuditDumpEvent *e);
/*
 * audit_log_artifact() - the dump record of an artifact the agent made on its own ([[collect]], [[on_start]]),
 * just published as @name in @dir_fd
 *
 * No artifact without its record: when @e cannot be written and @failure_allowed is false (the policy's
 * audit_failure is not "allow"), @name is removed again, as a client's dump is. Return: 0, or the record's
 * negative errno (the artifact is gone).
 */
int audit_log_artifact(AuditSink sink, bool failure_allowed, int dir_fd, const char *name, const AuditDumpEvent *e);
int audit_log_session(AuditSink sink, const AuditSessionEvent *e);
int audit_log_suppressed(AuditSink sink, uid_t uid, uint64_t count);
int audit_log_port(AuditSink sink, const AuditPortEvent *e);
int audit_log_collect(AuditSink sink, const AuditCollectEvent *e);
/* "removing" is a decision's record: refused (-ENOBUFS) when the queue is full, and then nothing is removed. */
int audit_log_retention(AuditSink sink, const AuditRetentionEvent *e);
/* "queued" is a decision's record: refused (-ENOBUFS) when the queue is full, and then nothing is uploaded. */
int audit_log_egress(AuditSink sink, const AuditEgressEvent *e);
