/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Audit records on their way out: a bounded queue of whole records, in order,
 * to one output whose reader may stop reading (a log collector's pipe,
 * journald). A record goes out at once when the output takes it; what it does
 * not take waits in the queue, and the event loop sends it when the output is
 * writable again. Nothing here ever waits for a reader.
 *
 * The output is written without blocking, and without changing how anyone
 * else writes to it: a pipe or terminal is opened anew through
 * /proc/self/fd (a file description of the agent's own, made O_NONBLOCK,
 * where setting O_NONBLOCK on the inherited one would change it for every
 * process that shares it, the container runtime's included); a socket is
 * sent to with MSG_DONTWAIT; a regular file never waits for a reader. Only a
 * pipe the agent may not open anew (it is not root, and the pipe is not its
 * user's) has O_NONBLOCK set on the shared description, and says so on stderr.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <systemd/sd-event.h>

/* What may wait, for decisions; past it a decision's record is refused (-ENOBUFS) and so is the decision. */
#define AUDIT_QUEUE_RECORDS 1024
#define AUDIT_QUEUE_BYTES (1024 * 1024)
/* More, for the records of what cannot be refused any more (a session's end, a port event): past it they are lost. */
#define AUDIT_QUEUE_RESERVE_RECORDS 256
#define AUDIT_QUEUE_RESERVE_BYTES (256 * 1024)
/*
 * Room held for records of acts about to begin (audit_queue_hold()): at most this many in all. A
 * held record is written whatever the bounds above, so that what was done is always recorded; it
 * is bounded by this count instead, which is past what the callers can hold at once (audit.h).
 */
#define AUDIT_QUEUE_HELD_RECORDS 4096
/* What a held record is taken to need of the decisions' bytes when room is held for it: a usual record. */
#define AUDIT_QUEUE_HELD_RECORD_BYTES 4096
/* At exit, how long queued records may still take to go out. */
#define AUDIT_QUEUE_EXIT_FLUSH_USEC (5 * 1000000ULL)

typedef enum AuditOutputKind {
        AUDIT_OUTPUT_STREAM,   /* a byte stream: pipe, terminal, file, stream socket (e.g. journald's stdout stream) */
        AUDIT_OUTPUT_DATAGRAM, /* journald's native socket: one datagram a record, whole or not at all */
} AuditOutputKind;

typedef enum AuditQueueClass {
        AUDIT_QUEUE_DECISION,  /* within AUDIT_QUEUE_RECORDS and _BYTES: the caller refuses what it cannot record */
        AUDIT_QUEUE_EVENT,     /* within the reserve too: what happened already */
        AUDIT_QUEUE_HELD,      /* one record room was held for (audit_queue_hold()): never refused */
} AuditQueueClass;

typedef struct AuditQueue AuditQueue;

/*
 * audit_queue_open_stream() - a queue to @fd (standard output or error), which stays open
 * and unchanged: the queue writes through a description of its own (see above)
 * audit_queue_open_datagram() - a queue to the datagram socket at @path (journald's)
 *
 * @event: the loop that drains the queue; NULL: the queue is only sent on as
 * records are added, and at audit_queue_flush().
 * @max_records: AUDIT_QUEUE_RECORDS, or fewer (a test's).
 * @on_progress: called from the loop whenever queued records went out, so that
 * the caller may add a record it held back; may be NULL.
 *
 * Return: 0, or a negative errno: -ENOENT/-ECONNREFUSED for a socket nobody listens on.
 */
int audit_queue_open_stream(sd_event *event, int fd, unsigned max_records, void (*on_progress)(void *userdata),
                            void *userdata, AuditQueue **ret);
int audit_queue_open_datagram(sd_event *event, const char *path, unsigned max_records,
                              void (*on_progress)(void *userdata), void *userdata, AuditQueue **ret);

/*
 * audit_queue_push() - send @data (@size bytes, one whole record) after what waits
 * before it, or queue it
 *
 * Takes @data whatever it returns.
 * Return: 0 (sent, or queued to be sent in order); -ENOBUFS when the queue has no room
 * for a record of @class; another negative errno when the output failed and
 * nothing waits in the queue (the record is not kept; a held one is, and sent again).
 */
int audit_queue_push(AuditQueue *q, AuditQueueClass class, char *data, size_t size);

/* Whether a record of @size bytes of @class would be queued now. */
bool audit_queue_has_room(const AuditQueue *q, AuditQueueClass class, size_t size);

/*
 * audit_queue_hold() - hold room for @records records to come, before the act they record begins
 *
 * Granted when @records records of a decision, AUDIT_QUEUE_HELD_RECORD_BYTES each, would be
 * queued now (the reader keeps up), and the room held in all stays within
 * AUDIT_QUEUE_HELD_RECORDS. Room held is not counted against decisions: an act that runs for
 * hours with its room held takes none from anyone's decisions. Each record pushed as
 * AUDIT_QUEUE_HELD takes one back and is queued whatever the bounds (and kept to be sent again
 * when the output fails, where other records are dropped); audit_queue_unhold() gives back what
 * was not used.
 *
 * Return: 0, or -ENOBUFS (nothing is held).
 */
int audit_queue_hold(AuditQueue *q, unsigned records);
void audit_queue_unhold(AuditQueue *q, unsigned records);

/*
 * audit_queue_set_fallback() - a record @q's output fails outright while nothing waits goes back to
 * the caller, a held one too, for another output to take (--audit auto: stderr when journald fails)
 */
void audit_queue_set_fallback(AuditQueue *q);

/*
 * audit_queue_flush() - wait up to @timeout_usec for the queued records to go out (at exit only:
 * this blocks). Return: how many records are left.
 */
size_t audit_queue_flush(AuditQueue *q, uint64_t timeout_usec);

AuditQueue *audit_queue_free(AuditQueue *q);
