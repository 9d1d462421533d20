/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Audit records (audit.h): the fields of each decision and event, checked and escaped, with the
 * words people read; handed to the output (audit-output.c), with the names of ids from
 * audit-names.c. Requests, ports and the broker call it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <syslog.h>
#include <unistd.h>

#include "agent/audit/audit-queue.h"
#include "agent/audit/audit.h"
#include "agent/audit/catalog-ids.h"
#include "common/cleanup.h"
#include "eventpipe/counter-format.h"
#include "common/duration.h"
#include "policy/policy.h"
#include "agent/support/test-hooks.h"
#include "common/text.h"
#include "agent/loop/userns.h"

/* a refused policy lists this many of its errors; the first ones say what to fix */
#define AUDIT_POLICY_ERRORS_MAX 16

/* Values that a client or a target controls are escaped: a field can never
 * carry a newline, a second field or a terminal escape. */
static void audit_fields_add_text(AuditFields *f, const char *key, const char *value) {
        _cleanup_free_ char *escaped = NULL;

        if (!value)
                return;
        escaped = text_escape(value, strlen(value));
        if (!escaped) {
                f->error = -ENOMEM;
                return;
        }
        audit_fields_addf(f, "%s=%s", key, escaped);
}

/* A value for people, made from parts of which some are the client's or the target's: escaped whole. */
static void audit_fields_add_textf(AuditFields *f, const char *key, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void audit_fields_add_textf(AuditFields *f, const char *key, const char *fmt, ...) {
        _cleanup_free_ char *s = NULL;
        va_list ap;
        int n;

        if (f->error != 0)
                return;
        va_start(ap, fmt);
        n = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (n < 0) {
                s = NULL;
                f->error = -ENOMEM;
                return;
        }
        audit_fields_add_text(f, key, s);
}

/* ---- the names of an env reply ---- */

int audit_env_names_add(AuditEnvNames *l, const char *name, bool hidden) {
        _cleanup_free_ char *escaped = text_escape(name, strlen(name));
        size_t need = 0;
        char *grown;

        if (!escaped)
                return -ENOMEM;
        for (const char *c = escaped; *c; c++)
                need += *c == ' ' ? 4 : 1;
        l->n++;
        if (hidden)
                l->n_hidden++;
        /* once one is left out, the rest are too: the list stays a prefix of what was returned */
        if (l->n_left_out > 0 || l->size + (l->size > 0) + need > AUDIT_ENV_NAMES_MAX) {
                l->n_left_out++;
                return 0;
        }
        grown = realloc(l->text, l->size + 1 + need + 1);
        if (!grown)
                return -ENOMEM;
        l->text = grown;
        if (l->size > 0)
                l->text[l->size++] = ' ';
        for (const char *c = escaped; *c; c++) {
                if (*c == ' ') {
                        memcpy(l->text + l->size, "\\x20", 4);
                        l->size += 4;
                } else
                        l->text[l->size++] = *c;
        }
        l->text[l->size] = '\0';
        return 0;
}

void audit_env_names_done(AuditEnvNames *l) {
        free(l->text);
        *l = (AuditEnvNames){};
}

/* ---- words for people: the catalog's text uses these fields, which every record of its kind has ---- */

static const char *plural(uint64_t n, const char *one, const char *many) {
        return n == 1 ? one : many;
}

/* "1 byte", "512 bytes", "1.5 KiB", "2.0 GiB" */
static void format_size(char *buf, size_t size, uint64_t bytes) {
        static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
        double v = (double)bytes;
        size_t u = 0;

        if (bytes < 1024) {
                snprintf(buf, size, "%" PRIu64 " %s", bytes, plural(bytes, "byte", "bytes"));
                return;
        }
        for (v /= 1024; v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0]); v /= 1024)
                u++;
        snprintf(buf, size, "%.1f %s", v, units[u]);
}

/* "250 milliseconds", "1 second", "2.5 seconds", "5 minutes", "1 hour" */
static void format_duration(char *buf, size_t size, uint64_t usec) {
        uint64_t n;

        if (usec < USEC_PER_SEC) {
                n = (usec + USEC_PER_MSEC / 2) / USEC_PER_MSEC;
                snprintf(buf, size, "%" PRIu64 " %s", n, plural(n, "millisecond", "milliseconds"));
        } else if (usec % (3600 * USEC_PER_SEC) == 0) {
                n = usec / (3600 * USEC_PER_SEC);
                snprintf(buf, size, "%" PRIu64 " %s", n, plural(n, "hour", "hours"));
        } else if (usec % (60 * USEC_PER_SEC) == 0) {
                n = usec / (60 * USEC_PER_SEC);
                snprintf(buf, size, "%" PRIu64 " %s", n, plural(n, "minute", "minutes"));
        } else if (usec % USEC_PER_SEC == 0) {
                n = usec / USEC_PER_SEC;
                snprintf(buf, size, "%" PRIu64 " %s", n, plural(n, "second", "seconds"));
        } else
                snprintf(buf, size, "%.1f seconds", (double)usec / USEC_PER_SEC);
}

static void audit_fields_add_size(AuditFields *f, const char *key, uint64_t bytes) {
        char text[32];

        format_size(text, sizeof(text), bytes);
        audit_fields_addf(f, "%s=%s", key, text);
}

/* A user as people name them: "alice (uid 1001)", or "uid 1001" when the name is not known. */
static void format_user(char *buf, size_t size, uid_t uid) {
        const char *name = audit_user_name(uid);

        if (name)
                snprintf(buf, size, "%s (uid %u)", name, (unsigned)uid);
        else
                snprintf(buf, size, "uid %u", (unsigned)uid);
}

