/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One retention pass over dump_dir, in a worker (jobs.h's jobs_retain()): every artifact listed
 * and its labels read, the policy's rules applied (retention-plan.h), and each artifact the plan
 * takes removed, oldest first, once the agent has recorded it.
 *
 * Each removal is asked on the pass's control socket (a SOCK_SEQPACKET pair): the worker sends a
 * RetentionNote RETENTION_NOTE_REMOVING and waits for RETENTION_GO, which the agent sends once the
 * record is queued, or RETENTION_STOP (the record could not be written: nothing more is removed).
 * A removal that then fails is told with RETENTION_NOTE_NOT_REMOVED. So nothing leaves dump_dir
 * that the audit trail does not name first.
 */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/dumps/dump-writer.h"
#include "policy/policy.h"

/* Removals one pass makes at most: a pass is bounded work; the agent runs another when more are due. */
#define RETENTION_PASS_REMOVALS_MAX 64
/* How long the worker waits for the agent's word on one removal. */
#define RETENTION_PASS_ANSWER_MSEC 30000

enum {
        RETENTION_NOTE_REMOVING = 1,
        RETENTION_NOTE_NOT_REMOVED,
};
#define RETENTION_GO 'Y'
#define RETENTION_STOP 'N'

typedef struct RetentionNote {
        uint8_t kind;           /* RETENTION_NOTE_* */
        uint8_t reason;         /* RetentionReason */
        int32_t error;          /* NOT_REMOVED: the errno */
        uint64_t bytes;         /* its blocks on disk */
        uint64_t age_usec;
        uint64_t limit, total;  /* the rule's limit and where its owner stood (RetentionVictim) */
        uint32_t requester;     /* (uint32_t) -1: nobody's */
        int32_t target_pid;     /* 0: unlabelled */
        uint32_t target_uid;    /* (uint32_t) -1: unlabelled */
        char path[PATH_MAX];    /* dump_dir/name */
        char origin[16];        /* "collect", "on_start", or "" */
        char table[65];
        char dump_type[16];
} RetentionNote;

typedef struct RetentionPassResult {
        uint32_t removed;
        uint64_t bytes;         /* the removed artifacts' blocks */
        bool more;              /* the plan held more than RETENTION_PASS_REMOVALS_MAX */
        bool stopped;           /* the agent said RETENTION_STOP, or went away */
        uint64_t room_left;     /* of the room asked for, what the guards still refuse (0: it is there) */
} RetentionPassResult;

/**
 * retention_pass_run() - one pass over @p's dump_dir, asking on @control_fd before each removal
 * @slots: the bytes of dumps in flight (dump-writer.h), which count against max_use
 * @room: bytes a user's dump needs written beyond what the guards now allow (0: none): yielding
 *        tables' artifacts go until the guards leave that much
 *
 * Return: 0 with *@ret, or a negative errno (with *@ret_why) when dump_dir cannot be read.
 */
int retention_pass_run(const Policy *p, const DumpSlots *slots, uint64_t room, int control_fd,
                       RetentionPassResult *ret, const char **ret_why);
