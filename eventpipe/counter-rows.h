/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Counter samples as dotnet-counters chooses what to show of them, and its CSV rows. Pure: no I/O
 * but the FILE * the CSV writers are given.
 *
 * dsctl counters (client/counter-sink.h) and a [[collect]] table's then.counters (in the agent's
 * worker, agent/workers/jobs.c) both take their samples through this: the session's own Meter
 * values and interval only (another tool's session may report in the same stream), the
 * instruments' descriptions (unit, tags) kept for their values, EventCounters held a moment after
 * their provider's first sample and dropped once a Meter of the same provider reports (as
 * dotnet-counters does), and the CSV rows dotnet-counters collect writes. The same samples give
 * the same rows, wherever they are read.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "eventpipe/counter-format.h"
#include "eventpipe/nettrace.h"

typedef struct CounterRows CounterRows;

/* The most of each that it keeps: a runtime cannot grow its reader without end. */
#define COUNTER_ROWS_INSTRUMENTS_MAX 4096u /* instruments' descriptions */
#define COUNTER_ROWS_PROVIDERS_MAX 256u    /* providers whose EventCounters may be duplicates */
#define COUNTER_ROWS_HELD_MAX 4096u        /* EventCounters held while a Meter of their name may come */

/* How long EventCounters of a provider are held after its first sample, as dotnet-counters holds them. */
#define COUNTER_ROWS_HOLD_NSEC 1000000000LL

/* What BeginInstrumentReporting said of a Meter's instrument. */
typedef struct CounterInstrument {
        char *provider, *name;
        int32_t id;             /* 0: none */
        uint32_t version;       /* of the event: before 1 it had no unit dotnet-counters reads */
        char *unit, *description, *meter_tags, *instrument_tags;
} CounterInstrument;

typedef struct CounterRowsCallbacks {
        /* A sample to show, taken at @when_nsec; @in: its instrument's description (NULL: an EventCounter, or none came). */
        void (*emit)(const NettraceCounter *c, const CounterInstrument *in, int64_t when_nsec, int64_t now_nsec,
                     void *userdata);
        /* A problem MetricsEventSource reports; @ours: about this session (else another one in its way). NULL: none. */
        void (*notice)(const NettraceCounter *c, bool ours, void *userdata);
} CounterRowsCallbacks;

/* @cb is borrowed for the life of the result. Return: 0 or -ENOMEM. */
int counter_rows_new(const CounterRowsCallbacks *cb, void *userdata, CounterRows **ret);
CounterRows *counter_rows_free(CounterRows *r);

/*
 * --counters Provider[name,...]: of the @n providers named (borrowed, compared without case), only
 * the names given in @names[i] (the same index) are shown; other providers' samples all are.
 */
void counter_rows_filter(CounterRows *r, char *const *providers, char *const *names, size_t n);

/*
 * The session runs: @providers as the runtime was asked (eventpipe_config_to_string() of
 * eventpipe_counters_config()), whose SessionId and interval say which samples are its own. NULL:
 * not known, every sample is taken.
 */
void counter_rows_begin(CounterRows *r, const char *providers);
/* The interval read from the providers, in seconds; 0: not known. */
unsigned counter_rows_interval(const CounterRows *r);

/* A sample taken at @when_nsec; it is taken over and *@c cleared. Emitted now, later or never. */
void counter_rows_add(CounterRows *r, NettraceCounter *c, int64_t when_nsec, int64_t now_nsec);
/* The time at which counter_rows_tick() releases held samples, or INT64_MAX. */
int64_t counter_rows_next_deadline(const CounterRows *r);
void counter_rows_tick(CounterRows *r, int64_t now_nsec);
/* The session ended: every sample still held is emitted, or dropped for the Meter that came. */
void counter_rows_end(CounterRows *r);

/*
 * The rows dotnet-counters makes of one emitted sample: @display its name, @value_tags the value's
 * own tags (a histogram's percentile's included), @tags all of them combined (the Meter's, the
 * instrument's, the value's), @ended: the instrument stopped reporting these tags (no value).
 */
typedef void (*CounterRowFn)(const NettraceCounter *c, const char *display, const char *value_tags, const char *tags,
                             bool rate, double value, bool ended, void *userdata);
/* Calls @row for each row of @c (a histogram gives one per percentile); @interval_sec 0 reads as 1. */
void counter_rows_of(const NettraceCounter *c, const CounterInstrument *in, unsigned interval_sec, CounterStyle style,
                     CounterRowFn row, void *userdata);

/* The CSV head line dotnet-counters collect writes. */
void counter_csv_header(FILE *f);
/*
 * One CSV row as dotnet-counters collect writes it: the tags after the name in brackets, their
 * commas as semicolons; what the runtime chose escaped (text_escape()), and a field a spreadsheet
 * would take for a formula made text.
 */
void counter_csv_row(FILE *f, const char *provider, const char *display, const char *tags, bool rate, double value,
                     int64_t when_nsec);
/* Every CSV row of an emitted sample (counter_rows_of() in the collect style), as dsctl counters --format csv writes them. */
void counter_csv_sample(FILE *f, const NettraceCounter *c, const CounterInstrument *in, unsigned interval_sec,
                        int64_t when_nsec);
