/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A bounded, in-order queue of audit records to an output that may stop reading (audit-queue.h) */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/audit/audit-queue.h"
#include "common/cleanup.h"
#include "common/duration.h"

/* After a failure other than "full" (journald gone while it restarts, a disk full), the next try. */
#define AUDIT_QUEUE_RETRY_USEC (1 * USEC_PER_SEC)
/* journald's own client asks for this much (sd-journal), so that a burst of records fits */
#define AUDIT_JOURNAL_SNDBUF (8 * 1024 * 1024)

typedef struct AuditEntry {
        struct AuditEntry *next;
        char *data;
        size_t size;
        size_t done;            /* bytes of it the output took (a stream may take part of a record) */
} AuditEntry;

struct AuditQueue {
        AuditOutputKind kind;
        int fd;                 /* the queue's own: a new description, a dup, or its datagram socket */
        bool is_socket;         /* a stream socket: send(MSG_DONTWAIT) */
        char *path;             /* the datagram socket's address, to connect to again */
        sd_event *event;
        sd_event_source *io;    /* EPOLLOUT while records wait for a full output; made when first needed */
        sd_event_source *retry; /* while they wait after another failure */
        AuditEntry *head, *tail;
        size_t n_records, n_bytes;
        unsigned max_records;
        unsigned n_held;        /* records room is held for, not pushed yet (audit_queue_hold()) */
        bool fallback;          /* another output takes what this one fails: held records are not kept */
        void (*on_progress)(void *userdata);
        void *userdata;
};

static int audit_queue_new(sd_event *event, AuditOutputKind kind, int fd, unsigned max_records,
                           void (*on_progress)(void *userdata), void *userdata, AuditQueue **ret) {
        AuditQueue *q = calloc(1, sizeof(*q));

        if (!q)
                return -ENOMEM;
        q->kind = kind;
        q->fd = fd;
        q->event = event ? sd_event_ref(event) : NULL;
        q->max_records = max_records;
        q->on_progress = on_progress;
        q->userdata = userdata;
        *ret = q;
        return 0;
}

/*
 * The last resort for a pipe or terminal that cannot be opened anew (an agent that is not
 * root, given a pipe of root's, 0600): O_NONBLOCK on the description it shares with others,
 * who then see EAGAIN where they waited. Blocking the loop is not an option; this is said once.
 */
static int share_nonblocking(int fd, int open_error) {
        int own = fcntl(fd, F_DUPFD_CLOEXEC, 3), flags;

        if (own < 0)
                return -errno;
        flags = fcntl(own, F_GETFL);
        if (flags < 0 || fcntl(own, F_SETFL, flags | O_NONBLOCK) < 0) {
                int r = -errno;
                safe_close(own);
                return r;
        }
        fprintf(stderr, "dsagent: cannot open fd %d anew for audit records (%s): made it non-blocking for every "
                        "process that shares it\n", fd, strerror(open_error));
        return own;
}

/*
 * A description of the agent's own for @fd, O_NONBLOCK: a pipe, FIFO or terminal is
 * opened anew through /proc/self/fd; a socket and a regular file are duplicated (a
 * socket is sent to with MSG_DONTWAIT, and a file does not wait for a reader).
 */
static int open_own_nonblocking(int fd, bool *ret_socket) {
        char path[64];
        struct stat st;
        int own;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
                snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
                own = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
                if (own < 0)
                        return share_nonblocking(fd, errno);
        } else
                own = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (own < 0)
                return -errno;
        *ret_socket = S_ISSOCK(st.st_mode);
        return own;
}

int audit_queue_open_stream(sd_event *event, int fd, unsigned max_records, void (*on_progress)(void *userdata),
                            void *userdata, AuditQueue **ret) {
        bool is_socket = false;
        int own, r;

        own = open_own_nonblocking(fd, &is_socket);
        if (own < 0)
                return own;
        r = audit_queue_new(event, AUDIT_OUTPUT_STREAM, own, max_records, on_progress, userdata, ret);
        if (r < 0) {
                safe_close(own);
                return r;
        }
        (*ret)->is_socket = is_socket;
        return 0;
}

