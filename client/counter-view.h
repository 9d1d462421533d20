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
 * The latest @value of @label of @provider, for the tag set @tags ("k=v,k2=v2",
 * "" for none; all three as the runtime sent them, escaped when drawn). A
 * counter with tag sets is drawn as dotnet-counters monitor draws it: its
 * name, then a column per tag and a row per tag set. At most
 * COUNTER_VIEW_ROWS rows are kept: a runtime that invents names or tag
 * values without end cannot grow dsctl.
 * Return: 0 or -ENOMEM.
 */
#define COUNTER_VIEW_ROWS 512
int counter_view_set(CounterView *v, const char *provider, const char *label, const char *tags, double value);

/* The instrument stopped reporting this tag set (its callback failed, or the tags are gone): the row goes. */
void counter_view_remove(CounterView *v, const char *provider, const char *label, const char *tags);

/* Clears the terminal and draws every counter, providers and names in order, when something changed. */
void counter_view_draw(CounterView *v);
