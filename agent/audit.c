/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <syslog.h>
#include <unistd.h>

#include <systemd/sd-journal.h>

#include "audit.h"
#include "catalog-ids.h"
#include "cleanup.h"
#include "text.h"

#define AUDIT_FIELDS_MAX 48
/* a refused policy lists this many of its errors; the first ones say what to fix */
#define AUDIT_POLICY_ERRORS_MAX 16
#define JOURNAL_SOCKET_PATH "/run/systemd/journal/socket"

typedef struct AuditFields {
        struct iovec iov[AUDIT_FIELDS_MAX];
        size_t n;
        int error;
} AuditFields;

static void audit_fields_done(AuditFields *f) {
        for (size_t i = 0; i < f->n; i++)
                free(f->iov[i].iov_base);
        f->n = 0;
}

static void audit_fields_addf(AuditFields *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void audit_fields_addf(AuditFields *f, const char *fmt, ...) {
        va_list ap;
        char *s;
        int n;

        if (f->error != 0)
                return;
        if (f->n >= AUDIT_FIELDS_MAX) {
                f->error = -E2BIG;
                return;
        }
        va_start(ap, fmt);
        n = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (n < 0) {
                f->error = -ENOMEM;
                return;
        }
        f->iov[f->n++] = (struct iovec){ .iov_base = s, .iov_len = (size_t)n };
}

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

const char *audit_decision_to_string(AuditDecision d) {
        switch (d) {
        case AUDIT_DECISION_ALLOWED: return "allowed";
        case AUDIT_DECISION_DENIED: return "denied";
        case AUDIT_DECISION_FAILED: return "failed";
        default: return "unknown";
        }
}

int audit_sink_from_string(const char *s, AuditSink *ret) {
        if (strcmp(s, "auto") == 0)
                *ret = AUDIT_SINK_AUTO;
        else if (strcmp(s, "journal") == 0)
                *ret = AUDIT_SINK_JOURNAL;
        else if (strcmp(s, "stderr") == 0)
                *ret = AUDIT_SINK_STDERR;
        else
                return -EINVAL;
        return 0;
}

static int audit_priority(AuditDecision d) {
        return d == AUDIT_DECISION_ALLOWED ? LOG_INFO : d == AUDIT_DECISION_DENIED ? LOG_NOTICE : LOG_WARNING;
}

static void audit_fields_add_message(AuditFields *f, const AuditRecord *r) {
        _cleanup_free_ char *reason = NULL;
        char target[32] = "";

        if (r->have_target)
                snprintf(target, sizeof(target), " pid %d", (int)r->target_pid);
        reason = text_escape(r->reason ? r->reason : "", r->reason ? strlen(r->reason) : 0);
        if (!reason) {
                f->error = -ENOMEM;
                return;
        }
        audit_fields_addf(f, "MESSAGE=uid %u %s%s: %s (%s)", (unsigned)r->client_uid,
                          r->command ? r->command : "(no request)", target,
                          audit_decision_to_string(r->decision), reason);
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
        audit_fields_add_text(f, "DSAGENT_COMMAND", r->command);
        if (r->have_target) {
                audit_fields_addf(f, "DSAGENT_TARGET_PID=%d", (int)r->target_pid);
                if (r->target_uid != (uid_t)-1)
                        audit_fields_addf(f, "DSAGENT_TARGET_UID=%u", (unsigned)r->target_uid);
                audit_fields_add_text(f, "DSAGENT_TARGET_UNIT", r->target_unit);
                audit_fields_add_text(f, "DSAGENT_TARGET_EXE", r->target_exe);
        }
        audit_fields_addf(f, "DSAGENT_DECISION=%s", audit_decision_to_string(r->decision));
        audit_fields_add_text(f, "DSAGENT_RULE", r->rule);
        audit_fields_add_text(f, "DSAGENT_REASON", r->reason);
        if (r->have_result_count)
                audit_fields_addf(f, "DSAGENT_RESULT_COUNT=%u", r->result_count);
        if (r->error_errno > 0)
                audit_fields_addf(f, "ERRNO=%d", r->error_errno); /* journald's own field for it */
}

/*
 * One line per record. The values were escaped when the fields were built;
 * double quotes are escaped here so a value cannot end its own quoting.
 */
static int audit_write_stderr(const AuditFields *f) {
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        FILE *out;

        out = open_memstream(&line, &size);
        if (!out)
                return -ENOMEM;
        fputs("dsagent-audit:", out);
        for (size_t i = 0; i < f->n; i++) {
                const char *kv = f->iov[i].iov_base, *eq = strchr(kv, '=');
                fprintf(out, " %.*s=\"", (int)(eq - kv), kv);
                for (const char *c = eq + 1; *c; c++)
                        if (*c == '"')
                                fputs("\\x22", out);
                        else
                                fputc(*c, out);
                fputc('"', out);
        }
        fputc('\n', out);
        if (fclose(out) != 0)
                return -ENOMEM;

        /* whole records only: a short write is retried, never interleaved with
         * anything else this single-threaded process writes */
        for (size_t done = 0; done < size;) {
                ssize_t n = write(STDERR_FILENO, line + done, size - done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                done += (size_t)n;
        }
        return 0;
}

/*
 * sd_journal_sendv() reports success when journald's socket does not exist at
 * all, so a record would vanish; look for the socket before trusting it.
 */
static bool journal_is_reachable(void) {
        struct stat st;
        return stat(JOURNAL_SOCKET_PATH, &st) == 0 && S_ISSOCK(st.st_mode);
}

static int audit_send(AuditSink sink, const AuditFields *f) {
        bool journal;
        int k;

        if (f->error != 0)
                return f->error;
        journal = sink != AUDIT_SINK_STDERR && journal_is_reachable();
        /* a journal asked for and not there fails closed: the record would vanish */
        if (sink == AUDIT_SINK_JOURNAL && !journal)
                return -ENOTCONN;
        if (journal && sink != AUDIT_SINK_STDERR) {
                k = sd_journal_sendv(f->iov, (int)f->n);
                if (k >= 0 || sink == AUDIT_SINK_JOURNAL)
                        return k;
        }
        return audit_write_stderr(f);
}

int audit_sink_check(AuditSink sink) {
        return sink == AUDIT_SINK_JOURNAL && !journal_is_reachable() ? -ENOTCONN : 0;
}

/**
 * audit_log_request() - write the one record of a request's decision
 *
 * Return: 0, or a negative errno when the record could not be written
 * anywhere; callers decide what a lost record means for the request.
 */
int audit_log_request(AuditSink sink, const AuditRecord *r) {
        _cleanup_(audit_fields_done) AuditFields f = {};

        audit_fields_build(&f, r);
        return audit_send(sink, &f);
}

/**
 * audit_log_policy() - record a policy load, or a refused reload with its errors
 *
 * Return: 0, or a negative errno when the record could not be written anywhere.
 */
int audit_log_policy(AuditSink sink, const AuditPolicyEvent *e) {
        _cleanup_(audit_fields_done) AuditFields f = {};
        _cleanup_free_ char *path = text_escape(e->path, strlen(e->path));

        if (!path)
                return -ENOMEM;
        audit_fields_addf(&f, "MESSAGE_ID=%s", DSAGENT_MESSAGE_POLICY);
        audit_fields_addf(&f, "PRIORITY=%d", e->loaded ? LOG_INFO : LOG_ERR);
        audit_fields_addf(&f, "SYSLOG_IDENTIFIER=dsagent");
        if (e->loaded)
                audit_fields_addf(&f, "MESSAGE=policy loaded from %s: %zu rules from %zu files", path, e->n_rules,
                                  e->n_files);
        else
                audit_fields_addf(&f, "MESSAGE=policy in %s refused, the previous policy stays: %zu errors", path,
                                  e->n_errors);
        audit_fields_add_text(&f, "DSAGENT_POLICY_PATH", e->path);
        audit_fields_addf(&f, "DSAGENT_POLICY_LOADED=%s", e->loaded ? "yes" : "no");
        if (e->loaded) {
                audit_fields_addf(&f, "DSAGENT_POLICY_RULES=%zu", e->n_rules);
                audit_fields_addf(&f, "DSAGENT_POLICY_FILES=%zu", e->n_files);
        }
        for (size_t i = 0; i < e->n_errors && i < AUDIT_POLICY_ERRORS_MAX; i++)
                audit_fields_add_text(&f, "DSAGENT_POLICY_ERROR", e->errors[i]);
        return audit_send(sink, &f);
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
}

/**
 * audit_log_dump() - record a published dump: where, how big, of whom, for whom
 *
 * Return: 0, or a negative errno when the record could not be written anywhere.
 */
int audit_log_dump(AuditSink sink, const AuditDumpEvent *e) {
        _cleanup_(audit_fields_done) AuditFields f = {};
        _cleanup_free_ char *path = text_escape(e->path, strlen(e->path));

        if (!path)
                return -ENOMEM;
        audit_fields_addf(&f, "MESSAGE_ID=%s", DSAGENT_MESSAGE_DUMP);
        audit_fields_addf(&f, "PRIORITY=%d", LOG_INFO);
        audit_fields_addf(&f, "SYSLOG_IDENTIFIER=dsagent");
        audit_fields_addf(&f, "MESSAGE=%s dump of pid %d (%" PRIu64 " bytes) for uid %u stored at %s", e->dump_type,
                          (int)e->target_pid, e->size, (unsigned)e->requester, path);
        audit_fields_add_subject(&f, e->request_id, e->requester, e->target_pid, e->target_uid, e->target_unit,
                                 e->target_exe, e->rule);
        audit_fields_add_text(&f, "DSAGENT_DUMP_PATH", e->path);
        audit_fields_addf(&f, "DSAGENT_DUMP_SIZE=%" PRIu64, e->size);
        audit_fields_add_text(&f, "DSAGENT_DUMP_TYPE", e->dump_type);
        audit_fields_addf(&f, "DSAGENT_DUMP_READABLE=%s", e->readable ? "yes" : "no");
        audit_fields_addf(&f, "DSAGENT_DURATION_USEC=%" PRIu64, e->duration_usec);
        return audit_send(sink, &f);
}

/**
 * audit_log_session() - record a session's start (what was asked of the
 * runtime) or its end (how much was relayed and how it ended)
 *
 * Return: 0, or a negative errno when the record could not be written anywhere.
 */
int audit_log_session(AuditSink sink, const AuditSessionEvent *e) {
        _cleanup_(audit_fields_done) AuditFields f = {};

        audit_fields_addf(&f, "MESSAGE_ID=%s", e->ended ? DSAGENT_MESSAGE_SESSION_END : DSAGENT_MESSAGE_SESSION_START);
        audit_fields_addf(&f, "PRIORITY=%d", LOG_INFO);
        audit_fields_addf(&f, "SYSLOG_IDENTIFIER=dsagent");
        if (e->ended)
                audit_fields_addf(&f, "MESSAGE=%s session of pid %d for uid %u ended (%s): %" PRIu64 " bytes%s", e->kind,
                                  (int)e->target_pid, (unsigned)e->requester, e->how, e->bytes,
                                  e->complete ? "" : ", incomplete");
        else
                audit_fields_addf(&f, "MESSAGE=%s session of pid %d for uid %u started", e->kind, (int)e->target_pid,
                                  (unsigned)e->requester);
        audit_fields_add_subject(&f, e->request_id, e->requester, e->target_pid, e->target_uid, e->target_unit,
                                 e->target_exe, e->rule);
        audit_fields_add_text(&f, "DSAGENT_SESSION_KIND", e->kind);
        audit_fields_add_text(&f, "DSAGENT_TRACE_PROFILE", e->profile);
        audit_fields_add_text(&f, "DSAGENT_PROVIDERS", e->providers);
        audit_fields_addf(&f, "DSAGENT_BUFFER_MB=%u", e->buffer_mb);
        audit_fields_addf(&f, "DSAGENT_DURATION_LIMIT_USEC=%" PRIu64, e->duration_limit_usec);
        audit_fields_addf(&f, "DSAGENT_SIZE_LIMIT=%" PRIu64, e->size_limit);
        if (e->ended) {
                audit_fields_addf(&f, "DSAGENT_SESSION_BYTES=%" PRIu64, e->bytes);
                audit_fields_add_text(&f, "DSAGENT_SESSION_END", e->how);
                audit_fields_addf(&f, "DSAGENT_SESSION_COMPLETE=%s", e->complete ? "yes" : "no");
                audit_fields_addf(&f, "DSAGENT_DURATION_USEC=%" PRIu64, e->duration_usec);
        }
        return audit_send(sink, &f);
}

/**
 * audit_log_suppressed() - record how many requests of @uid were refused as too many
 *
 * Return: 0, or a negative errno when the record could not be written anywhere.
 */
int audit_log_suppressed(AuditSink sink, uid_t uid, uint64_t count) {
        _cleanup_(audit_fields_done) AuditFields f = {};

        audit_fields_addf(&f, "MESSAGE_ID=%s", DSAGENT_MESSAGE_SUPPRESSED);
        audit_fields_addf(&f, "PRIORITY=%d", LOG_WARNING);
        audit_fields_addf(&f, "SYSLOG_IDENTIFIER=dsagent");
        audit_fields_addf(&f, "MESSAGE=uid %u: %" PRIu64 " request%s refused as too many", (unsigned)uid, count,
                          count == 1 ? "" : "s");
        audit_fields_addf(&f, "DSAGENT_CLIENT_UID=%u", (unsigned)uid);
        audit_fields_addf(&f, "DSAGENT_SUPPRESSED=%" PRIu64, count);
        return audit_send(sink, &f);
}