/* The names beside the ids, when the cache holds them (see AuditNames). */
static void audit_fields_add_names(AuditFields *f, uid_t client_uid, const gid_t *client_gid, uid_t target_uid) {
        audit_fields_add_text(f, "DSAGENT_CLIENT_USER", audit_user_name(client_uid));
        if (client_gid)
                audit_fields_add_text(f, "DSAGENT_CLIENT_GROUP", audit_group_name(*client_gid));
        audit_fields_add_text(f, "DSAGENT_TARGET_USER", audit_user_name(target_uid));
}

static void audit_fields_add_client_text(AuditFields *f, uid_t uid) {
        char who[AUDIT_NAME_MAX + 32];

        if (uid == (uid_t)-1)
                snprintf(who, sizeof(who), "users the agent had no room left to tell apart (uid %u)", (unsigned)uid);
        else
                format_user(who, sizeof(who), uid);
        audit_fields_add_text(f, "DSAGENT_CLIENT_TEXT", who);
}

/* "process 351 of svc (uid 998), unit orders.service, executable /srv/orders/Orders" */
static void audit_fields_add_target_text(AuditFields *f, const char *key, const char *prefix, pid_t pid, uid_t uid,
                                         const char *unit, const char *exe) {
        char owner[AUDIT_NAME_MAX + 32] = "";

        if (uid != (uid_t)-1) {
                strcpy(owner, " of ");
                format_user(owner + 4, sizeof(owner) - 4, uid);
        }
        audit_fields_add_textf(f, key, "%sprocess %d%s%s%s%s%s", prefix, (int)pid, owner, unit ? ", unit " : "",
                               unit ? unit : "", exe ? ", executable " : "", exe ? exe : "");
}

/*
 * The target's container, pod and cgroup (procfs_cgroup_container()), those it has. Where root does not
 * vouch for the cgroup (cgroupfs.h), the names are a delegated subtree's user's claim: fields of their own,
 * so that nothing reading the record takes them for the container.
 */
static void audit_fields_add_container(AuditFields *f, const char *id, const char *pod_uid, const char *cgroup,
                                       bool vouched) {
        audit_fields_add_text(f, vouched ? "DSAGENT_TARGET_CONTAINER_ID" : "DSAGENT_TARGET_UNVERIFIED_CONTAINER_ID",
                              id);
        audit_fields_add_text(f, vouched ? "DSAGENT_TARGET_POD_UID" : "DSAGENT_TARGET_UNVERIFIED_POD_UID", pod_uid);
        audit_fields_add_text(f, "DSAGENT_TARGET_CGROUP", cgroup);
        if (cgroup && !vouched)
                audit_fields_addf(f, "DSAGENT_TARGET_CGROUP_UNVERIFIED=yes");
}

/* What decided, in words: a rule's name is one the policy's syntax allows. */
static void audit_fields_add_rule_text(AuditFields *f, const char *rule, AuditDecision d) {
        if (rule && strcmp(rule, POLICY_RULE_ROOT) == 0)
                audit_fields_addf(f, "DSAGENT_RULE_TEXT=the built-in grant for root");
        else if (rule && strcmp(rule, POLICY_RULE_OWNER) == 0)
                audit_fields_addf(f, "DSAGENT_RULE_TEXT=the built-in grant for the process's own user (owner_access)");
        else if (rule)
                audit_fields_add_textf(f, "DSAGENT_RULE_TEXT", "rule %s", rule);
        else if (d == AUDIT_DECISION_ALLOWED)
                audit_fields_addf(f, "DSAGENT_RULE_TEXT=no single rule: a listing shows only what the requester "
                                     "may see");
        else if (d == AUDIT_DECISION_DENIED)
                audit_fields_addf(f, "DSAGENT_RULE_TEXT=no rule: none grants this, and what none grants is denied");
        else
                audit_fields_addf(f, "DSAGENT_RULE_TEXT=no rule: the request ended before a rule decided it");
}

static const char *audit_decision_to_string(AuditDecision d) {
        switch (d) {
        case AUDIT_DECISION_ALLOWED: return "allowed";
        case AUDIT_DECISION_DENIED: return "denied";
        case AUDIT_DECISION_FAILED: return "failed";
        default: return "unknown";
        }
}

static int audit_priority(AuditDecision d) {
        return d == AUDIT_DECISION_ALLOWED ? LOG_INFO : d == AUDIT_DECISION_DENIED ? LOG_NOTICE : LOG_WARNING;
}

static void audit_fields_add_message(AuditFields *f, const AuditRecord *r) {
        _cleanup_free_ char *reason = NULL;
        char target[32] = "", who[AUDIT_NAME_MAX + 32];

        if (r->have_target)
                snprintf(target, sizeof(target), " pid %d", (int)r->target_pid);
        format_user(who, sizeof(who), r->client_uid);
        reason = text_escape(r->reason ? r->reason : "", r->reason ? strlen(r->reason) : 0);
        if (!reason) {
                f->error = -ENOMEM;
                return;
        }
        audit_fields_addf(f, "MESSAGE=%s %s%s: %s (%s)", who, r->command ? r->command : "(no request)", target,
                          audit_decision_to_string(r->decision), reason);
}

/* What was asked, of which process, in words. */
static void audit_fields_add_request_text(AuditFields *f, const AuditRecord *r) {
        _cleanup_free_ char *asked = NULL;

        if (!r->command) {
                audit_fields_addf(f, "DSAGENT_REQUEST_TEXT=something that was not a valid request");
                return;
        }
        if (asprintf(&asked, "\"%s\"%s", r->command, r->have_target ? " on " : "") < 0) {
                asked = NULL;
                f->error = -ENOMEM;
                return;
        }
        if (r->have_target)
                audit_fields_add_target_text(f, "DSAGENT_REQUEST_TEXT", asked, r->target_pid, r->target_uid,
                                             r->target_unit, r->target_exe);
        else
                audit_fields_add_text(f, "DSAGENT_REQUEST_TEXT", asked);
}

