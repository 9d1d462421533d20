/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A CPU profile (cpu-profile.h) as pprof's profile.proto, gzipped: what `go tool pprof` and the
 * profilers built on it (Grafana Pyroscope, Google Cloud Profiler) read. Written by hand: the few
 * messages it needs (Profile, ValueType, Sample, Label, Mapping, Location, Line, Function) and the
 * string table, field by field, in the order they are made (protobuf takes fields in any order, a
 * repeated one's items in the order they come), deflated with zlib as they are written.
 *
 * One sample per thread and stack, with three values: "samples" (count: the weighed samples),
 * "cpu" (nanoseconds: their CPU_TIME, the default sample type) and "wall" (nanoseconds: CPU_TIME and
 * UNMANAGED_CODE_TIME), so that each total is the speedscope file's of the same trace; its
 * locations are the stack's method frames, innermost first, one location and one function per
 * frame name ("Module!Namespace.Type.Method(parameters)", the module its file name too); a label
 * "thread" holds the thread's id. Names are the runtime's: protobuf strings are bytes with a
 * length, which no name can end or escape, and they are valid UTF-8 (cpu-profile.h).
 *
 * Memory: the profile's, and a buffer of one message.
 */
#pragma once

#include <stdio.h>

#include "eventpipe/cpu-profile.h"

/* @p finished. Return: 0, -ENOMEM, -EIO when @out fails, -EPROTO when zlib does. */
int profile_pprof_write(const CpuProfile *p, FILE *out);
