/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The sessions behind dsctl stacks, exceptions and logs, as dotnet-monitor's
 * /stacks, /exceptions and /logs take them: the agent chooses the providers
 * for each kind, the requester only a duration and, for logs, a level and a
 * category. Pure: no I/O.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "eventpipe/session-config.h"

#define MONITOR_CATEGORY_MAX 256 /* bytes of a logs category */

/* How long a stacks session samples: the first sample of each thread is what is shown. */
#define MONITOR_STACKS_SAMPLE_USEC 100000ULL

/* Microsoft.Extensions.Logging.LogLevel */
typedef enum MonitorLogLevel {
        MONITOR_LOG_TRACE,
        MONITOR_LOG_DEBUG,
        MONITOR_LOG_INFORMATION,
        MONITOR_LOG_WARNING,
        MONITOR_LOG_ERROR,
        MONITOR_LOG_CRITICAL,
        MONITOR_LOG_NONE,
        _MONITOR_LOG_LEVEL_MAX,
        _MONITOR_LOG_LEVEL_INVALID = -1,
} MonitorLogLevel;

/* Trace, Debug, Information, Warning, Error, Critical, in any case; not None. */
MonitorLogLevel monitor_log_level_from_string(const char *s);
/* A logger category (a prefix): printable ASCII without the FilterSpecs syntax's ; : * = and quotes. */
bool monitor_category_is_valid(const char *s);

int monitor_stacks_config(EventPipeConfig *ret);
int monitor_gcdump_config(EventPipeConfig *ret);
int monitor_exceptions_config(EventPipeConfig *ret);
int monitor_logs_config(MonitorLogLevel level, const char *category, EventPipeConfig *ret);