/* The uid a peer counts against (userns.h), where it is not the peer's own. */
static void audit_fields_add_charged(AuditFields *f, const char *key, uid_t charged) {
        if (charged == USERNS_CHARGE_UNKNOWN)
                audit_fields_addf(f, "%s=unknown", key);
        else if (userns_charge_is_namespace(charged))
                audit_fields_addf(f, "%s=userns:%u", key, (unsigned)charged); /* as /proc/PID/ns/user names it */
        else
                audit_fields_addf(f, "%s=%u", key, (unsigned)charged);
}

static void audit_fields_build(AuditFields *f, const AuditRecord *r) {
        audit_fields_addf(f, "MESSAGE_ID=%s", DSAGENT_MESSAGE_REQUEST);
        audit_fields_addf(f, "PRIORITY=%d", audit_priority(r->decision));
        audit_fields_addf(f, "SYSLOG_IDENTIFIER=dsagent");
        audit_fields_add_message(f, r);
        audit_fields_addf(f, "DSAGENT_REQUEST_ID=%016llx", (unsigned long long)r->request_id);
        audit_fields_addf(f, "DSAGENT_CLIENT_UID=%u", (unsigned)r->client_uid);
        audit_fields_addf(f, "DSAGENT_CLIENT_GID=%u", (unsigned)r->client_gid);
        audit_fields_addf(f, "DSAGENT_CLIENT_PID=%d", (int)r->client_pid);
        if (r->client_pidfd_id != 0)
                audit_fields_addf(f, "DSAGENT_CLIENT_PIDFD_ID=%" PRIu64, r->client_pidfd_id);
        if (r->client_charged_other)
                audit_fields_add_charged(f, "DSAGENT_CLIENT_CHARGED_UID", r->client_charged_uid);
        audit_fields_add_names(f, r->client_uid, &r->client_gid, r->have_target ? r->target_uid : (uid_t)-1);
        audit_fields_add_client_text(f, r->client_uid);
        audit_fields_add_text(f, "DSAGENT_COMMAND", r->command);
        audit_fields_add_text(f, "DSAGENT_IPC_COMMAND", r->ipc_command);
        if (r->have_target) {
                audit_fields_addf(f, "DSAGENT_TARGET_PID=%d", (int)r->target_pid);
                if (r->target_uid != (uid_t)-1)
                        audit_fields_addf(f, "DSAGENT_TARGET_UID=%u", (unsigned)r->target_uid);
                audit_fields_add_text(f, "DSAGENT_TARGET_UNIT", r->target_unit);
                audit_fields_add_text(f, "DSAGENT_TARGET_EXE", r->target_exe);
                audit_fields_add_container(f, r->target_container_id, r->target_pod_uid, r->target_cgroup,
                                           r->target_cgroup_vouched);
                if (r->target_facts_reused)
                        audit_fields_addf(f, "DSAGENT_TARGET_FACTS_AGE_MS=%" PRIu64,
                                          r->target_facts_age_usec / 1000);
        }
        audit_fields_add_request_text(f, r);
        audit_fields_addf(f, "DSAGENT_DECISION=%s", audit_decision_to_string(r->decision));
        audit_fields_add_text(f, "DSAGENT_RULE", r->rule);
        audit_fields_add_rule_text(f, r->rule, r->decision);
        audit_fields_add_text(f, "DSAGENT_REASON", r->reason ? r->reason : "none given");
        if (r->have_result_count)
                audit_fields_addf(f, "DSAGENT_RESULT_COUNT=%u", r->result_count);
        if (r->env) {
                audit_fields_addf(f, "DSAGENT_ENV_COUNT=%zu", r->env->n);
                audit_fields_addf(f, "DSAGENT_ENV_REDACTED=%zu", r->env->n_hidden);
                /* escaped as the names were added */
                if (r->env->n_left_out > 0)
                        audit_fields_addf(f, "DSAGENT_ENV_NAMES=%s ... and %zu more", r->env->text ? r->env->text : "",
                                          r->env->n_left_out);
                else
                        audit_fields_addf(f, "DSAGENT_ENV_NAMES=%s", r->env->text ? r->env->text : "");
        }
        if (r->error_errno > 0)
                audit_fields_addf(f, "ERRNO=%d", r->error_errno); /* journald's own field for it */
}

/**
 * audit_log_request() - write the one record of a request's decision
 *
 * Return: 0, or a negative errno when the record could not be written
 * anywhere; callers decide what a lost record means for the request.
 */
int audit_log_request(AuditSink sink, const AuditRecord *r) {
        _cleanup_(audit_fields_done) AuditFields f = {};
        bool held = r->reservation && r->reservation->records > 0; /* then its act may have happened: never refused */
        int k;

        audit_fields_build(&f, r);
        k = audit_output_send(sink, &f, AUDIT_QUEUE_DECISION, r->reservation);
        if (k < 0 && !held)
                audit_output_count_refused(); /* the request is refused: the gap record counts it */
        return k;
}

/**
 * audit_log_policy() - record a policy load, or a refused reload with its errors
 *
 * Return: 0, or a negative errno when the record could not be written anywhere.
 */
