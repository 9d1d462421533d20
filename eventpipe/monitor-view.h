/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsctl stacks, exceptions and logs: what the stream of their session says,
 * as dotnet-monitor's /stacks, /exceptions and /logs show it, and stacks'
 * text as dotnet-stack report prints it (monitor-view.c). Logs are shown
 * as they come; stacks and exceptions at the end, once the rundown has named
 * the methods of their frames.
 */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "eventpipe/monitor-events.h"
#include "eventpipe/nettrace.h"

/*
 * What the view keeps and shows: the runtime writes the stream, and a stack
 * names its frames by address, a scope is named by an id, so a few bytes of
 * it could otherwise become gigabytes on the caller's terminal.
 */
#define MONITOR_VIEW_THREADS_MAX 65536u    /* threads whose first stack is kept */
#define MONITOR_VIEW_EXCEPTIONS_MAX 10000u /* exceptions kept to be shown at the end; more are counted */
#define MONITOR_VIEW_FRAMES_MAX 512u       /* frames kept of one stack */
#define MONITOR_VIEW_KEPT_BYTES_MAX (64u << 20) /* bytes of stacks (stacks) or exceptions (exceptions) kept */
#define MONITOR_VIEW_FRAMES_SHOWN_MAX 256u /* frames shown of one stack, innermost first; "[N frames left out]" */
#define MONITOR_VIEW_OUTPUT_MAX (64u << 20) /* bytes stacks and exceptions write; the threads or exceptions
                                             * past it are counted, not shown (monitor_view_not_shown()) */
#define MONITOR_VIEW_NAME_MAX 1024u        /* bytes shown of a name (method, class, module, exception type,
                                            * category, event name) and of a scope's key or value */
#define MONITOR_VIEW_MESSAGE_MAX 8192u     /* bytes shown of a message (an exception's, a log's) */
#define MONITOR_VIEW_SCOPE_BYTES_MAX 4096u /* bytes of scope keys and values shown with one log message;
                                            * the arguments past them are counted ("ScopesLeftOut") */
/* What is cut of a name or a message ends in "…[N bytes left out]", on a character's boundary. */

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

/*
 * An exception thrown, with the stack the runtime took of it (innermost first; at most
 * MONITOR_VIEW_FRAMES_MAX frames kept, @lost: those past them), kept to be shown by a view of
 * another session of the same process: the [[collect]] watch's exception that fires a table, shown
 * in the artifact of the table's exceptions session, whose rundown names its frames.
 */
typedef struct MonitorThrown {
        MonitorException x;
        uint64_t thread_id;
        uint64_t timestamp;        /* the runtime's clock, the same in every session of the process */
        uint64_t *frames;
        size_t depth, lost;
} MonitorThrown;

/* Takes @x's strings (it is left empty) and copies @e's stack. Return: 0 or -ENOMEM (@x untouched). */
int monitor_thrown_take(MonitorException *x, const NettraceEvent *e, MonitorThrown *ret);
/* A copy of @t into *@ret. Return: 0 or -ENOMEM (*@ret untouched). */
int monitor_thrown_copy(const MonitorThrown *t, MonitorThrown *ret);
void monitor_thrown_done(MonitorThrown *t);

int monitor_view_new(MonitorViewKind kind, MonitorViewFormat format, FILE *out, MonitorView **ret);
MonitorView *monitor_view_free(MonitorView *v);
void monitor_view_header(MonitorView *v, const NettraceHeader *h);
/* Return: 0 or -ENOMEM; what the view cannot read is left out. */
int monitor_view_event(MonitorView *v, const NettraceEvent *e);
/*
 * exceptions: @t, seen in another session of the process, is shown among the stream's exceptions, in the
 * order of their times, its frames named by the stream's methods, within the view's limits as they are.
 * Copied. Return: 0 or -ENOMEM.
 */
int monitor_view_thrown(MonitorView *v, const MonitorThrown *t);
/* The stream has ended: stacks and exceptions are shown now. Return: how many things were shown. */
unsigned long monitor_view_finish(MonitorView *v);
/* Exceptions seen but not kept (past MONITOR_VIEW_EXCEPTIONS_MAX or MONITOR_VIEW_KEPT_BYTES_MAX); stacks:
 * samples of threads not kept (past MONITOR_VIEW_THREADS_MAX or MONITOR_VIEW_KEPT_BYTES_MAX). */
unsigned long monitor_view_left_out(const MonitorView *v);
/* Threads or exceptions kept but not shown: the output reached MONITOR_VIEW_OUTPUT_MAX. */
unsigned long monitor_view_not_shown(const MonitorView *v);
