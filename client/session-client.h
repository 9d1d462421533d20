/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl trace and counters: read a session's stream from the agent's pipe, stop it on Ctrl-C */
#pragma once

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "client/agent-client.h"
#include "eventpipe/gcdump-heap.h"
#include "client/out-file.h"
#include "eventpipe/trace-convert.h"

typedef enum SessionOutputKind {
        SESSION_OUTPUT_NETTRACE, /* the stream, verified, into a file */
        SESSION_OUTPUT_CSV,      /* counter rows, as dotnet-counters collect writes them */
        SESSION_OUTPUT_JSON,
        SESSION_OUTPUT_STACKS,     /* stacks, exceptions, logs: what their stream says (monitor-view.h) */
        SESSION_OUTPUT_EXCEPTIONS,
        SESSION_OUTPUT_LOGS,
        SESSION_OUTPUT_PROMETHEUS, /* counters: the text exposition format, the latest values each interval */
        SESSION_OUTPUT_GCDUMP,     /* gcdump: the heap's type table; the stream also into a file when asked */
} SessionOutputKind;

typedef struct SessionOptions {
        SessionOutputKind kind;
        const char *output;         /* the trace's name (trace --format: --nettrace, or NULL), or the rows' file;
                                     * NULL: standard output (counters) */
        char **counter_names;       /* counters: show only these names of their provider; NULL: all */
        char **counter_filter_providers;
        size_t n_counter_filters;
        bool quiet;                 /* no notes on standard error */
        bool watch;                 /* counters: redraw the latest values in place (on a terminal) */
        bool speedscope;            /* stacks: speedscope's file format */
        /* trace, flame: what the stream becomes besides (TRACE_FORMAT_NETTRACE: nothing; the stream is the file) */
        TraceFormat format;
        const char *converted_output; /* the converted file's name */
        OutFile *converted_file;    /* made before the request (out_file_open()), named converted_output when whole */
        /* set by the caller before the request is sent */
        OutFile *trace_file;        /* trace (gcdump --nettrace): made before the request (out_file_open()), named
                                     * output when whole */
        FILE *rows;                 /* counters: where rows go, standard output or output made before the request;
                                     * NULL for prometheus with output: that file is replaced whole each time */
        OutFile *prometheus_file;   /* prometheus with output: its directory, pinned (counter_sink_check_file()) */
        pid_t target_pid;           /* counters: the process asked for, when given by pid (else the agent says) */
        bool progress;              /* trace, gcdump: bytes (gcdump: and objects) and time on standard error, in place */
        bool json;                  /* trace: its summary as JSON on standard output */
        const char *title;          /* counters --watch: the line above the view */
        /* gcdump */
        const char *gcdump_output;  /* -o: the .gcdump's name; NULL: none */
        OutFile *gcdump_file;       /* made before the request (out_file_open()), named gcdump_output when whole */
        bool gcdump_report;         /* the type table on standard output */
        GcdumpSort gcdump_sort;     /* its order */
} SessionOptions;

typedef int (*SessionErrorReporter)(const WireMessage *m, void *userdata);

/*
 * Return: dsctl's exit status; replies are read after the request was sent.
 * *@ret_started says whether the agent started the session (a rows file made
 * for one that never started is the caller's to remove).
 */
int session_client_run(AgentClient *client, const SessionOptions *o, SessionErrorReporter report_error, void *userdata,
                       bool *ret_started);