int audit_log_policy(AuditSink sink, const AuditPolicyEvent *e) {
        _cleanup_(audit_fields_done) AuditFields f = {};
        _cleanup_free_ char *path = text_escape(e->path, strlen(e->path));
        char outcome[160];

        if (!path)
                return -ENOMEM;
        if (e->loaded)
                snprintf(outcome, sizeof(outcome), "loaded, %zu %s from %zu %s", e->n_rules,
                         plural(e->n_rules, "rule", "rules"), e->n_files, plural(e->n_files, "file", "files"));
        else
                snprintf(outcome, sizeof(outcome), "refused for %zu %s; %s", e->n_errors,
                         plural(e->n_errors, "error", "errors"),
                         e->had_policy ? "the policy loaded before stays in force"
                                       : "no policy has loaded yet, so only root is served, under the built-in "
                                         "rules, until one loads");
        audit_fields_addf(&f, "MESSAGE_ID=%s", DSAGENT_MESSAGE_POLICY);
        audit_fields_addf(&f, "PRIORITY=%d", e->loaded ? LOG_INFO : LOG_ERR);
        audit_fields_addf(&f, "SYSLOG_IDENTIFIER=dsagent");
        audit_fields_addf(&f, "MESSAGE=policy in %s %s", path, outcome);
        audit_fields_add_text(&f, "DSAGENT_POLICY_PATH", e->path);
        audit_fields_addf(&f, "DSAGENT_POLICY_LOADED=%s", e->loaded ? "yes" : "no");
        audit_fields_addf(&f, "DSAGENT_POLICY_OUTCOME=%s", outcome);
        if (e->loaded) {
                audit_fields_addf(&f, "DSAGENT_POLICY_RULES=%zu", e->n_rules);
                audit_fields_addf(&f, "DSAGENT_POLICY_FILES=%zu", e->n_files);
        }
        audit_fields_add_text(&f, "DSAGENT_POLICY_FIRST_ERROR",
                              e->loaded ? "none" : e->n_errors > 0 ? e->errors[0] : "none named");
        for (size_t i = 0; i < e->n_errors && i < AUDIT_POLICY_ERRORS_MAX; i++)
                audit_fields_add_text(&f, "DSAGENT_POLICY_ERROR", e->errors[i]);
        return audit_output_send(sink, &f, AUDIT_QUEUE_EVENT, NULL);
}

/* Who asked for what of which process, under which rule: the fields a dump's
 * and a session's records share with the request's own. */
static void audit_fields_add_subject(AuditFields *f, uint64_t request_id, uid_t requester, pid_t target_pid,
                                     uid_t target_uid, const char *target_unit, const char *target_exe,
                                     const char *rule) {
        audit_fields_addf(f, "DSAGENT_REQUEST_ID=%016" PRIx64, request_id);
        audit_fields_addf(f, "DSAGENT_CLIENT_UID=%u", (unsigned)requester);
        audit_fields_addf(f, "DSAGENT_TARGET_PID=%d", (int)target_pid);
        audit_fields_addf(f, "DSAGENT_TARGET_UID=%u", (unsigned)target_uid);
        audit_fields_add_text(f, "DSAGENT_TARGET_UNIT", target_unit);
        audit_fields_add_text(f, "DSAGENT_TARGET_EXE", target_exe);
        audit_fields_add_text(f, "DSAGENT_RULE", rule);
        audit_fields_add_names(f, requester, NULL, target_uid);
        audit_fields_add_client_text(f, requester);
        audit_fields_add_target_text(f, "DSAGENT_TARGET_TEXT", "", target_pid, target_uid, target_unit, target_exe);
        audit_fields_add_rule_text(f, rule, AUDIT_DECISION_ALLOWED);
}

/**
 * audit_log_dump() - record a published dump: where, how big, of whom, for whom
 *
 * Return: 0, or a negative errno when the record could not be written anywhere.
 */
int audit_log_dump(AuditSink sink, const AuditDumpEvent *e) {
        _cleanup_(audit_fields_done) AuditFields f = {};
        char who[AUDIT_NAME_MAX + 32], size[32], took[48];

        format_user(who, sizeof(who), e->requester);
        format_size(size, sizeof(size), e->size);
        format_duration(took, sizeof(took), e->duration_usec);
        audit_fields_addf(&f, "MESSAGE_ID=%s", DSAGENT_MESSAGE_DUMP);
        audit_fields_addf(&f, "PRIORITY=%d", LOG_INFO);
        audit_fields_addf(&f, "SYSLOG_IDENTIFIER=dsagent");
        if (e->path)
                audit_fields_add_textf(&f, "MESSAGE", "%s dump of pid %d (%s) for %s stored at %s in %s", e->dump_type,
                                       (int)e->target_pid, size, who, e->path, took);
        else
                audit_fields_add_textf(&f, "MESSAGE", "%s dump of pid %d (%s) for %s handed over in %s, not stored",
                                       e->dump_type, (int)e->target_pid, size, who, took);
        audit_fields_add_subject(&f, e->request_id, e->requester, e->target_pid, e->target_uid, e->target_unit,
                                 e->target_exe, e->rule);
        audit_fields_add_container(&f, e->target_container_id, e->target_pod_uid, e->target_cgroup,
                                   e->target_cgroup_vouched);
        audit_fields_add_text(&f, "DSAGENT_DUMP_PATH", e->path);
        audit_fields_addf(&f, "DSAGENT_DUMP_STORED=%s", e->path ? "yes" : "no");
        audit_fields_addf(&f, "DSAGENT_DUMP_SIZE=%" PRIu64, e->size);
        audit_fields_addf(&f, "DSAGENT_DUMP_SIZE_TEXT=%s", size);
        audit_fields_add_text(&f, "DSAGENT_DUMP_TYPE", e->dump_type);
        audit_fields_addf(&f, "DSAGENT_DUMP_READABLE=%s", e->readable ? "yes" : "no");
        audit_fields_addf(&f, "DSAGENT_DURATION_USEC=%" PRIu64, e->duration_usec);
        audit_fields_addf(&f, "DSAGENT_DURATION_TEXT=%s", took);
        /* a client's dump is removed and refused without it (unless room was held for it); a startup trace
         * is there already */
        return audit_output_send(sink, &f, e->origin ? AUDIT_QUEUE_EVENT : AUDIT_QUEUE_DECISION, e->reservation);
}

