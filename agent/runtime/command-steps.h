/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The steps every command about one process shares: pin the target the request names, reach its
 * runtime (its socket, or the port it connected in on), call it, move the request's deadline and
 * tell the client how far the work got, and the fields every reply about a process carries. Each
 * step answers the request's failures itself; the caller only goes on. (Their names keep the
 * commands_ prefix they had in commands.c.)
 */
#pragma once

#include "common/dotnet-ipc.h"
#include "agent/loop/request.h"
#include "agent/runtime/runtime-call.h"
#include "common/wire.h"

/*
 * Before anything is looked at: whether the client asked for PROGRESS frames, and if so the first,
 * the backstop every request starts with (2 x --runtime-timeout, connection_on_request()).
 */
void commands_announce_first_deadline(Request *req, const WireMessage *m);

/* What a job's failure (jobs.h's codes, or a negative errno) means to the client: answered here; @why may be NULL. */
void commands_reply_job_error(Request *req, int r, const char *why);
/* What target_connect()'s failure (target.h's codes, or a negative errno) means to the client; @why may be NULL. */
void commands_reply_connect_error(Request *req, int r, const char *why);

/*
 * Pins the process the request names (its PID, or the one .NET process of
 * its UNIT that the requester may see) in a worker, into req->target, and
 * calls @opened. A process the requester may not see is answered exactly as
 * one that does not exist; every failure is answered here.
 */
void commands_open_target(Request *req, const WireMessage *m, void (*opened)(Request *req));

/* Finds req->target's runtime socket in a worker, then connects to it (target_connect()) and
 * calls @connected with the socket; every failure is answered here. Room for the request's
 * records is held first (request_hold_audit()): without it nothing is looked up or sent. */
void commands_connect_runtime(Request *req, void (*connected)(Request *req, int fd));

/*
 * A connection carries one command: a step after the first needs another.
 * Through the port the runtime connected in on (waiting for its next
 * connection, under --runtime-timeout), else to the socket found before.
 * @connected gets it; every failure is answered here. Room for the request's records is held
 * first, as for commands_connect_runtime().
 */
void commands_connect_again(Request *req, void (*connected)(Request *req, int fd));

/*
 * Whether the runtime of req->target connected in on a port (ports.h) and the
 * answer @r of the socket lookup (jobs_find_socket()) leaves it usable: any
 * but a process that is gone or a lookup that did not finish. A runtime that
 * connects in may have no socket of its own the agent can reach.
 */
bool commands_port_serves(Request *req, int r);

/*
 * Sends @command, which has no payload, on @fd (the call takes it) and waits for its reply
 * under --runtime-timeout (runtime_call_start()), the call in *@ret_call; a failure to start
 * is answered here.
 */
void commands_call_runtime(Request *req, int fd, DotnetIpcCommand command, RuntimeCallDone done, void *userdata,
                           RuntimeCall **ret_call);

/*
 * Moves the request's deadline (connection_set_deadline()) to @usec from now;
 * a client that asked for PROGRESS frames is told, with @what saying which
 * deadline it is, so that it waits exactly as long as the agent does.
 */
int commands_set_deadline(Request *req, uint64_t usec, const char *what);

/* Tells a client that asked for PROGRESS frames how far the work got (@bytes) and the time left. */
void commands_report_progress(Request *req, uint64_t bytes);

/* A process's PID, UID (effective), UNIT and EXE, as every reply about one carries them. */
void commands_put_target_fields(WireWriter *w, const Target *t);

/* For a runtime that connected in on a port: the port, and whether it waits to be resumed. */
void commands_put_port_fields(WireWriter *w, Request *req);

struct PolicyEgress;
/*
 * A rule's or a [[collect]] table's egress store (nothing when @egress is NULL): EGRESS, its name, and
 * EGRESS_STORE, where its artifacts go, "ENDPOINT/BUCKET/PREFIX". Nothing of its credentials, not even where
 * they are: a requester has no use for the keys' location, and it would point whoever else gets a foothold on
 * the host at the file to go for (root sees it in the policy and in --check-policy).
 */
void commands_put_egress(WireWriter *w, const struct PolicyEgress *egress);

/* What a reply keeps free, after a string of a target's, for the fields that come after it (ids, a port). */
#define COMMANDS_FRAME_RESERVE 1024u

/*
 * A string from a target, for @tag: as much of it as fits, at most WIRE_STRING_MAX bytes and no more
 * than leaves COMMANDS_FRAME_RESERVE of the frame free, cut before a character where UTF-8 says
 * where one begins; as it is for a text tag (WIRE_KIND_TEXT: the client escapes it), cut to its
 * longest valid UTF-8 prefix for a string tag. Left out when nothing of it fits. So a runtime's long
 * strings make a reply shorter, never fail it.
 */
void commands_put_untrusted_string(WireWriter *w, WireTag tag, const char *s);
