/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The process-wide audit output (audit-output.h): the sink, its queues (audit-queue.h), the
 * formats a record goes out in (journald's native protocol, a JSON line, a dsagent-audit: line),
 * the count of what went unrecorded and its gap record, and room held for records to come.
 */
#include <assert.h>
#include <endian.h>
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

#include "agent/audit/audit-output.h"
#include "agent/audit/catalog-ids.h"
#include "common/cleanup.h"
#include "agent/support/test-hooks.h"
#include "common/text.h"

#define JOURNAL_SOCKET_PATH "/run/systemd/journal/socket"
/* The room a decision's record takes, about: the count of the refused waits until the queue has it again. */
#define AUDIT_GAP_ROOM 4096

void audit_fields_done(AuditFields *f) {
        for (size_t i = 0; i < f->n; i++)
                free(f->iov[i].iov_base);
        f->n = 0;
}

void audit_fields_addf(AuditFields *f, const char *fmt, ...) {
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

int audit_sink_from_string(const char *s, AuditSink *ret) {
        if (strcmp(s, "auto") == 0)
                *ret = AUDIT_SINK_AUTO;
        else if (strcmp(s, "journal") == 0)
                *ret = AUDIT_SINK_JOURNAL;
        else if (strcmp(s, "stderr") == 0)
                *ret = AUDIT_SINK_STDERR;
        else if (strcmp(s, "json") == 0)
                *ret = AUDIT_SINK_JSON;
        else
                return -EINVAL;
        return 0;
}

/*
 * One line per record. The values were escaped when the fields were built;
 * double quotes are escaped here so a value cannot end its own quoting.
 */
static int audit_format_stderr(const AuditFields *f, char **ret, size_t *ret_size) {
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
                for (const char *c = eq + 1; *c;) {
                        size_t run = strcspn(c, "\"");

                        fwrite(c, 1, run, out);
                        c += run;
                        if (*c == '"') {
                                fputs("\\x22", out);
                                c++;
                        }
                }
                fputc('"', out);
        }
        fputc('\n', out);
        if (fclose(out) != 0)
                return -ENOMEM;
        *ret = TAKE_PTR(line);
        *ret_size = size;
        return 0;
}

/* The key of a KEY=VALUE field, and its length; false for a field without '='. */
static bool field_key(const struct iovec *field, size_t *ret_len) {
        const char *eq = memchr(field->iov_base, '=', field->iov_len);

        if (!eq)
                return false;
        *ret_len = (size_t)(eq - (const char *)field->iov_base);
        return true;
}

static bool field_has_key(const struct iovec *field, const char *key, size_t key_len) {
        size_t len;

        return field_key(field, &len) && len == key_len && memcmp(field->iov_base, key, len) == 0;
}

static void json_field_value(FILE *out, const struct iovec *field, size_t key_len) {
        text_json_string(out, (const char *)field->iov_base + key_len + 1, field->iov_len - key_len - 1);
}

int audit_json_format(const struct iovec *fields, size_t n, char **ret, size_t *ret_size) {
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        bool first = true;
        FILE *out;

        out = open_memstream(&line, &size);
        if (!out)
                return -ENOMEM;
        fputc('{', out);
        for (size_t i = 0; i < n; i++) {
                const char *key = fields[i].iov_base;
                size_t key_len, count = 0;
                bool seen = false;

                if (!field_key(&fields[i], &key_len))
                        continue;
                for (size_t j = 0; j < i && !seen; j++)
                        seen = field_has_key(&fields[j], key, key_len);
                if (seen)
                        continue; /* in the array of its first */
                for (size_t j = i; j < n; j++)
                        count += field_has_key(&fields[j], key, key_len);
                fputs(first ? "" : ",", out);
                first = false;
                text_json_string(out, key, key_len);
                fputc(':', out);
                if (count == 1) {
                        json_field_value(out, &fields[i], key_len);
                        continue;
                }
                fputc('[', out);
                for (size_t j = i, k = 0; j < n; j++)
                        if (field_has_key(&fields[j], key, key_len)) {
                                fputs(k++ > 0 ? "," : "", out);
                                json_field_value(out, &fields[j], key_len);
                        }
                fputc(']', out);
        }
        fputs("}\n", out);
        if (fclose(out) != 0)
                return -ENOMEM;
        *ret = TAKE_PTR(line);
        *ret_size = size;
        return 0;
}

/*
 * journald's native protocol, as sd_journal_sendv() sends it: KEY=VALUE and a
 * newline a field, or, for a value that holds a newline, KEY, a newline, the
 * value's length (64 bits, little-endian), the value and a newline.
 */
static int audit_format_journal(const AuditFields *f, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *out;

        out = open_memstream(&buf, &size);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < f->n; i++) {
                const char *kv = f->iov[i].iov_base;
                size_t len = f->iov[i].iov_len, key_len;
                uint64_t value_len;

                if (!field_key(&f->iov[i], &key_len))
                        continue;
                if (!memchr(kv + key_len, '\n', len - key_len)) {
                        fwrite(kv, 1, len, out);
                        fputc('\n', out);
                        continue;
                }
                value_len = htole64(len - key_len - 1);
                fwrite(kv, 1, key_len, out);
                fputc('\n', out);
                fwrite(&value_len, 1, sizeof(value_len), out);
                fwrite(kv + key_len + 1, 1, len - key_len - 1, out);
                fputc('\n', out);
        }
        if (fclose(out) != 0)
                return -ENOMEM;
        *ret = TAKE_PTR(buf);
        *ret_size = size;
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

/*
 * ---- where records go: queues that never wait for their reader (audit-queue.h) ----
 *
 * Records that do not fit any more refuse their decisions (-ENOBUFS); each such
 * request, and each record of an event that was lost, is counted, and the count
 * goes out in one record (DSAGENT_MESSAGE_AUDIT_GAP) as soon as decisions are
 * taken again, so that no decision goes unaccounted for.
 */
static struct {
        bool opened;
        AuditSink sink;
        AuditQueue *journal;    /* journal, or auto with journald there at the start */
        AuditQueue *out;        /* stdout for json; stderr for stderr, and auto's fallback */
        uint64_t n_refused;     /* requests refused for their record, not yet told */
        uint64_t n_lost;        /* records of events that could not go out, not yet told */
} audit_output;

static void audit_send_gap(void);

static void audit_on_progress(void *userdata) {
        audit_send_gap();
}

int audit_sink_open(sd_event *event, AuditSink sink) {
        unsigned max = test_hook_audit_queue(AUDIT_QUEUE_RECORDS);
        int r = 0;

        if (audit_output.opened)
                return 0;
        if (sink == AUDIT_SINK_JOURNAL || sink == AUDIT_SINK_AUTO) {
                r = audit_queue_open_datagram(event, JOURNAL_SOCKET_PATH, max,
                                              audit_on_progress, NULL, &audit_output.journal);
                if (r < 0 && sink == AUDIT_SINK_JOURNAL)
                        return -ENOTCONN;
        }
        if (sink != AUDIT_SINK_JOURNAL) {
                r = audit_queue_open_stream(event, sink == AUDIT_SINK_JSON ? STDOUT_FILENO : STDERR_FILENO, max,
                                            audit_on_progress, NULL, &audit_output.out);
                /* auto with journald does without its fallback */
                if (r < 0 && !audit_output.journal)
                        return r;
        }
        /* auto: what journald fails outright goes to stderr, held records too, rather than wait for it */
        if (audit_output.journal && audit_output.out)
                audit_queue_set_fallback(audit_output.journal);
        audit_output.opened = true;
        audit_output.sink = sink;
        return 0;
}

void audit_sink_close(void) {
        if (audit_output.journal)
                (void)audit_queue_flush(audit_output.journal, AUDIT_QUEUE_EXIT_FLUSH_USEC);
        if (audit_output.out)
                (void)audit_queue_flush(audit_output.out, AUDIT_QUEUE_EXIT_FLUSH_USEC);
        audit_output.journal = audit_queue_free(audit_output.journal);
        audit_output.out = audit_queue_free(audit_output.out);
        audit_output.opened = false;
}

/* The record in the output's format: a journal datagram, a JSON line, or a dsagent-audit: line. */
static int audit_push_to(AuditQueue *q, bool journal, const AuditFields *f, AuditQueueClass class) {
        char *data;
        size_t size;
        int r;

        r = journal ? audit_format_journal(f, &data, &size)
            : audit_output.sink == AUDIT_SINK_JSON ? audit_json_format(f->iov, f->n, &data, &size)
                                                   : audit_format_stderr(f, &data, &size);
        if (r < 0)
                return r;
        return audit_queue_push(q, class, data, size);
}

static int audit_push(const AuditFields *f, AuditQueueClass class) {
        int r;

        if (audit_output.journal) {
                r = audit_push_to(audit_output.journal, true, f, class);
                /* auto: journald failing outright leaves stderr; a full queue refuses, as it keeps the order */
                if (r >= 0 || r == -ENOBUFS || !audit_output.out)
                        return r;
        }
        if (!audit_output.out)
                return -ENOTCONN;
        return audit_push_to(audit_output.out, false, f, class);
}

static AuditQueue *audit_first_queue(void) {
        return audit_output.journal ? audit_output.journal : audit_output.out;
}

/* The count of what went unrecorded, once decisions are taken again: it goes before them. */
static void audit_send_gap(void) {
        _cleanup_(audit_fields_done) AuditFields f = {};
        AuditQueue *q = audit_first_queue();
        uint64_t refused = audit_output.n_refused, lost = audit_output.n_lost;

        if ((refused == 0 && lost == 0) || !q || !audit_queue_has_room(q, AUDIT_QUEUE_DECISION, AUDIT_GAP_ROOM))
                return;
        audit_fields_addf(&f, "MESSAGE_ID=%s", DSAGENT_MESSAGE_AUDIT_GAP);
        audit_fields_addf(&f, "PRIORITY=%d", LOG_WARNING);
        audit_fields_addf(&f, "SYSLOG_IDENTIFIER=dsagent");
        audit_fields_addf(&f, "MESSAGE=the audit output did not take records: %" PRIu64 " %s refused as \"audit "
                          "unavailable\", %" PRIu64 " other %s lost",
                          refused, refused == 1 ? "request" : "requests", lost, lost == 1 ? "record" : "records");
        audit_fields_addf(&f, "DSAGENT_AUDIT_REFUSED=%" PRIu64, refused);
        audit_fields_addf(&f, "DSAGENT_AUDIT_LOST=%" PRIu64, lost);
        /* as people read them, for the catalog's text: "1 request", "2 records" */
        audit_fields_addf(&f, "DSAGENT_AUDIT_REFUSED_TEXT=%" PRIu64 " %s", refused,
                          refused == 1 ? "request" : "requests");
        audit_fields_addf(&f, "DSAGENT_AUDIT_LOST_TEXT=%" PRIu64 " %s", lost, lost == 1 ? "record" : "records");
        if (f.error == 0 && audit_push(&f, AUDIT_QUEUE_EVENT) == 0) {
                audit_output.n_refused -= refused;
                audit_output.n_lost -= lost;
        }
}

int audit_output_send(AuditSink sink, const AuditFields *f, AuditQueueClass class, AuditReservation *room) {
        int r;

        /* held room is the reservation's to give, never the caller's to claim */
        assert(class == AUDIT_QUEUE_DECISION || class == AUDIT_QUEUE_EVENT);
        if (room && room->records > 0) {
                room->records--;
                class = AUDIT_QUEUE_HELD;
        }
        r = f->error;
        if (r == 0)
                r = audit_sink_open(NULL, sink); /* the agent opens it with its loop; a test may not */
        if (r == 0) {
                audit_send_gap();
                r = audit_push(f, class);
        }
        if (r < 0 && class != AUDIT_QUEUE_DECISION)
                audit_output.n_lost++;
        return r;
}

int audit_reserve(AuditSink sink, unsigned records, AuditReservation *ret) {
        AuditQueue *q;
        int r;

        r = audit_sink_open(NULL, sink);
        if (r < 0)
                return r;
        q = audit_first_queue();
        if (!q)
                return -ENOTCONN;
        r = audit_queue_hold(q, records);
        if (r < 0) {
                test_hook_note("no room for %u audit records: what they would record does not begin", records);
                return r;
        }
        ret->records += records;
        return 0;
}

void audit_reservation_release(AuditReservation *room) {
        AuditQueue *q = audit_first_queue();

        if (room->records > 0 && q)
                audit_queue_unhold(q, room->records);
        room->records = 0;
}

void audit_output_count_refused(void) {
        audit_output.n_refused++;
}

int audit_sink_check(AuditSink sink) {
        return sink == AUDIT_SINK_JOURNAL && !journal_is_reachable() ? -ENOTCONN : 0;
}
