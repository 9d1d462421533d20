/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl's output: aligned text for people, JSON for scripts */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "wire.h"

typedef struct Output {
        bool json;
        const char *verb;
        FILE *stream;
        unsigned count;
} Output;

void output_begin(Output *o);
void output_process(Output *o, const WireMessage *m);
bool output_verdict(Output *o, const WireMessage *m);
void output_dump(Output *o, const WireMessage *m, const char *saved_to);
void output_end(Output *o);
/* A JSON string literal of @s, control characters escaped. */
void output_json_string(FILE *f, const char *s);
void output_json_error(FILE *f, uint32_t code, const char *error, const char *message, uint32_t hresult,
                       uint64_t request_id);