int audit_log_artifact(AuditSink sink, bool failure_allowed, int dir_fd, const char *name, const AuditDumpEvent *e) {
        int r = test_hook_artifact_record_fails() ? -ENOMEM : audit_log_dump(sink, e);

        if (r >= 0 || failure_allowed)
                return 0;
        (void)unlinkat(dir_fd, name, 0);
        return r;
}

/**
 * audit_log_session() - record a session's start (what was asked of the
 * runtime) or its end (how much was relayed and how it ended)
 *
 * Return: 0, or a negative errno when the record could not be written anywhere.
 */
int audit_log_session(AuditSink sink, const AuditSessionEvent *e) {
        _cleanup_(audit_fields_done) AuditFields f = {};
        char who[AUDIT_NAME_MAX + 32], bytes[32], took[48], limit[48];

        if (e->origin)
                snprintf(who, sizeof(who), "%s %s", e->origin, e->rule ? e->rule : "");
        else
                format_user(who, sizeof(who), e->requester);
        format_size(bytes, sizeof(bytes), e->bytes);
        format_duration(took, sizeof(took), e->duration_usec);
        format_duration(limit, sizeof(limit), e->duration_limit_usec);
        audit_fields_addf(&f, "MESSAGE_ID=%s", e->ended ? DSAGENT_MESSAGE_SESSION_END : DSAGENT_MESSAGE_SESSION_START);
        audit_fields_addf(&f, "PRIORITY=%d", LOG_INFO);
        audit_fields_addf(&f, "SYSLOG_IDENTIFIER=dsagent");
        if (e->ended)
                audit_fields_add_textf(&f, "MESSAGE", "%s session of pid %d for %s ended (%s): %s in %s%s", e->kind,
                                       (int)e->target_pid, who, e->how, bytes, took,
                                       e->complete ? "" : ", incomplete");
        else
                audit_fields_add_textf(&f, "MESSAGE", "%s session of pid %d for %s started, for at most %s", e->kind,
                                       (int)e->target_pid, who, limit);
        audit_fields_add_subject(&f, e->request_id, e->requester, e->target_pid, e->target_uid, e->target_unit,
                                 e->target_exe, e->rule);
        audit_fields_add_container(&f, e->target_container_id, e->target_pod_uid, e->target_cgroup,
                                   e->target_cgroup_vouched);
        audit_fields_add_text(&f, "DSAGENT_SESSION_KIND", e->kind);
        audit_fields_add_text(&f, "DSAGENT_SESSION_ORIGIN", e->origin);
        audit_fields_add_text(&f, "DSAGENT_TRACE_PROFILE", e->profile);
        audit_fields_add_text(&f, "DSAGENT_PROVIDERS", e->providers ? e->providers : "none");
        audit_fields_add_text(&f, "DSAGENT_IPC_COMMAND", e->ipc_command);
        audit_fields_add_text(&f, "DSAGENT_IPC_OPTIONS", e->ipc_options);
        audit_fields_addf(&f, "DSAGENT_BUFFER_MB=%u", e->buffer_mb);
        audit_fields_addf(&f, "DSAGENT_DURATION_LIMIT_USEC=%" PRIu64, e->duration_limit_usec);
        audit_fields_addf(&f, "DSAGENT_DURATION_LIMIT_TEXT=%s", limit);
        audit_fields_addf(&f, "DSAGENT_SIZE_LIMIT=%" PRIu64, e->size_limit);
        audit_fields_add_size(&f, "DSAGENT_SIZE_LIMIT_TEXT", e->size_limit);
        if (e->ended) {
                audit_fields_addf(&f, "DSAGENT_SESSION_BYTES=%" PRIu64, e->bytes);
                audit_fields_addf(&f, "DSAGENT_SESSION_BYTES_TEXT=%s", bytes);
                audit_fields_add_text(&f, "DSAGENT_SESSION_END", e->how);
                audit_fields_addf(&f, "DSAGENT_SESSION_COMPLETE=%s", e->complete ? "yes" : "no");
                audit_fields_addf(&f, "DSAGENT_DURATION_USEC=%" PRIu64, e->duration_usec);
                audit_fields_addf(&f, "DSAGENT_DURATION_TEXT=%s", took);
        }
        /* a client's session is not started without its start record; its end, and an [[on_start]]
         * trace, have happened whatever becomes of the record */
        return audit_output_send(sink, &f, e->ended || e->origin ? AUDIT_QUEUE_EVENT : AUDIT_QUEUE_DECISION,
                                e->reservation);
}

/**
 * audit_log_suppressed() - record how many requests of @uid were refused as too many
 *
 * @uid is whom they were charged to (userns.h): a uid, or a user namespace root made, or
 * USERNS_CHARGE_UNKNOWN, recorded in DSAGENT_CLIENT_CHARGED_UID instead of DSAGENT_CLIENT_UID.
 *
 * Return: 0, or a negative errno when the record could not be written anywhere.
 */
