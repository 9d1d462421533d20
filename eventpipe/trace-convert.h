/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsctl's trace formats: a nettrace stream, as it is read, made into a speedscope, Chromium, pprof
 * or flame graph file (eventpipe/cpu-profile.h and its writers), by dsctl trace --format, dsctl
 * convert and dsctl flame, and by the agent's workers for a [[collect]] table's then.flame
 * (jobs_flame_svg()): the same file of the same trace, whoever converts it. No .NET on the host.
 *
 * The formats that keep the time line (speedscope, chromium) spool each thread's samples to an
 * unnamed file in $TMPDIR (else /tmp), mode 0600, gone when dsctl is: about 6 bytes a sample. The
 * others keep only the distinct stacks.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/cleanup.h"
#include "eventpipe/nettrace.h"

typedef enum TraceFormat {
        TRACE_FORMAT_NETTRACE,
        TRACE_FORMAT_SPEEDSCOPE,
        TRACE_FORMAT_CHROMIUM,
        TRACE_FORMAT_PPROF,
        TRACE_FORMAT_FLAME,
        _TRACE_FORMAT_MAX,
        _TRACE_FORMAT_INVALID = -1,
} TraceFormat;

TraceFormat trace_format_from_string(const char *s);
const char *trace_format_to_string(TraceFormat f);
/* What dsctl names a file of the format after its trace's: ".speedscope.json", ".chromium.json",
 * ".pb.gz", ".svg" (".nettrace"). */
const char *trace_format_extension(TraceFormat f);

typedef struct TraceConverter TraceConverter;

/* Return: 0, or a negative errno (the spool could not be made). */
int trace_converter_new(TraceFormat format, TraceConverter **ret);
TraceConverter *trace_converter_free(TraceConverter *c);

/* The parser's callbacks feed these; the converter asks for the events' stacks. */
void trace_converter_header(TraceConverter *c, const NettraceHeader *h);
int trace_converter_event(TraceConverter *c, const NettraceEvent *e);

/*
 * trace_converter_write() - the stream ended: the file, into @fd (written from its start, not closed)
 * @path: the file's name; its file name without the extension names the document inside speedscope
 *        and Chromium files, as dotnet-trace names it
 *
 * Return: 0 or a negative errno.
 */
int trace_converter_write(TraceConverter *c, const char *path, int fd);

/* ThreadSample events read, and those left out (past the profile's limits). */
uint64_t trace_converter_samples(const TraceConverter *c);
uint64_t trace_converter_left_out(const TraceConverter *c);

/*
 * trace_convert_file() - dsctl convert: the nettrace file at @input_fd, read to its end, into @output_fd
 * Return: 0; a positive NETTRACE_E_* when the stream is not a whole nettrace (what it held is
 * converted all the same, *@ret_converted, when it began as one); or a negative errno.
 */
int trace_convert_file(int input_fd, TraceFormat format, const char *path, int output_fd, uint64_t *ret_samples,
                       uint64_t *ret_left_out, bool *ret_converted);

DEFINE_TRIVIAL_CLEANUP_FUNC(TraceConverter *, trace_converter_free);
