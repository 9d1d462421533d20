/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Which of dump_dir's artifacts retention removes, and why: pure, over what a worker read of each
 * file (retention-pass.h). No I/O, no logging, no clock of its own.
 *
 * The rules, each oldest first (by the time the file was written, then by @order):
 *   max_age           every artifact older than it;
 *   max_files         of what is left, the oldest of whoever holds the most (a user by the
 *                     requester, a table, or nobody: root's and unlabelled files), until no
 *                     more than it are left: one user's many files never count another's out;
 *   max_use_per_user  per user who asked for dumps (the requester its label names; root's and the
 *                     tables' count against none): the oldest of theirs, until theirs take no more
 *                     than it, but never their newest;
 *   a table's max_use per [[collect]] or [[on_start]] table likewise, never its newest;
 *   make room         for a user's dump that would not fit: the oldest artifacts of tables that
 *                     yield to dumps, until what all the rules free is the room asked for.
 * An artifact is removed once, for the first rule that takes it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum RetentionReason {
        RETENTION_MAX_AGE,
        RETENTION_MAX_FILES,
        RETENTION_USER_BUDGET,  /* [agent] max_use_per_user */
        RETENTION_TABLE_BUDGET, /* the table's max_use */
        RETENTION_MAKE_ROOM,    /* a yielding table's, for a user's dump */
        _RETENTION_REASON_MAX,
} RetentionReason;

/* "max_age", "max_files", "max_use_per_user", "table-max_use", "make-room" */
const char *retention_reason_to_string(RetentionReason r);

/* One artifact, as its labels and its inode say. */
typedef struct RetentionEntry {
        uint64_t mtime_usec;    /* written at (CLOCK_REALTIME) */
        uint64_t bytes;         /* its blocks on disk: what removing it frees */
        uint64_t order;         /* ties of mtime_usec go by this (the inode number): the same plan every time */
        uid_t requester;        /* who asked for it; (uid_t) -1: nobody's (a table's, root's, unlabelled) */
        int table;              /* its table in RetentionSettings.tables, or -1 */
} RetentionEntry;

typedef struct RetentionTable {
        uint64_t max_use;       /* bytes; 0: no budget */
        bool yields;            /* its artifacts make room for users' dumps */
} RetentionTable;

typedef struct RetentionSettings {
        uint64_t now_usec;
        uint64_t max_age_usec;  /* 0: none goes for its age */
        unsigned max_files;     /* 0: no bound */
        uint64_t user_max_use;  /* 0: no budget */
        const RetentionTable *tables;
        size_t n_tables;
        uint64_t room;          /* bytes to free for a user's dump (the other rules' removals count); 0: none */
} RetentionSettings;

typedef struct RetentionVictim {
        size_t entry;           /* its index in the entries */
        RetentionReason reason;
        uint64_t limit;         /* the limit the rule keeps (age in usec, files, bytes) ... */
        uint64_t total;         /* ... and where its owner stood against it when the rule took it */
} RetentionVictim;

/**
 * retention_plan() - what to remove of @entries under @s, in the order to remove it
 * @ret: room for @n victims (each entry is one at most)
 *
 * Return: 0 with the victims in @ret and their number in *@ret_n; -ENOMEM.
 */
int retention_plan(const RetentionEntry *entries, size_t n, const RetentionSettings *s, RetentionVictim *ret,
                   size_t *ret_n);