int audit_log_suppressed(AuditSink sink, uid_t uid, uint64_t count) {
        _cleanup_(audit_fields_done) AuditFields f = {};
        char who[AUDIT_NAME_MAX + 32];
        /* a charge that is no uid: the peers of a namespace root made, or those gone before they were told */
        bool no_uid = uid == USERNS_CHARGE_UNKNOWN || userns_charge_is_namespace(uid);

        if (userns_charge_is_namespace(uid))
                snprintf(who, sizeof(who), "peers in user namespace %u", (unsigned)uid);
        else if (uid == USERNS_CHARGE_UNKNOWN)
                snprintf(who, sizeof(who), "peers whose process was gone before they were told apart");
        else
                format_user(who, sizeof(who), uid);
        audit_fields_addf(&f, "MESSAGE_ID=%s", DSAGENT_MESSAGE_SUPPRESSED);
        audit_fields_addf(&f, "PRIORITY=%d", LOG_WARNING);
        audit_fields_addf(&f, "SYSLOG_IDENTIFIER=dsagent");
        audit_fields_add_textf(&f, "MESSAGE", "%s: %" PRIu64 " %s refused as too many", who, count,
                               plural(count, "request", "requests"));
        if (no_uid) {
                audit_fields_add_charged(&f, "DSAGENT_CLIENT_CHARGED_UID", uid);
                audit_fields_add_text(&f, "DSAGENT_CLIENT_TEXT", who);
        } else {
                audit_fields_addf(&f, "DSAGENT_CLIENT_UID=%u", (unsigned)uid);
                audit_fields_add_names(&f, uid, NULL, (uid_t)-1);
                audit_fields_add_client_text(&f, uid);
        }
        audit_fields_addf(&f, "DSAGENT_SUPPRESSED=%" PRIu64, count);
        audit_fields_addf(&f, "DSAGENT_SUPPRESSED_TEXT=%" PRIu64 " %s", count, plural(count, "request", "requests"));
        return audit_output_send(sink, &f, AUDIT_QUEUE_EVENT, NULL);
}

/**
 * audit_log_port() - record what became of a runtime that connected in on a port
 *
 * Return: 0, or a negative errno when the record could not be written anywhere.
 */
int audit_log_port(AuditSink sink, const AuditPortEvent *e) {
        _cleanup_(audit_fields_done) AuditFields f = {};
        char who[AUDIT_NAME_MAX + 32], limit[48];
        bool refused = strcmp(e->event, "refused") == 0 || strcmp(e->event, "resume-failed") == 0 ||
                       strncmp(e->event, "on-start-", 9) == 0;

        format_user(who, sizeof(who), e->uid);
        format_duration(limit, sizeof(limit), e->suspend_timeout_usec);
        audit_fields_addf(&f, "MESSAGE_ID=%s", DSAGENT_MESSAGE_PORT);
        audit_fields_addf(&f, "PRIORITY=%d", refused ? LOG_WARNING : LOG_INFO);
        audit_fields_addf(&f, "SYSLOG_IDENTIFIER=dsagent");
        audit_fields_add_textf(&f, "MESSAGE", "runtime of pid %d (%s) on port %s: %s: %s", (int)e->pid, who, e->path,
                               e->event, e->reason ? e->reason : "");
        audit_fields_add_text(&f, "DSAGENT_PORT_EVENT", e->event);
        audit_fields_add_text(&f, "DSAGENT_PORT_PATH", e->path);
        audit_fields_add_text(&f, "DSAGENT_REASON", e->reason);
        audit_fields_addf(&f, "DSAGENT_TARGET_PID=%d", (int)e->pid);
        audit_fields_addf(&f, "DSAGENT_TARGET_UID=%u", (unsigned)e->uid);
        audit_fields_addf(&f, "DSAGENT_TARGET_GID=%u", (unsigned)e->gid);
        if (e->pidfd_id != 0)
                audit_fields_addf(&f, "DSAGENT_TARGET_PIDFD_ID=%" PRIu64, e->pidfd_id);
        if (e->charged_uid != e->uid)
                audit_fields_add_charged(&f, "DSAGENT_TARGET_CHARGED_UID", e->charged_uid);
        audit_fields_add_names(&f, (uid_t)-1, NULL, e->uid);
        audit_fields_add_target_text(&f, "DSAGENT_TARGET_TEXT", "", e->pid, e->uid, NULL, NULL);
        if (e->advertised_pid != 0)
                audit_fields_addf(&f, "DSAGENT_ADVERTISED_PID=%" PRIu64, e->advertised_pid);
        audit_fields_add_text(&f, "DSAGENT_RUNTIME_COOKIE", e->cookie);
        if (strcmp(e->event, "registered") == 0) {
                audit_fields_addf(&f, "DSAGENT_SUSPENDED=%s", e->suspended ? "yes" : "no");
                audit_fields_addf(&f, "DSAGENT_SUSPEND_TIMEOUT_USEC=%" PRIu64, e->suspend_timeout_usec);
                audit_fields_addf(&f, "DSAGENT_SUSPEND_TIMEOUT_TEXT=%s", e->suspend_timeout_usec ? limit : "none");
        }
        return audit_output_send(sink, &f, AUDIT_QUEUE_EVENT, NULL);
}

