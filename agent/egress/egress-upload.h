/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An artifact of dump_dir to its [egress.NAME] store (egress-upload.c), the loop's side: the object key
 * (egress-name.h), the label user.dsagent.egress on the file (pending:NAME, then uploaded:NAME:KEY or
 * failed:NAME:RESULT), the "queued" record before the hand-over, the hand-over itself (egress-client.h, the file
 * opened O_RDONLY), and on the answer the outcome record and, with keep_local = false, the local copy freed.
 * Nothing of it waits: the egress process does the network's work.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "agent/loop/broker-state.h"
#include "agent/egress/egress-client.h"
#include "policy/policy.h"

#define EGRESS_LABEL "user.dsagent.egress"

/* What the key and the object's metadata say of an artifact. The strings are the caller's, read in the call. */
typedef struct EgressArtifact {
        const char *type;      /* dump, trace, gcdump, stacks, counters, exceptions, crash */
        const char *extension; /* without its dot: dmp, nettrace, gcdump, txt */
        const char *process;   /* the target's name (its owner's to choose: made safe in the key) */
        pid_t pid;
        const char *unit;      /* NULL or "": none */
        const char *container; /* NULL or "": none */
        uint64_t request_id;
        uid_t requester;       /* (uid_t) -1: a table's, no requester */
        const char *rule;      /* the rule or [[collect]] table that names the store */
} EgressArtifact;

/**
 * egress_upload_artifact() - upload @name of @dir_fd (dump_dir, @dump_dir its path) to @e, recorded and labelled
 *
 * Called once the artifact is published and its own record written. Whatever happens is recorded (an egress
 * record with MESSAGE_ID DSAGENT_MESSAGE_EGRESS); the artifact stays in dump_dir unless it was uploaded and
 * @e's keep_local is false. Never fails the artifact's own request.
 */
void egress_upload_artifact(Broker *b, const PolicyEgress *e, const char *dump_dir, int dir_fd, const char *name,
                            const EgressArtifact *a);

/**
 * egress_upload_watch() - record each death of the egress process's server (a "restarted" record)
 *
 * Once b->egress runs. The uploads the server had taken are handed over again by their own retry.
 */
void egress_upload_watch(Broker *b);

/* Frees the uploads waiting for their next hand-over, as the agent stops: their label stays pending:STORE, and
 * the next start hands them over again. */
void egress_upload_forget_waiting(Broker *b);

/**
 * egress_presign() - ask the egress process for a presigned GET URL of @key in @e's bucket, living @e's url_max_age
 *
 * @done runs from the event loop with the answer (its url, or its result and message), or NULL when the egress
 * process went away; egress_client_cancel(b->egress, *@ret_id) forgets it.
 *
 * Return: 0 with the request's id, -ECONNRESET when no egress process runs, -EAGAIN when it is far behind, or a
 * negative errno.
 */
int egress_presign(Broker *b, const PolicyEgress *e, const char *key, EgressUploadDone done, void *userdata,
                   uint64_t *ret_id);

/**
 * egress_resubmit_pending() - hand over again every file of dump_dir whose label says "pending:STORE"
 *
 * At start-up, once the egress process runs: an upload the agent did not see end (it stopped, or was killed)
 * ends now in a confirmed upload or a recorded failure. A file whose store is no longer in the policy is
 * labelled failed:STORE:no-such-store. Failed uploads are not tried again here.
 */
void egress_resubmit_pending(Broker *b);