/* (Re)connects the queue's datagram socket to its path: journald may have started anew since. */
static int audit_queue_connect(AuditQueue *q) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        if (strlen(q->path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, q->path);
        if (connect(q->fd, (const struct sockaddr *)&sa, sizeof(sa)) < 0)
                return -errno;
        return 0;
}

int audit_queue_open_datagram(sd_event *event, const char *path, unsigned max_records,
                              void (*on_progress)(void *userdata), void *userdata, AuditQueue **ret) {
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int sndbuf = AUDIT_JOURNAL_SNDBUF;
        AuditQueue *q;
        int r;

        if (fd < 0)
                return -errno;
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) < 0)
                (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
        r = audit_queue_new(event, AUDIT_OUTPUT_DATAGRAM, fd, max_records, on_progress, userdata, &q);
        if (r < 0)
                return r;
        fd = -EBADF;
        q->path = strdup(path);
        r = q->path ? audit_queue_connect(q) : -ENOMEM;
        if (r < 0) {
                audit_queue_free(q);
                return r;
        }
        *ret = q;
        return 0;
}

/* Bytes of @p the output took, or a negative errno (-EAGAIN: it is full). A datagram goes whole. */
static ssize_t audit_queue_send_some(AuditQueue *q, const char *p, size_t n) {
        ssize_t k;

        do {
                if (q->kind == AUDIT_OUTPUT_DATAGRAM || q->is_socket)
                        k = send(q->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
                else
                        k = write(q->fd, p, n);
        } while (k < 0 && errno == EINTR);
        if (k < 0)
                return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        return k;
}

/* Sends the rest of @e; 0 when it is all out. journald gone and back is connected to anew, once. */
static int audit_queue_send_entry(AuditQueue *q, AuditEntry *e) {
        bool reconnected = false;

        while (e->done < e->size) {
                ssize_t k = audit_queue_send_some(q, e->data + e->done, e->size - e->done);

                if (k < 0 && q->kind == AUDIT_OUTPUT_DATAGRAM && !reconnected &&
                    (k == -ECONNREFUSED || k == -ENOTCONN || k == -ECONNRESET)) {
                        reconnected = true;
                        if (audit_queue_connect(q) == 0)
                                continue;
                }
                if (k < 0)
                        return (int)k;
                e->done += (size_t)k;
        }
        return 0;
}

static void audit_queue_pop(AuditQueue *q) {
        AuditEntry *e = q->head;

        q->head = e->next;
        if (!q->head)
                q->tail = NULL;
        q->n_records--;
        q->n_bytes -= e->size;
        free(e->data);
        free(e);
}

/* Sends from the head on: 0 when nothing waits, -EAGAIN when the output is full, else its error. */
static int audit_queue_drain(AuditQueue *q, bool *ret_progress) {
        while (q->head) {
                int r = audit_queue_send_entry(q, q->head);

                if (r < 0)
                        return r;
                audit_queue_pop(q);
                *ret_progress = true;
        }
        return 0;
}

static int on_audit_output_writable(sd_event_source *s, int fd, uint32_t revents, void *userdata);
static int on_audit_retry(sd_event_source *s, uint64_t usec, void *userdata);

/* Waits, in the loop, for what @r says: writable again, or a second after a failure. */
static void audit_queue_arm(AuditQueue *q, int r) {
        if (!q->event)
                return;
        if (r == -EAGAIN && !q->io &&
            sd_event_add_io(q->event, &q->io, q->fd, EPOLLOUT, on_audit_output_writable, q) < 0)
                q->io = NULL;
        if (q->io)
                (void)sd_event_source_set_enabled(q->io, r == -EAGAIN ? SD_EVENT_ON : SD_EVENT_OFF);
        if (r == 0 || (r == -EAGAIN && q->io))
                return;
        /* another failure, or an output epoll cannot wait on: try again in a while */
        if (!q->retry) {
                if (sd_event_add_time_relative(q->event, &q->retry, CLOCK_MONOTONIC, AUDIT_QUEUE_RETRY_USEC, 0,
                                               on_audit_retry, q) < 0)
                        q->retry = NULL;
                return;
        }
        (void)sd_event_source_set_time_relative(q->retry, AUDIT_QUEUE_RETRY_USEC);
        (void)sd_event_source_set_enabled(q->retry, SD_EVENT_ONESHOT);
}

static void audit_queue_run(AuditQueue *q) {
        bool progress = false;
        int r = audit_queue_drain(q, &progress);

        audit_queue_arm(q, r);
        if (progress && q->on_progress)
                q->on_progress(q->userdata);
}

static int on_audit_output_writable(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        audit_queue_run(userdata);
        return 0;
}

static int on_audit_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        audit_queue_run(userdata);
        return 0;
}