int audit_log_collect(AuditSink sink, const AuditCollectEvent *e) {
        _cleanup_(audit_fields_done) AuditFields f = {};
        char who[AUDIT_NAME_MAX + 32], value[64] = "", rounded[COUNTER_FORMAT_DOUBLE_MAX], exact[COUNTER_FORMAT_DOUBLE_MAX];

        format_user(who, sizeof(who), e->uid);
        if (e->has_value) {
                /* people read the value rounded; machines get the shortest text that reads back as it */
                counter_format_rounded(e->value, rounded);
                counter_format_double(e->value, exact);
                snprintf(value, sizeof(value), " at %s", rounded);
        }
        audit_fields_addf(&f, "MESSAGE_ID=%s", DSAGENT_MESSAGE_COLLECT);
        audit_fields_addf(&f, "PRIORITY=%d", strcmp(e->event, "failed") == 0 ? LOG_WARNING : LOG_NOTICE);
        audit_fields_addf(&f, "SYSLOG_IDENTIFIER=dsagent");
        audit_fields_add_textf(&f, "MESSAGE", "[[collect]] %s, pid %d (%s): %s on %s%s: %s", e->table, (int)e->pid, who,
                               e->event, e->what, value, e->result ? e->result : "");
        audit_fields_add_text(&f, "DSAGENT_COLLECT_EVENT", e->event);
        audit_fields_add_text(&f, "DSAGENT_RULE", e->table);
        audit_fields_add_text(&f, "DSAGENT_COLLECT_TRIGGER", e->trigger);
        audit_fields_add_text(&f, "DSAGENT_COLLECT_WHAT", e->what);
        if (e->has_value) {
                audit_fields_addf(&f, "DSAGENT_COLLECT_VALUE=%s", rounded);
                audit_fields_addf(&f, "DSAGENT_COLLECT_VALUE_EXACT=%s", exact);
        }
        audit_fields_add_text(&f, "DSAGENT_COLLECT_EXCEPTION", e->exception);
        audit_fields_add_text(&f, "DSAGENT_COLLECT_ACTION", e->action);
        audit_fields_add_text(&f, "DSAGENT_COLLECT_RESULT", e->result);
        if (e->limited > 0)
                audit_fields_addf(&f, "DSAGENT_COLLECT_LIMITED=%" PRIu64, e->limited);
        audit_fields_addf(&f, "DSAGENT_TARGET_PID=%d", (int)e->pid);
        audit_fields_addf(&f, "DSAGENT_TARGET_UID=%u", (unsigned)e->uid);
        audit_fields_add_text(&f, "DSAGENT_TARGET_UNIT", e->unit);
        audit_fields_add_names(&f, (uid_t)-1, NULL, e->uid);
        audit_fields_add_target_text(&f, "DSAGENT_TARGET_TEXT", "", e->pid, e->uid, e->unit, NULL);
        return audit_output_send(sink, &f, AUDIT_QUEUE_EVENT, e->reservation);
}

int audit_log_retention(AuditSink sink, const AuditRetentionEvent *e) {
        _cleanup_(audit_fields_done) AuditFields f = {};
        char size[32], age[48], whose[AUDIT_NAME_MAX + 96], asked[AUDIT_NAME_MAX + 64] = "";
        bool removing = strcmp(e->event, "removing") == 0;

        format_size(size, sizeof(size), e->size);
        text_format_span(e->age_usec, age, sizeof(age));
        if (e->origin)
                snprintf(whose, sizeof(whose), "[[%s]] %s's", e->origin, e->table ? e->table : "");
        else if (e->requester != (uid_t)-1) {
                strcpy(whose, "asked for by ");
                format_user(whose + strlen(whose), sizeof(whose) - strlen(whose), e->requester);
        } else
                strcpy(whose, "unlabelled");
        if (e->for_request_id != 0) {
                strcpy(asked, ", for the dump of ");
                format_user(asked + strlen(asked), sizeof(asked) - strlen(asked), e->for_uid);
        }
        audit_fields_addf(&f, "MESSAGE_ID=%s", DSAGENT_MESSAGE_RETENTION);
        audit_fields_addf(&f, "PRIORITY=%d", removing ? LOG_NOTICE : LOG_WARNING);
        audit_fields_addf(&f, "SYSLOG_IDENTIFIER=dsagent");
        audit_fields_add_textf(&f, "MESSAGE", "dump_dir: %s %s (%s, %s old, %s) by %s%s: %s%s%s",
                               removing ? "removing" : "could not remove", e->path, size, age, whose, e->reason, asked,
                               e->detail ? e->detail : "", e->error_errno ? ": " : "",
                               e->error_errno ? strerror(e->error_errno) : "");
        audit_fields_add_text(&f, "DSAGENT_RETENTION_EVENT", e->event);
        audit_fields_add_text(&f, "DSAGENT_RETENTION_REASON", e->reason);
        audit_fields_add_text(&f, "DSAGENT_RETENTION_DETAIL", e->detail);
        audit_fields_add_text(&f, "DSAGENT_DUMP_PATH", e->path);
        audit_fields_addf(&f, "DSAGENT_DUMP_SIZE=%" PRIu64, e->size);
        audit_fields_addf(&f, "DSAGENT_DUMP_SIZE_TEXT=%s", size);
        audit_fields_addf(&f, "DSAGENT_DUMP_AGE_USEC=%" PRIu64, e->age_usec);
        audit_fields_addf(&f, "DSAGENT_DUMP_AGE_TEXT=%s", age);
        audit_fields_add_text(&f, "DSAGENT_DUMP_TYPE", e->dump_type);
        if (e->requester != (uid_t)-1)
                audit_fields_addf(&f, "DSAGENT_DUMP_REQUESTER_UID=%u", (unsigned)e->requester);
        audit_fields_add_text(&f, "DSAGENT_DUMP_ORIGIN", e->origin);
        audit_fields_add_text(&f, "DSAGENT_RULE", e->table);
        if (e->target_pid > 0) {
                audit_fields_addf(&f, "DSAGENT_TARGET_PID=%d", (int)e->target_pid);
                if (e->target_uid != (uid_t)-1)
                        audit_fields_addf(&f, "DSAGENT_TARGET_UID=%u", (unsigned)e->target_uid);
        }
        if (e->for_request_id != 0) {
                audit_fields_addf(&f, "DSAGENT_REQUEST_ID=%016" PRIx64, e->for_request_id);
                audit_fields_addf(&f, "DSAGENT_CLIENT_UID=%u", (unsigned)e->for_uid);
        }
        if (e->error_errno)
                audit_fields_addf(&f, "ERRNO=%d", e->error_errno);
        /* what is about to be removed must be recorded first: refused when it cannot be, and then kept */
        return audit_output_send(sink, &f, removing ? AUDIT_QUEUE_DECISION : AUDIT_QUEUE_EVENT, NULL);
}

