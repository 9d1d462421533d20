/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl counters --watch: the latest value of each counter, redrawn in place like dotnet-counters monitor */
#pragma once

#include <stdbool.h>
#include <stdio.h>

typedef struct CounterView CounterView;

/* A view drawn on @f, a terminal, under the line @title. */
CounterView *counter_view_new(FILE *f, const char *title);
CounterView *counter_view_free(CounterView *v);

/*
 * The latest @value of @label of @provider (both as the runtime sent them;
 * they are escaped when drawn). At most COUNTER_VIEW_ROWS counters are kept:
 * a runtime that invents names without end cannot grow dsctl.
 * Return: 0 or -ENOMEM.
 */
#define COUNTER_VIEW_ROWS 512
int counter_view_set(CounterView *v, const char *provider, const char *label, double value);

/* Clears the terminal and draws every counter, grouped by provider, when something changed. */
void counter_view_draw(CounterView *v);
