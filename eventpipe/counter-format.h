/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsctl counters: the words and numbers of its rows, as dotnet-counters
 * writes them, and the names of the Prometheus text format. Pure: no I/O
 * but the FILE * the writers are given, no state.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "eventpipe/nettrace.h"

#define COUNTER_FORMAT_DOUBLE_MAX 32 /* bytes of counter_format_double()'s text, its NUL included */

/*
 * counter_format_double() - @v as .NET's Double.ToString(CultureInfo.InvariantCulture)
 *
 * The shortest text that reads back as @v; from an exponent of 15 up, or
 * below -4, in scientific form with at least two exponent digits ("1E+15",
 * "1E-05"); "NaN", "Infinity", "-Infinity". This is how dotnet-counters
 * writes values in CSV and JSON.
 */
void counter_format_double(double v, char buf[static COUNTER_FORMAT_DOUBLE_MAX]);

/*
 * counter_format_rounded() - @v rounded for people, as a record's text says it
 *
 * Three decimals at most, trailing zeros dropped ("94.764", "500", "-2.5");
 * below 1, three significant digits, so that a small value is not shown as
 * 0 ("0.000123", "0.5"); scientific from 1e15 up and below 1e-4 ("1.5E+15",
 * "2.5E-07"); "NaN", "Infinity", "-Infinity". Not for reading back: what
 * reads back as @v is counter_format_double()'s.
 */
void counter_format_rounded(double v, char buf[static COUNTER_FORMAT_DOUBLE_MAX]);

/* @usec since the epoch in local time, as DateTime.ToString() under the invariant culture: "08/07/2026 14:37:44". */
void counter_format_time_invariant(int64_t usec, char *buf, size_t size);

/* @nsec since the epoch in local time, as DateTime.ToString("O"): "2026-08-07T14:37:44.1234567+02:00". */
void counter_format_time_roundtrip(int64_t nsec, char *buf, size_t size);

/* How a counter is shown: dotnet-counters collect (CSV, JSON) or monitor (the --watch view). */
typedef enum CounterStyle {
        COUNTER_STYLE_COLLECT, /* a Meter's Counter as its increment per interval: "x (By / 1 sec)", Rate */
        COUNTER_STYLE_MONITOR, /* a Meter's Counter as its total: "x (By)", Metric */
} CounterStyle;

/*
 * counter_display_name() - dotnet-counters' name of a sample
 *
 * EventCounters: "CPU Usage (%)", "Allocation Rate (B / 1 sec)" (the interval
 * is the one the counter was asked for), "Count" for a rate without units.
 * Meters: "test-gauge (items)"; a Counter "x (unit / N sec)" when collected,
 * its unit "Count" when it has none, with @interval_sec the session's.
 * @unit: the instrument's unit for Meters (NULL: none), ignored for EventCounters.
 * Return: the name, or NULL (no memory).
 */
char *counter_display_name(const NettraceCounter *c, const char *unit, unsigned interval_sec, CounterStyle style);

/* Whether the sample is shown as a Rate, else as a Metric (dotnet-counters' "Counter Type"). */
bool counter_is_rate(const NettraceCounter *c, CounterStyle style);

/* The value a row shows: a Counter's increment when collected, its total in the monitor view. */
double counter_row_value(const NettraceCounter *c, CounterStyle style);

/*
 * counter_combine_tags() - the tags of a row, as dotnet-counters combines them
 *
 * The Meter's tags, the instrument's, then the value's, joined with ",";
 * NULL or empty parts are left out. Return: the text ("" for none), or NULL (no memory).
 */
char *counter_combine_tags(const char *meter_tags, const char *instrument_tags, const char *value_tags);

/* @tags with ",Percentile=P" (or "Percentile=P") appended, P as dotnet-counters writes 100 × @quantile. */
char *counter_percentile_tags(const char *tags, double quantile);

/* A value as dotnet-counters monitor shows it: "1,421,893.21 ", "4.9012e+25", right-aligned in @width. */
void counter_format_view_value(double v, int width, char *buf, size_t size);

/* ---- Prometheus text format (version 0.0.4), names after the OpenTelemetry conventions ---- */

typedef enum PrometheusType {
        PROMETHEUS_GAUGE,
        PROMETHEUS_COUNTER,
        PROMETHEUS_SUMMARY,
        PROMETHEUS_UNTYPED,
} PrometheusType;

/*
 * prometheus_metric_name() - the Prometheus name of an instrument
 *
 * As OpenTelemetry's Prometheus compatibility says: characters outside
 * [a-zA-Z0-9_:] become "_", runs of "_" one; a leading digit gets a "_"
 * before it. The unit, converted ("By" → "bytes", "By/s" →
 * "bytes_per_second", "%" → "percent", "Cel" → "celsius"; "{...}" dropped;
 * "1" → "ratio" for gauges), is appended unless the name already holds it;
 * a counter ends in "_total". Unlike OpenTelemetry's exporters, a unit with
 * a prefix becomes Prometheus's base unit, as its conventions and promtool
 * want it: "ms" → "seconds", "MiBy" → "bytes"; *@ret_scale is then the
 * factor the values take (0.001), else 1. EventCounters' display units
 * ("B", "MB") are read as the bytes they mean.
 * Return: the name, or NULL (no memory).
 */
char *prometheus_metric_name(const char *name, const char *unit, PrometheusType type, double *ret_scale);

/*
 * The TYPE a family is declared with: @type, except a gauge whose name ends
 * in "_count", "_sum" or "_bucket" (OpenTelemetry's dotnet.assembly.count),
 * which Prometheus reserves for histograms and summaries: it is "untyped",
 * which PromQL reads as a gauge and promtool accepts, and keeps its name.
 */
PrometheusType prometheus_declared_type(const char *name, PrometheusType type);

/* A tag's key as a label name: [a-zA-Z_][a-zA-Z0-9_]*, runs of "_" one; a leading digit gets "key_" before it. */
char *prometheus_label_name(const char *key);

/*
 * @s as a label value between quotes: backslash, double quote and newline escaped as Prometheus
 * escapes them. The runtime chose @s: other controls (C0, DEL, C1), format characters
 * (unicode_is_format_control()) and bytes that are not UTF-8 are written as the text text_escape()
 * makes of them, "\\x1b" or "\\u202e" (read back: \x1b, \u202e), so the exposition is valid UTF-8
 * with no control character in it, whatever @s holds.
 */
void prometheus_write_label_value(FILE *f, const char *s);
/* The same without the quotes, for values joined inside one pair. */
void prometheus_write_label_text(FILE *f, const char *s);

/* @s as HELP text: backslash and newline escaped, the rest as prometheus_write_label_value() does. */
void prometheus_write_help(FILE *f, const char *s);

/* A sample value as Prometheus reads it: shortest round-trip text, "+Inf", "-Inf", "NaN". */
void prometheus_format_value(double v, char buf[static COUNTER_FORMAT_DOUBLE_MAX]);

const char *prometheus_type_to_string(PrometheusType t);
