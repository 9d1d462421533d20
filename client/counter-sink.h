/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsctl counters: from samples to what dotnet-counters would show. Keeps
 * the session's own Meter values and interval, the instruments' units and
 * tags, gives a Meter precedence over the EventCounters of the same name,
 * and writes CSV or JSON rows, the Prometheus text format, or the view.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "client/counter-view.h"
#include "eventpipe/nettrace.h"
#include "client/session-client.h"

typedef struct CounterSink CounterSink;

/* The most Prometheus series a sink keeps: a runtime cannot grow dsctl without end (the samples'
 * own bounds are counter-rows.h's). */
#define COUNTER_SINK_SERIES_MAX 8192u
/* Prometheus: the values are written once this long passed without a new one. */
#define COUNTER_SINK_SETTLE_NSEC 250000000LL

/* @view: the --watch view instead of rows (NULL: rows as @o says). */
int counter_sink_new(const SessionOptions *o, CounterView *view, CounterSink **ret);
CounterSink *counter_sink_free(CounterSink *s);

/*
 * The session runs: @providers as the agent asked the runtime (its
 * SessionId and interval are read from them), @pid the target's pid (0:
 * unknown), @now_nsec the wall clock. Writes the rows' head.
 */
void counter_sink_begin(CounterSink *s, const char *providers, pid_t pid, int64_t now_nsec);

/* A sample taken at @when_nsec (wall clock); the sink takes it over and clears *@c. */
void counter_sink_add(CounterSink *s, NettraceCounter *c, int64_t when_nsec, int64_t now_nsec);

/* The wall-clock time at which counter_sink_tick() has something to do, or INT64_MAX. */
int64_t counter_sink_next_deadline(const CounterSink *s);
void counter_sink_tick(CounterSink *s, int64_t now_nsec);

/* The session ended: what is held is written, and the rows' tail. Return: 0, or a negative errno of the output. */
int counter_sink_end(CounterSink *s);

/*
 * Whether a prometheus file can be written at @path: a file of the caller's
 * can be made beside it (then removed), and @path is none or a regular file
 * (or a symlink, which is replaced). @file keeps the directory pinned: each
 * interval's file is made and renamed in it (SessionOptions.prometheus_file).
 * Return: 0 or a negative errno.
 */
int counter_sink_check_file(OutFile *file, const char *path);
