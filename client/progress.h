/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A line on standard error that shows how long work is going, redrawn in place, as dotnet-trace does */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct Progress {
        bool enabled;           /* standard error is a terminal and dsctl is not --quiet */
        const char *verb;
        uint64_t started_usec;
        uint64_t drawn_usec;
        uint64_t bytes;
        bool have_bytes;        /* until the first byte: "waiting" */
        const char *waiting;    /* what it waits for then */
        uint64_t items;         /* what the bytes held so far (gcdump: the heap's objects) */
        const char *items_name; /* NULL: no count shown */
        bool shown;             /* the line is on the terminal now */
} Progress;

/* Shows nothing unless @enabled; the clock starts now. */
void progress_start(Progress *p, const char *verb, bool enabled, const char *waiting);
void progress_set_bytes(Progress *p, uint64_t bytes);
/* A count shown after the bytes: "1,500,000 objects" (@name plural). */
void progress_set_items(Progress *p, uint64_t items, const char *name);
/* Redraws the line, at most ten times a second unless @force. */
void progress_draw(Progress *p, bool force);
/* Takes the line away, before anything else is written to the terminal. */
void progress_clear(Progress *p);
/* Whether progress may be shown: standard error is a terminal, and no --quiet. */
bool progress_wanted(bool quiet);
