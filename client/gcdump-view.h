/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl gcdump --report: the type table in dotnet-gcdump report's layout */
#pragma once

#include <stdio.h>

#include "gcdump-heap.h"

/* The totals, a blank line, then one line per type, exactly as dotnet-gcdump report FILE prints them
 * (numbers grouped by commas, as in the invariant culture; no "Total references", which a .gcdump file
 * does not keep). Return: 0, or -EIO. */
int gcdump_report_print(FILE *f, const GcdumpReport *r);
