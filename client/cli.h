/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl's command line: options before or after the command, every value checked as the agent checks it */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "client/session-client.h"
#include "eventpipe/trace-convert.h"

typedef enum Verb {
        VERB_PS,
        VERB_INFO,
        VERB_ENV,
        VERB_EXPLAIN,
        VERB_DUMP,
        VERB_DUMPS,
        VERB_COLLECT,
        VERB_CRASHES,
        VERB_CRASH,
        VERB_TRACE,
        VERB_FLAME,
        VERB_CONVERT,
        VERB_COUNTERS,
        VERB_STACKS,
        VERB_GCDUMP,
        VERB_EXCEPTIONS,
        VERB_LOGS,
        VERB_RESUME,
        VERB_PORT,
        VERB_EXEC,
        VERB_HELP,
        _VERB_MAX,
        _VERB_NONE = -1, /* no command given (help and --version need none) */
} Verb;

typedef struct Args {
        Verb verb;
        bool help;              /* show the help of verb (or the summary): nothing is sent */
        bool version;
        bool json, quiet;
        const char *socket_path; /* NULL: $DSAGENT_SOCKET, else the default */
        /* the target: a pid, or a unit's one .NET process */
        pid_t pid;
        const char *unit;
        /* explain */
        const char *command;
        /* explain, dump */
        const char *dump_type;
        /* explain, trace */
        const char *trace_profile;
        uint64_t duration_sec;
        bool have_duration;
        /* trace */
        const char *providers;
        uint32_t buffer_mb;     /* 0: the agent's default */
        /* counters */
        uint32_t interval_sec;  /* 0: the agent's default */
        char *counter_providers; /* the names alone, for the agent */
        /* logs: the lowest level and a category prefix; NULL: as the app configured its logging */
        const char *log_level;
        const char *log_category;
        /* dump, trace, flame, convert, counters, gcdump */
        const char *output;
        /* convert: the nettrace file to read */
        const char *input;
        char *output_owned;     /* a default output name made of another (args_done() frees it) */
        /* trace, flame, convert: what the trace becomes */
        TraceFormat trace_format;
        /* gcdump: the type table on standard output; the session's stream kept in a file too */
        bool report;
        const char *nettrace;
        /* dumps */
        const char *remove;
        const char *url;        /* --url PATH: a presigned URL of its uploaded object */
        /* crashes: those logged since (µs since the epoch; 0: all) */
        uint64_t since_usec;
        /* crash: which one, as crashes lists it (SECONDS-PID) */
        const char *crash_id;
        /* port */
        const char *port_socket; /* NULL: the default place */
        bool once;
        /* exec: the command and its arguments, argv's after "--", NULL-terminated */
        char **exec_argv;
        /* trace, counters: how the stream is shown (output, kind, filters, watch) */
        SessionOptions session;
} Args;

#define ARGS_NULL { .verb = _VERB_NONE }

void args_done(Args *a);

/**
 * cli_parse() - read dsctl's command line into @a
 *
 * Options may come before or after the command and its arguments, as with
 * systemctl; "--" ends them. Every value is checked here with the limits the
 * agent applies (wire.h, the policy's names, the profiles), so that what the
 * agent would refuse is never sent, and the message names the option and
 * what it takes.
 *
 * Return: 0 (@a says what to do; a->help or a->version ask for no request),
 * -EINVAL with *@ret_error (a usage error, for people), or -ENOMEM. @a is
 * filled as far as it was read, so that a->json is known for the error.
 */
int cli_parse(int argc, char **argv, Args *a, char **ret_error);

/* The help of @verb, or the summary of all commands for _VERB_NONE and VERB_HELP. */
void cli_help(FILE *f, Verb verb);

const char *verb_to_string(Verb verb);
