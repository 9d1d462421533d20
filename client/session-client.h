/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl trace and counters: read a session's stream from the agent's pipe, stop it on Ctrl-C */
#pragma once

#include <stdbool.h>

#include "agent-client.h"

typedef enum SessionOutputKind {
        SESSION_OUTPUT_NETTRACE, /* the stream, verified, into a file */
        SESSION_OUTPUT_CSV,      /* counter rows, as dotnet-counters collect writes them */
        SESSION_OUTPUT_JSON,
} SessionOutputKind;

typedef struct SessionOptions {
        SessionOutputKind kind;
        const char *output;         /* NULL: standard output (counters only) */
        char **counter_names;       /* counters: show only these names of their provider; NULL: all */
        char **counter_filter_providers;
        size_t n_counter_filters;
        bool quiet;
} SessionOptions;

typedef int (*SessionErrorReporter)(const WireMessage *m, void *userdata);

/* Return: dsctl's exit status; replies are read after the request was sent. */
int session_client_run(AgentClient *client, const SessionOptions *o, SessionErrorReporter report_error, void *userdata);