bool audit_queue_has_room(const AuditQueue *q, AuditQueueClass class, size_t size) {
        size_t max_records = q->max_records, max_bytes = AUDIT_QUEUE_BYTES;

        if (class == AUDIT_QUEUE_HELD)
                return true;
        if (class == AUDIT_QUEUE_EVENT) {
                max_records += AUDIT_QUEUE_RESERVE_RECORDS;
                max_bytes += AUDIT_QUEUE_RESERVE_BYTES;
        }
        return q->n_records < max_records && q->n_bytes + size <= max_bytes;
}

int audit_queue_hold(AuditQueue *q, unsigned records) {
        if (records > AUDIT_QUEUE_HELD_RECORDS - q->n_held ||
            q->n_records + records > q->max_records ||
            q->n_bytes + (size_t)records * AUDIT_QUEUE_HELD_RECORD_BYTES > AUDIT_QUEUE_BYTES)
                return -ENOBUFS;
        q->n_held += records;
        return 0;
}

void audit_queue_unhold(AuditQueue *q, unsigned records) {
        q->n_held -= records < q->n_held ? records : q->n_held;
}

void audit_queue_set_fallback(AuditQueue *q) {
        q->fallback = true;
}

int audit_queue_push(AuditQueue *q, AuditQueueClass class, char *data, size_t size) {
        _cleanup_free_ char *d = data;
        AuditEntry *e;
        int r;

        if (class == AUDIT_QUEUE_HELD && q->n_held == 0)
                class = AUDIT_QUEUE_EVENT; /* room was not held after all: what happened takes the reserve */
        if (class == AUDIT_QUEUE_HELD)
                q->n_held--;
        else if (!audit_queue_has_room(q, class, size))
                return -ENOBUFS;
        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        *e = (AuditEntry){ .data = TAKE_PTR(d), .size = size };
        if (q->head && !q->event) {
                /* no loop sends the queue on: what waits goes first, now, as far as the output takes it */
                bool progress = false;
                (void)audit_queue_drain(q, &progress);
        }
        if (!q->head) {
                /* nothing waits: straight out, as far as the output takes it */
                r = audit_queue_send_entry(q, e);
                /* a failed output drops a record no one held room for; a held one waits for it to work,
                 * unless another output takes it */
                if (r == 0 || (r != -EAGAIN && e->done == 0 && (class != AUDIT_QUEUE_HELD || q->fallback))) {
                        free(e->data);
                        free(e);
                        return r;
                }
        } else
                r = -EAGAIN; /* the output is waited for already */
        if (q->tail)
                q->tail->next = e;
        else
                q->head = e;
        q->tail = e;
        q->n_records++;
        q->n_bytes += size;
        if (q->head == e)
                audit_queue_arm(q, r);
        return 0;
}

static uint64_t now_usec(void) {
        struct timespec ts;

        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * USEC_PER_SEC + (uint64_t)ts.tv_nsec / 1000;
}

size_t audit_queue_flush(AuditQueue *q, uint64_t timeout_usec) {
        uint64_t deadline = now_usec() + timeout_usec;
        bool progress = false;

        while (q->head) {
                uint64_t now = now_usec();
                int r = audit_queue_drain(q, &progress);

                if (r == 0 || now >= deadline)
                        break;
                if (r == -EAGAIN) {
                        struct pollfd p = { .fd = q->fd, .events = POLLOUT };
                        (void)poll(&p, 1, (int)((deadline - now + 999) / 1000));
                } else
                        (void)poll(NULL, 0, 100);
        }
        return q->n_records;
}

AuditQueue *audit_queue_free(AuditQueue *q) {
        if (!q)
                return NULL;
        while (q->head)
                audit_queue_pop(q);
        sd_event_source_disable_unref(q->io);
        sd_event_source_disable_unref(q->retry);
        sd_event_unref(q->event);
        safe_close(q->fd);
        free(q->path);
        free(q);
        return NULL;
}
