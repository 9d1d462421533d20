/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The crashes systemd-coredump recorded, read from the journal with sd-journal: every local journal
 * file (the system's and each user's: systemd-coredump logs as the crashed process's user, so with
 * SplitMode=uid its entries are in that user's file), entries with its MESSAGE_ID, each parsed and
 * trusted or not by crash_entry_parse(). In a worker: the journal may be large and its files slow.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/crashes/crash-entry.h"

/* A place in the journal to go on from (sd_journal_get_cursor()) */
#define CRASH_JOURNAL_CURSOR_MAX 256

typedef struct CrashQuery {
        uint64_t since_usec;    /* entries logged at or after this time (0: from the first) */
        /* one crash only, by its id: its time (COREDUMP_TIMESTAMP, seconds) and pid; 0 pid: every crash */
        uint64_t id_seconds;
        uint32_t id_pid;
        char after[CRASH_JOURNAL_CURSOR_MAX]; /* "" or a cursor: only entries after it */
} CrashQuery;

/*
 * Called for each trusted crash, oldest first; its cgroup's vouching is filled in. Return true to go
 * on, false to stop there (the entry is then not taken: the next read resumes at it).
 */
typedef bool (*CrashEach)(const CrashEntry *e, void *userdata);

/**
 * crash_journal_read() - the trusted crashes @q asks for
 * @ret_cursor: the cursor of the last entry taken, for the next read (CRASH_JOURNAL_CURSOR_MAX bytes); "" when none
 * @ret_more: whether @each stopped before the end
 * @ret_untrusted: how many entries read (its MESSAGE_ID, logged from its slice) were not its
 *
 * Return: 0, or a negative errno (the journal could not be opened or read; -ENODATA: not one of its
 * files could be opened, which is never taken for a journal without crashes).
 */
int crash_journal_read(const CrashQuery *q, CrashEach each, void *userdata, char *ret_cursor, bool *ret_more,
                       unsigned *ret_untrusted);
