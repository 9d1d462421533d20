/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One client connection: read one request, run it, write the reply, audit the decision */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "audit.h"
#include "broker.h"
#include "sockopt.h"
#include "target.h"
#include "wire.h"

typedef enum ConnectionState {
        CONNECTION_READING,
        CONNECTION_WORKING,
        CONNECTION_WRITING,
} ConnectionState;

struct Connection {
        Broker *broker;
        Connection *prev, *next;
        int fd;
        sd_event_source *io;
        sd_event_source *timer;
        ConnectionState state;
        PeerCreds peer;
        uint64_t request_id;

        uint8_t *in;
        size_t in_size;

        uint8_t *out;
        size_t out_size, out_sent;
        int out_fd;             /* sent with the frame starting at out_fd_offset, then closed */
        size_t out_fd_offset;

        /* request state shared by the command handlers */
        Policy *policy;         /* the policy the request started under, kept through a reload */
        PolicyRequest request;  /* what is being decided */
        char *trace_profile;    /* owned storage for request.trace_profile */
        PolicyVerdict verdict;  /* and the decision, once made */
        bool consume_rate;      /* whether the decision uses up the rule's rate limit */
        void (*decided)(Connection *c);
        struct PamQuery *pam_query;
        Target *target;
        void *work;             /* the handler's own state */
        void (*work_free)(void *work);

        AuditRecord audit;
        bool audited;
        bool admitted;          /* took one from its user's budget of recorded decisions */

        /* while working: events on the client's socket go to the handler */
        void (*on_client_event)(Connection *c, uint32_t revents);
        /* a trace or counters session of this target runs for this client */
        bool holds_session;
};

int connection_new(Broker *b, int fd, Connection **ret);
Connection *connection_free(Connection *c);

int connection_set_deadline(Connection *c, uint64_t usec_from_now);
void connection_set_target(Connection *c, Target *t);
int connection_queue_frame(Connection *c, WireWriter *w);
int connection_queue_frame_with_fd(Connection *c, WireWriter *w, int fd);
int connection_send_frame_now(Connection *c, WireWriter *w, int fd);
int connection_watch_client(Connection *c, uint32_t events, void (*on_event)(Connection *c, uint32_t revents));
void connection_reply_done(Connection *c, const char *rule, const char *reason);
void connection_reply_error(Connection *c, AuditDecision decision, WireError error, const char *reason);
void connection_reply_runtime_error(Connection *c, uint32_t hresult, const char *reason);
void connection_reply_invisible(Connection *c);

/* What a process that does not exist is answered with; an invisible one gets the very same. */
#define COMMANDS_NO_SUCH_PROCESS "no such process"
