/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The process-wide audit output: where records go (the journal, stderr, JSON on stdout), through
 * queues that never wait for their reader; what went unrecorded is counted and told. The records
 * (audit.h) are built as AuditFields and handed to audit_output_send().
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <systemd/sd-event.h>

#include "agent/audit/audit-queue.h"

typedef enum AuditSink {
        AUDIT_SINK_AUTO,    /* the journal if reachable, else stderr */
        AUDIT_SINK_JOURNAL,
        AUDIT_SINK_STDERR,
        AUDIT_SINK_JSON,    /* one JSON object a line on stdout (audit_json_format()), for log collectors */
} AuditSink;

/*
 * Room held in the audit output for the records of an act, taken before the act begins
 * (audit_reserve()): a record written with it (the .reservation of a record or event below) takes
 * one of them and is never refused, so what was done is recorded whatever the output's reader
 * does meanwhile. A record without it is refused when the queue is full, as before.
 */
typedef struct AuditReservation {
        unsigned records;       /* still held */
} AuditReservation;

/* A record as the output takes it: KEY=VALUE fields, as journald's native protocol carries them. */
#define AUDIT_FIELDS_MAX 48
typedef struct AuditFields {
        struct iovec iov[AUDIT_FIELDS_MAX];
        size_t n;
        int error;      /* the first field that could not be added (-E2BIG, -ENOMEM): the record is not sent */
} AuditFields;

/* Frees the fields' strings; the struct may be filled again. */
void audit_fields_done(AuditFields *f);
/* Adds one KEY=VALUE field as written, unescaped; past AUDIT_FIELDS_MAX or without memory, sets f->error. */
void audit_fields_addf(AuditFields *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * audit_json_format() - one record as one line of JSON: {"KEY":"VALUE",...} and a newline
 *
 * @fields are the record's KEY=VALUE fields, as journald takes them; keys are
 * the journal's field names, values strings (text_json_string(): escaped, never
 * a raw control character or newline, valid UTF-8 whatever the bytes were). A
 * key that comes more than once (DSAGENT_POLICY_ERROR) has an array of its
 * values, in order, as "journalctl -o json" shows it; a field without '=' is
 * left out. Pure.
 *
 * Return: 0 with the line in *@ret (NUL-terminated; *@ret_size bytes, the
 * newline included), or -ENOMEM.
 */
struct iovec;
int audit_json_format(const struct iovec *fields, size_t n, char **ret, size_t *ret_size);

/*
 * audit_sink_open() - open @sink's output, to be drained by @event's loop
 *
 * Records are never waited for: each goes out at once when the output takes
 * it, and otherwise waits, in order, in a bounded queue (audit-queue.h) that
 * the loop sends on when the output is writable again. A decision whose record
 * does not fit is refused: audit_log_request(), audit_log_dump() and a
 * session's start record return -ENOBUFS, and the request is answered "audit
 * unavailable". Each request so refused, and each record of an event that was
 * lost, is counted in one record (DSAGENT_MESSAGE_AUDIT_GAP:
 * DSAGENT_AUDIT_REFUSED=, DSAGENT_AUDIT_LOST=) once decisions are taken
 * again. auto takes the journal when journald is there at the start, and
 * stderr when journald then fails outright. Without audit_sink_open(), the first
 * record opens it without a loop (a queued record then goes out only with a
 * later one, or at audit_sink_close()).
 *
 * Return: 0; -ENOTCONN for the journal without journald; another negative errno.
 */
int audit_sink_open(sd_event *event, AuditSink sink);
/* At exit: what is queued goes out if the output takes it within AUDIT_QUEUE_EXIT_FLUSH_USEC (this waits). */
void audit_sink_close(void);

int audit_sink_from_string(const char *s, AuditSink *ret);
/* 0 when @sink can take records now; -ENOTCONN for the journal without journald. */
int audit_sink_check(AuditSink sink);

/*
 * audit_output_send() - one record to @sink's output (opened now when no loop opened it)
 * @class: AUDIT_QUEUE_DECISION for a decision's record, which a full queue refuses; AUDIT_QUEUE_EVENT
 *      for one of something that happened already, which may use the reserve
 * @room: NULL, or room held (audit_reserve()): while it still holds room, one record of it is taken
 *      and the record is queued whatever the bounds (AUDIT_QUEUE_HELD)
 *
 * The count of what went unrecorded goes out first, when there is room for it. A record that is
 * not a decision's and does not go out is counted as lost.
 *
 * Return: 0 when the record went out or waits in order to; -ENOBUFS when the queue is full;
 * f->error; another negative errno.
 */
int audit_output_send(AuditSink sink, const AuditFields *f, AuditQueueClass class, AuditReservation *room);
/* A request was refused because its record did not go out: the gap record counts it. */
void audit_output_count_refused(void);

/*
 * audit_reserve() - hold room for @records more records in @ret, before the act they record begins
 *
 * Room is held when decisions' records would be queued now, @records of them of a usual size
 * (audit_queue_hold()): when the output's reader has stopped and the queue is full, nothing is
 * held, and the act must not begin. Room held is not taken from anyone's decisions; it is bounded
 * by AUDIT_QUEUE_HELD_RECORDS in all, which the callers stay below by their own bounds: a client's
 * request holds at most 3 (its own record, and a session's start and end or a dump's), one per
 * connection, so at most 3 x (max_connections + root's slots), and each uid at most 3 x
 * max_connections_per_uid (96) of them; the agent's own [[on_start]] and [[collect]] actions at
 * most 3 x STARTUP_TRACES_MAX + 4 x COLLECT_TRACES_MAX + 2 x max_concurrent_dumps (142).
 *
 * Return: 0; -ENOBUFS when there is no room now; another negative errno when there is no output.
 */
int audit_reserve(AuditSink sink, unsigned records, AuditReservation *ret);
/* Gives back the room @room still holds (at the end of what it was held for). Idempotent. */
void audit_reservation_release(AuditReservation *room);
