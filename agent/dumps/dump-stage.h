/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Where the runtime writes a dump: a FIFO in a fresh directory of root's in
 * the target's own /tmp, found through target-view.h (private /tmp and
 * containers work; no FUSE, network or unlisted mount is ever touched). The
 * target's user may only search the directory and only write the FIFO, and
 * the agent holds the FIFO's read end before the runtime is asked: the
 * dump's bytes flow to the agent and never exist as a file anyone but root
 * could open.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "agent/targets/target.h"

#define DUMP_STAGE_FIFO "dump"

enum {
        _DUMP_STAGE_E_SUCCESS,
        DUMP_STAGE_E_UNSAFE_FS, /* the target's /tmp lies on a FUSE or network file system */
        DUMP_STAGE_E_UNUSABLE,  /* no safe place there: missing, read-only, without ACLs, someone else's, a mount in the way */
        DUMP_STAGE_E_GONE,      /* the target exited */
};

typedef struct DumpStage {
        int tmp_fd;             /* the target's /tmp (O_PATH) */
        int dir_fd;             /* our directory in it */
        int fifo_fd;            /* the FIFO's read end, non-blocking; -EBADF once taken */
        char name[64];          /* the directory's name: random, so nobody can prepare it */
        char target_path[96];   /* the FIFO's path as the target sees it */
        char *record_path;      /* a note in the runtime directory, for clean-up after a crash */
} DumpStage;

/**
 * dump_stage_create() - make the directory and its FIFO in the target's /tmp
 *
 * /tmp must be the target user's own (not writable by others unless sticky)
 * or root's, sticky and world-writable: only then can nobody else rename or
 * replace the directory. The directory is root's, 0700, with the ACL
 * u:TARGET:--x; the FIFO is root's, 0600, with u:TARGET:-w-. Both are opened
 * without crossing a mount and checked to be the agent's own.
 *
 * Return: 0, DUMP_STAGE_E_UNSAFE_FS, DUMP_STAGE_E_UNUSABLE (with *@ret_why),
 * DUMP_STAGE_E_GONE, or a negative errno.
 */
int dump_stage_create(const Target *t, const char *runtime_dir, DumpStage **ret, const char **ret_why);

/* The FIFO's read end, for the caller to keep: the stage no longer closes it. */
int dump_stage_take_fifo(DumpStage *s);

/* In a worker, once the fds went to the agent: frees the memory, removes nothing. */
void dump_stage_disown(DumpStage *s);

/*
 * In the agent: the stage a worker made, from its names and fds (all taken
 * over, also on failure). dump_stage_free() removes it as if made here: by
 * name, in the directories those fds are, which no lookup is needed for.
 *
 * Return: 0 or -ENOMEM.
 */
int dump_stage_adopt(const char *name, const char *target_path, const char *record_path, int tmp_fd, int dir_fd,
                     int fifo_fd, DumpStage **ret);

/*
 * Frees the stage and removes what the agent made, by name: the FIFO, then
 * the (then empty) directory. Never recursive: nothing else can be in it.
 */
DumpStage *dump_stage_free(DumpStage *s);

/**
 * dump_stage_set_aside_stale() - mark the notes of an earlier agent's staging directories as stale
 *
 * Every staging directory is noted in the runtime directory while it exists;
 * notes there when an agent starts belong to an agent that died. Each is
 * renamed to a name of its own ("stale" before it), so that the clean-up
 * (dump_stage_clean_stale(), in a worker, some time later) finds those and
 * never a note of this agent's own dumps, which may be staging by then. Run
 * once at start, before the first request is read: renames in the agent's
 * own directory, which waits on nothing of anyone else's.
 */
void dump_stage_set_aside_stale(const char *runtime_dir);

/**
 * dump_stage_clean_stale() - finish the clean-up an earlier agent could not
 *
 * For each note dump_stage_set_aside_stale() set aside: the directory of a
 * process that still lives is removed like any other, and the note goes.
 */
void dump_stage_clean_stale(const char *runtime_dir);

DEFINE_TRIVIAL_CLEANUP_FUNC(DumpStage *, dump_stage_free);
