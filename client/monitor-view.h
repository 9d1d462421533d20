/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsctl stacks, exceptions and logs: what the stream of their session says,
 * as dotnet-monitor's /stacks, /exceptions and /logs show it. Logs are shown
 * as they come; stacks and exceptions at the end, once the rundown has named
 * the methods of their frames.
 */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "nettrace.h"

#define MONITOR_VIEW_THREADS_MAX 65536u    /* threads whose first stack is kept */
#define MONITOR_VIEW_EXCEPTIONS_MAX 10000u /* exceptions kept to be shown at the end; more are counted */
#define MONITOR_VIEW_FRAMES_MAX 512u       /* frames kept of one stack */

typedef enum MonitorViewKind {
        MONITOR_VIEW_STACKS,
        MONITOR_VIEW_EXCEPTIONS,
        MONITOR_VIEW_LOGS,
} MonitorViewKind;

typedef enum MonitorViewFormat {
        MONITOR_VIEW_TEXT,
        MONITOR_VIEW_JSON,       /* stacks: one object; exceptions and logs: JSON lines */
        MONITOR_VIEW_SPEEDSCOPE, /* stacks: speedscope's file format */
} MonitorViewFormat;

typedef struct MonitorView MonitorView;

int monitor_view_new(MonitorViewKind kind, MonitorViewFormat format, FILE *out, MonitorView **ret);
MonitorView *monitor_view_free(MonitorView *v);
void monitor_view_header(MonitorView *v, const NettraceHeader *h);
/* Return: 0 or -ENOMEM; what the view cannot read is left out. */
int monitor_view_event(MonitorView *v, const NettraceEvent *e);
/* The stream has ended: stacks and exceptions are shown now. Return: how many things were shown. */
unsigned long monitor_view_finish(MonitorView *v);
/* Exceptions seen but not kept (past MONITOR_VIEW_EXCEPTIONS_MAX). */
unsigned long monitor_view_left_out(const MonitorView *v);
