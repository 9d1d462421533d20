/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Where the runtime writes a dump: a directory of root's in the target's own
 * /tmp (reached through /proc/PID/root, so private /tmp and containers work),
 * opened to the target's user only while the dump is written.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "target.h"

#define DUMP_STAGE_FILE "dump"

enum {
        _DUMP_STAGE_E_SUCCESS,
        DUMP_STAGE_E_UNUSABLE, /* the target's /tmp cannot hold a staging directory safely */
        DUMP_STAGE_E_NO_DUMP,  /* nothing, or not a plain file of the target's user, was left there */
};

typedef struct DumpStage {
        int tmp_fd;             /* the target's /tmp */
        int dir_fd;             /* our directory in it */
        char name[64];          /* the directory's name: random, so nobody can prepare it */
        char target_path[96];   /* the dump's path as the target sees it */
        char *record_path;      /* a note in the runtime directory, for clean-up after a crash */
} DumpStage;

int dump_stage_create(const Target *t, const char *runtime_dir, DumpStage **ret, const char **ret_why);
int dump_stage_close_to_target(DumpStage *s);
int dump_stage_open_dump(DumpStage *s, uid_t owner, int *ret_fd, uint64_t *ret_size, const char **ret_why);
DumpStage *dump_stage_free(DumpStage *s);
void dump_stage_clean_stale(const char *runtime_dir);

DEFINE_TRIVIAL_CLEANUP_FUNC(DumpStage *, dump_stage_free);