/* The egress process's server died and is started again: no upload's record, the process's own. */
static int audit_log_egress_restarted(AuditSink sink, const AuditEgressEvent *e) {
        _cleanup_(audit_fields_done) AuditFields f = {};

        audit_fields_addf(&f, "MESSAGE_ID=%s", DSAGENT_MESSAGE_EGRESS);
        audit_fields_addf(&f, "PRIORITY=%d", LOG_WARNING);
        audit_fields_addf(&f, "SYSLOG_IDENTIFIER=dsagent");
        audit_fields_add_textf(&f, "MESSAGE", "egress: %s", e->error ? e->error : "the egress process died");
        audit_fields_add_text(&f, "DSAGENT_EGRESS_EVENT", e->event);
        audit_fields_add_text(&f, "DSAGENT_EGRESS_ERROR", e->error);
        return audit_output_send(sink, &f, AUDIT_QUEUE_EVENT, NULL);
}

int audit_log_egress(AuditSink sink, const AuditEgressEvent *e) {
        _cleanup_(audit_fields_done) AuditFields f = {};
        bool queued = strcmp(e->event, "queued") == 0, retry = strcmp(e->event, "retry") == 0;
        bool uploaded = !queued && e->result && strcmp(e->result, "uploaded") == 0;

        if (strcmp(e->event, "restarted") == 0)
                return audit_log_egress_restarted(sink, e);

        audit_fields_addf(&f, "MESSAGE_ID=%s", DSAGENT_MESSAGE_EGRESS);
        audit_fields_addf(&f, "PRIORITY=%d", queued || uploaded ? LOG_INFO : LOG_WARNING);
        audit_fields_addf(&f, "SYSLOG_IDENTIFIER=dsagent");
        if (queued)
                audit_fields_add_textf(&f, "MESSAGE", "egress %s: uploading %s as %s", e->target, e->path, e->key);
        else if (uploaded)
                audit_fields_add_textf(&f, "MESSAGE", "egress %s: uploaded %s as %s%s", e->target, e->path, e->key,
                                       e->local_removed ? "; the local copy was removed" : "");
        else if (retry)
                audit_fields_add_textf(&f, "MESSAGE", "egress %s: %s not uploaded yet (%s): %s; handed over again in "
                                       "%" PRIu64 " s", e->target, e->path, e->result, e->error ? e->error : "",
                                       e->retry_usec / 1000000);
        else
                audit_fields_add_textf(&f, "MESSAGE", "egress %s: %s not uploaded (%s): %s; the local copy is kept",
                                       e->target, e->path, e->result, e->error ? e->error : "");
        audit_fields_add_text(&f, "DSAGENT_EGRESS_EVENT", e->event);
        audit_fields_add_text(&f, "DSAGENT_EGRESS_TARGET", e->target);
        audit_fields_add_text(&f, "DSAGENT_EGRESS_KEY", e->key);
        audit_fields_add_text(&f, "DSAGENT_DUMP_PATH", e->path);
        if (e->request_id)
                audit_fields_addf(&f, "DSAGENT_REQUEST_ID=%016" PRIx64, e->request_id);
        audit_fields_add_text(&f, "DSAGENT_RULE", e->rule);
        audit_fields_addf(&f, "DSAGENT_EGRESS_SIZE=%" PRIu64, e->size);
        if (!queued) {
                if (e->sha256 && e->sha256[0])
                        audit_fields_add_text(&f, "DSAGENT_EGRESS_SHA256", e->sha256);
                audit_fields_addf(&f, "DSAGENT_EGRESS_PARTS=%u", e->parts);
                audit_fields_addf(&f, "DSAGENT_EGRESS_ATTEMPTS=%u", e->attempts);
                audit_fields_addf(&f, "DSAGENT_EGRESS_USEC=%" PRIu64, e->usec);
                audit_fields_add_text(&f, "DSAGENT_EGRESS_RESULT", e->result);
                if (e->http_status > 0)
                        audit_fields_addf(&f, "DSAGENT_EGRESS_HTTP_STATUS=%ld", e->http_status);
                if (e->s3_code && e->s3_code[0])
                        audit_fields_add_text(&f, "DSAGENT_EGRESS_S3_CODE", e->s3_code);
                audit_fields_add_text(&f, "DSAGENT_EGRESS_ERROR", e->error);
                if (e->handover > 0)
                        audit_fields_addf(&f, "DSAGENT_EGRESS_HANDOVER=%u", e->handover);
                if (retry)
                        audit_fields_addf(&f, "DSAGENT_EGRESS_RETRY_USEC=%" PRIu64, e->retry_usec);
                if (uploaded)
                        audit_fields_addf(&f, "DSAGENT_EGRESS_LOCAL=%s", e->local_removed ? "removed" : "kept");
                else
                        audit_fields_add_text(&f, "DSAGENT_EGRESS_LOCAL", "kept");
        }
        /* the upload is decided by its record: refused when it cannot be written, and then not made */
        return audit_output_send(sink, &f, queued ? AUDIT_QUEUE_DECISION : AUDIT_QUEUE_EVENT, NULL);
}
