/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The providers of the sessions behind dsctl stacks, exceptions and logs (monitor-config.h): pure.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/cleanup.h"
#include "eventpipe/monitor-config.h"

#define SAMPLE_PROFILER "Microsoft-DotNETCore-SampleProfiler"
#define CLR_PROVIDER "Microsoft-Windows-DotNETRuntime"
#define LOGGING_PROVIDER "Microsoft-Extensions-Logging"
#define TPL_PROVIDER "System.Threading.Tasks.TplEventSource"

#define CLR_KEYWORD_EXCEPTION 0x8000ULL
#define CLR_KEYWORDS_GCDUMP 0x1980001ULL /* as gcdump-heap.h's GCDUMP_KEYWORDS */
#define SAMPLE_PROFILER_KEYWORDS 0xf00000000000ULL
/* LoggingEventSource.Keywords.FormattedMessage: the message as the app formats it, and scopes */
#define LOGGING_KEYWORD_FORMATTED_MESSAGE 0x4ULL
/* TplEventSource.Keywords.TasksFlowActivityIds: events inside a scope carry its activity id */
#define TPL_KEYWORD_TASKS_FLOW_ACTIVITY_IDS 0x80ULL

static const char *const log_level_names[_MONITOR_LOG_LEVEL_MAX] = {
        [MONITOR_LOG_TRACE] = "Trace",
        [MONITOR_LOG_DEBUG] = "Debug",
        [MONITOR_LOG_INFORMATION] = "Information",
        [MONITOR_LOG_WARNING] = "Warning",
        [MONITOR_LOG_ERROR] = "Error",
        [MONITOR_LOG_CRITICAL] = "Critical",
        [MONITOR_LOG_NONE] = "None",
};

MonitorLogLevel monitor_log_level_from_string(const char *s) {
        for (MonitorLogLevel l = 0; s && l < MONITOR_LOG_NONE; l++)
                if (strcasecmp(s, log_level_names[l]) == 0)
                        return l;
        return _MONITOR_LOG_LEVEL_INVALID;
}

bool monitor_category_is_valid(const char *s) {
        size_t n = s ? strlen(s) : 0;

        if (n == 0 || n > MONITOR_CATEGORY_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] <= 0x20 || s[i] >= 0x7f || strchr(";:*=\"'\\", s[i]))
                        return false;
        return true;
}

static int add(EventPipeConfig *c, const char *name, uint64_t keywords, uint32_t level, const char *arguments) {
        EventPipeProvider *grown = reallocarray(c->providers, c->n_providers + 1, sizeof(EventPipeProvider));

        if (!grown)
                return -ENOMEM;
        c->providers = grown;
        grown[c->n_providers] = (EventPipeProvider){ .keywords = keywords, .level = level };
        grown[c->n_providers].name = strdup(name);
        grown[c->n_providers].arguments = arguments ? strdup(arguments) : NULL;
        c->n_providers++;
        if (!grown[c->n_providers - 1].name || (arguments && !grown[c->n_providers - 1].arguments))
                return -ENOMEM;
        return 0;
}

/* A session of one provider, without arguments. */
static int one_provider(const char *name, uint64_t keywords, uint32_t level, bool rundown, EventPipeConfig *ret) {
        _cleanup_(eventpipe_config_done) EventPipeConfig c = EVENTPIPE_CONFIG_NULL;
        int r;

        r = add(&c, name, keywords, level, NULL);
        if (r != 0)
                return r;
        c.rundown = rundown;
        *ret = c;
        c = (EventPipeConfig)EVENTPIPE_CONFIG_NULL;
        return 0;
}

/*
 * stacks: dotnet-stack report's session. The sample profiler walks every
 * managed thread; the rundown at the end names the methods of those stacks.
 */
int monitor_stacks_config(EventPipeConfig *ret) {
        return one_provider(SAMPLE_PROFILER, SAMPLE_PROFILER_KEYWORDS, 4, true, ret);
}

/*
 * gcdump: dotnet-gcdump's heap session. GC, GCHeapDump, Type, GCHeapCollect
 * (the runtime induces the GC when the session starts) and GCHeapAndTypeNames,
 * at Verbose, where the bulk events are; the rundown names the modules.
 */
int monitor_gcdump_config(EventPipeConfig *ret) {
        return one_provider(CLR_PROVIDER, CLR_KEYWORDS_GCDUMP, 5, true, ret);
}

/*
 * exceptions: the runtime's exception events (ExceptionThrown_V1 has type
 * and message; its stack, named by the rundown, gives the throwing method).
 * Informational, the level of ExceptionThrown; the catch and finally events
 * of the keyword come along, and dsctl leaves them out.
 */
int monitor_exceptions_config(EventPipeConfig *ret) {
        return one_provider(CLR_PROVIDER, CLR_KEYWORD_EXCEPTION, 4, true, ret);
}

/*
 * logs: LoggingEventSource's FormattedMessage events, filtered in the app by
 * its FilterSpecs argument, as dotnet-monitor's /logs asks:
 * - neither level nor category: "UseAppFilters", the levels the app itself
 *   configured for each category;
 * - a level: every category from that level up ("*:Warning");
 * - a category: that category and those it prefixes, from the level (or
 *   LoggingEventSource's default, Debug, for a session at Verbose) up,
 *   nothing else ("Orders*:Warning").
 * TplEventSource's activity ids tie each message to its scopes.
 */
int monitor_logs_config(MonitorLogLevel level, const char *category, EventPipeConfig *ret) {
        _cleanup_(eventpipe_config_done) EventPipeConfig c = EVENTPIPE_CONFIG_NULL;
        char spec[sizeof("FilterSpecs=") + MONITOR_CATEGORY_MAX + 32];
        int r;

        if (level == MONITOR_LOG_NONE || level >= _MONITOR_LOG_LEVEL_MAX || (category && !monitor_category_is_valid(category)))
                return EVENTPIPE_E_SYNTAX;
        if (category && level >= 0)
                snprintf(spec, sizeof(spec), "FilterSpecs=%s*:%s", category, log_level_names[level]);
        else if (category)
                snprintf(spec, sizeof(spec), "FilterSpecs=%s*", category);
        else if (level >= 0)
                snprintf(spec, sizeof(spec), "FilterSpecs=*:%s", log_level_names[level]);
        else
                snprintf(spec, sizeof(spec), "FilterSpecs=UseAppFilters");
        r = add(&c, LOGGING_PROVIDER, LOGGING_KEYWORD_FORMATTED_MESSAGE, 5, spec);
        if (r == 0)
                r = add(&c, TPL_PROVIDER, TPL_KEYWORD_TASKS_FLOW_ACTIVITY_IDS, 4, NULL);
        if (r != 0)
                return r;
        c.rundown = false;
        *ret = c;
        c = (EventPipeConfig)EVENTPIPE_CONFIG_NULL;
        return 0;
}
