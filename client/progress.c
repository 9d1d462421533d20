/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The progress line on standard error (progress.h), redrawn in place while work goes on. */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "client/output.h"
#include "client/progress.h"

#define PROGRESS_REDRAW_USEC 100000ULL

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}

bool progress_wanted(bool quiet) {
        return !quiet && isatty(STDERR_FILENO);
}

void progress_start(Progress *p, const char *verb, bool enabled, const char *waiting) {
        *p = (Progress){ .enabled = enabled, .verb = verb, .started_usec = now_usec(), .waiting = waiting };
}

void progress_set_bytes(Progress *p, uint64_t bytes) {
        p->bytes = bytes;
        p->have_bytes = true;
}

void progress_set_items(Progress *p, uint64_t items, const char *name) {
        p->items = items;
        p->items_name = name;
}

/* "01:05", or "1:02:03" past an hour */
static void format_elapsed(uint64_t usec, char *buf, size_t size) {
        unsigned long long s = usec / 1000000ULL;

        if (s >= 3600)
                snprintf(buf, size, "%llu:%02llu:%02llu", s / 3600, s / 60 % 60, s % 60);
        else
                snprintf(buf, size, "%02llu:%02llu", s / 60, s % 60);
}

void progress_draw(Progress *p, bool force) {
        uint64_t now = now_usec();
        char elapsed[32], size[32], count[32], items[96] = "";

        if (!p->enabled || (!force && p->shown && now - p->drawn_usec < PROGRESS_REDRAW_USEC))
                return;
        format_elapsed(now - p->started_usec, elapsed, sizeof(elapsed));
        /* \r and "erase to the end of the line": the line is rewritten where it stands */
        if (p->have_bytes) {
                output_format_size(p->bytes, size, sizeof(size));
                if (p->items_name) {
                        output_format_grouped((int64_t)p->items, count, sizeof(count));
                        snprintf(items, sizeof(items), "%s %s, ", count, p->items_name);
                }
                fprintf(stderr, "\r\033[Kdsctl: %s: %s, %s%s", p->verb, size, items, elapsed);
        } else
                fprintf(stderr, "\r\033[Kdsctl: %s: %s, %s", p->verb, p->waiting ? p->waiting : "waiting", elapsed);
        fflush(stderr);
        p->drawn_usec = now;
        p->shown = true;
}

void progress_clear(Progress *p) {
        if (!p->shown)
                return;
        fputs("\r\033[K", stderr);
        fflush(stderr);
        p->shown = false;
}
