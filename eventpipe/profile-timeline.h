/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A CPU profile's time line (cpu-profile.h) in the formats dotnet-trace convert writes: speedscope's
 * (https://www.speedscope.app/file-format-schema.json, one evented profile per thread) and Chromium's
 * trace event format (B and E events per thread, and their stack frames), each as TraceEvent's
 * SpeedScopeStackSourceWriter and ChromiumStackSourceWriter make it from SampleProfilerThreadTimeComputer's
 * samples: per thread, the samples in order, a frame opened where a sample's stack begins to differ
 * from the one before it (or follows it after a gap of more than its weight), closed where it ends;
 * the same frames, names, times and numbering. Two differences, both only in how the file is laid out
 * or what a broken file would hold: the objects' keys come in another order (speedscope's frames after
 * its profiles, each profile's endValue after its events, so that the file is written as it is made),
 * and every string is escaped (TraceEvent writes Chromium's categories unescaped, so a quote in a
 * module's name breaks its file).
 *
 * Names are the runtime's: JSON-escaped with text_json_string_html(), which also keeps them from
 * ending a <script> element or an attribute where a viewer embeds the file.
 *
 * Writes as it reads each thread's samples from the profile's spool; memory: the profile's frames,
 * and two stacks.
 */
#pragma once

#include <stdio.h>

#include "eventpipe/cpu-profile.h"

typedef enum ProfileTimelineFormat {
        PROFILE_TIMELINE_SPEEDSCOPE,
        PROFILE_TIMELINE_CHROMIUM,
} ProfileTimelineFormat;

/*
 * profile_timeline_write() - @p's time line into @out
 * @p: finished (cpu_profile_finish()), with a spool (cpu_profile_set_spool())
 * @name: the document's name; dotnet-trace's is its output file's name without the extension
 * @exporter: who wrote it ("dsctl VERSION")
 *
 * Return: 0, or a negative errno: the spool's, -ENOMEM, -EIO when @out fails.
 */
int profile_timeline_write(CpuProfile *p, ProfileTimelineFormat format, const char *name, const char *exporter,
                           FILE *out);
