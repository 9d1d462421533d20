/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A CPU profile (cpu-profile.h) as one self-contained, interactive SVG flame graph: the stacks of
 * every thread merged, each frame as wide as the CPU time spent in it and what it called (CPU_TIME
 * samples; the time threads spent waiting or outside managed code is left out), callers below
 * callees, siblings in the order of their names. Opened in a browser: hovering a frame shows its
 * name, milliseconds, samples and share of the whole; clicking one zooms to it (its callers stay,
 * greyed, below); "Search" (or Ctrl-F) highlights the frames whose names hold a text and says their
 * share; "Reset zoom" goes back. Everything is in the file: its own script (flame-svg.c), no font,
 * script, style or image from elsewhere, no network.
 *
 * Names are the runtime's, and the file is opened in browsers: they stand in XML text and
 * attributes only, escaped (&, <, >, ", ' as entities; what XML cannot hold, controls, and
 * characters that reorder text, as U+FFFD), never in the script, which reads them from the
 * document as text (textContent, getAttribute) and puts them back only as text; so no name can
 * end an element, open one, start a script or break the file.
 *
 * Bounded: frames narrower than a tenth of a pixel at full width are left out (their time stays in
 * their callers'), and at most FLAME_FRAMES_MAX are drawn, the widest first; the SVG says how many
 * were left out.
 */
#pragma once

#include <stdio.h>

#include "eventpipe/cpu-profile.h"

#define FLAME_FRAMES_MAX 30000u  /* frames drawn */
#define FLAME_WIDTH 1200         /* pixels */

typedef struct FlameOptions {
        const char *title;       /* above the graph; NULL: "CPU flame graph" and the process's name */
        const char *subtitle;    /* below it, e.g. when and how long; may be NULL */
} FlameOptions;

/* @p finished. Return: 0, -ENOMEM, -EIO when @out fails. */
int flame_svg_write(const CpuProfile *p, const FlameOptions *o, FILE *out);
