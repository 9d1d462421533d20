/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl gcdump --report: the type table in dotnet-gcdump report's layout */
#pragma once

#include <stdio.h>

#include "eventpipe/gcdump-heap.h"

/* The totals, a blank line, then one line per type in @r's order, as dotnet-gcdump report FILE prints
 * them (numbers grouped by commas, as in the invariant culture; no "Total references", which a .gcdump
 * file does not keep). With GCDUMP_SORT_STOCK exactly its table, "Object Bytes" the size of each type's
 * first object; with dsctl's own orders "Total Bytes", the bytes of all its objects. Return: 0, or -EIO. */
int gcdump_report_print(FILE *f, const GcdumpReport *r, GcdumpSort sort);
