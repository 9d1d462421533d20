/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl's output: aligned text for people, JSON for scripts */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/wire.h"

typedef struct DumpRow DumpRow;

typedef struct Output {
        bool json;
        const char *verb;
        FILE *stream;
        unsigned count;
        bool removing;          /* dumps --remove or --url: one answer, no listing */
        /* dumps: the listing is gathered, then shown oldest first */
        DumpRow *dumps;
        size_t n_dumps;
} Output;

void output_process(Output *o, const WireMessage *m);
bool output_verdict(Output *o, const WireMessage *m);
/* An ENV frame: NAME=VALUE, or NAME=<redacted>; with --json an element of the array. */
void output_env(Output *o, const WireMessage *m);
/* A DUMP frame: the dump just taken (@saved_to: the caller's copy), or a row of the listing. */
int output_dump(Output *o, const WireMessage *m, const char *saved_to);
/* A COLLECT frame: a [[collect]] table the caller reads, or a process it watches. */
void output_collect(Output *o, const WireMessage *m);
/* crashes: one row of the listing; crash: nothing (the DUMP frame that follows says it all) */
void output_crash(Output *o, const WireMessage *m);
/* dumps --remove: what is gone. */
void output_removed(Output *o, const char *path);
/* A presigned URL (dsctl dumps --url): the URL alone on its line, or {"path", "key", "url", "expires_usec"}. */
void output_url(Output *o, const WireMessage *m);
void output_end(Output *o);
void output_done(Output *o);
/* "1.5 MiB" */
void output_format_size(uint64_t size, char *buf, size_t n);
/* "-1,500,000": digits grouped by commas, as .NET's N0 under the invariant culture */
void output_format_grouped(int64_t value, char *buf, size_t n);
/* A JSON string literal of @s, control characters escaped. */
void output_json_string(FILE *f, const char *s);
/*
 * A failure of dsctl's own, before or without the agent's answer: "dsctl: "
 * and the words on standard error, or with @json an object with the exit
 * status on standard output. Return: @exit_status.
 */
__attribute__((format(printf, 3, 4)))
int output_fail(bool json, int exit_status, const char *fmt, ...);

/*
 * An error as one JSON object: dsctl's @exit_status, the words, and when the
 * agent answered, its protocol error @code (0: none), @hresult and @request_id.
 */
void output_json_error(FILE *f, int exit_status, uint32_t code, const char *error, const char *message,
                       uint32_t hresult, uint64_t request_id);
