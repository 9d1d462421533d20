/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What a tool's diagnostic IPC request is decided as (ipc-policy.h): the command, the dump type,
 * the tracing shape and the providers; pure.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "policy/ipc-policy.h"
#include "eventpipe/session-config.h"

PolicyCommand ipc_policy_command(DotnetIpcCommand command) {
        switch (command) {
        case DOTNET_IPC_PROCESS_INFO:
        case DOTNET_IPC_PROCESS_INFO2:
        case DOTNET_IPC_PROCESS_INFO3:
                return POLICY_COMMAND_INFO;
        case DOTNET_IPC_PROCESS_ENVIRONMENT:
                return POLICY_COMMAND_ENV;
        case DOTNET_IPC_COLLECT_TRACING:
        case DOTNET_IPC_COLLECT_TRACING2:
        case DOTNET_IPC_COLLECT_TRACING3:
        case DOTNET_IPC_COLLECT_TRACING4:
        case DOTNET_IPC_COLLECT_TRACING5:
        case DOTNET_IPC_STOP_TRACING:
                return POLICY_COMMAND_TRACE;
        case DOTNET_IPC_GENERATE_CORE_DUMP:
        case DOTNET_IPC_GENERATE_CORE_DUMP2:
        case DOTNET_IPC_GENERATE_CORE_DUMP3:
                return POLICY_COMMAND_DUMP;
        case DOTNET_IPC_RESUME_RUNTIME:
                return POLICY_COMMAND_RESUME;
        case DOTNET_IPC_ENABLE_PERF_MAP:
        case DOTNET_IPC_DISABLE_PERF_MAP:
                return POLICY_COMMAND_PERFMAP;
        case DOTNET_IPC_SET_ENVIRONMENT_VARIABLE:
                return POLICY_COMMAND_SETENV;
        case DOTNET_IPC_APPLY_STARTUP_HOOK:
                return POLICY_COMMAND_STARTUP_HOOK;
        case DOTNET_IPC_ATTACH_PROFILER:
        case DOTNET_IPC_STARTUP_PROFILER:
                return POLICY_COMMAND_PROFILER;
        default:
                return _POLICY_COMMAND_INVALID;
        }
}

PolicyDumpType ipc_policy_dump_type(uint32_t dump_type) {
        switch (dump_type) {
        case IPC_REQUEST_DUMP_NORMAL:
                return POLICY_DUMP_MINI;
        case IPC_REQUEST_DUMP_WITH_HEAP:
                return POLICY_DUMP_HEAP;
        case IPC_REQUEST_DUMP_TRIAGE:
                return POLICY_DUMP_TRIAGE;
        case IPC_REQUEST_DUMP_FULL:
                return POLICY_DUMP_FULL;
        default:
                return _POLICY_DUMP_INVALID;
        }
}

/* ---- what a CollectTracing is, by its shape ---- */

#define SHAPE_METRICS_PROVIDER EVENTPIPE_METRICS_PROVIDER
#define SHAPE_METRICS_KEYWORD_TIME_SERIES 0x2ULL
#define SHAPE_LEVEL_INFORMATIONAL 4u
#define SHAPE_LEVEL_VERBOSE 5u
/* GC 0x1 | Type 0x80000 | GCHeapDump 0x100000 | GCHeapCollect 0x800000 | GCHeapAndTypeNames 0x1000000 */
#define SHAPE_GC_HEAP_SNAPSHOT_KEYWORDS 0x1980001ULL
/* digits of a count in the Metrics arguments: MaxTimeSeries and MaxHistograms at most 999999 */
#define SHAPE_COUNT_DIGITS_MAX 6
#define SHAPE_ID_MAX 64

/* The @n bytes at @s are a number of seconds as the tools write it: digits, and maybe ".digits". */
static bool shape_seconds(const char *s, size_t n) {
        size_t digits = 0, i = 0;

        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
                digits++;
        if (digits == 0 || digits > 6)
                return false;
        if (i == n)
                return true;
        if (s[i++] != '.' || i == n || n - i > 6)
                return false;
        for (; i < n; i++)
                if (s[i] < '0' || s[i] > '9')
                        return false;
        return true;
}

static bool shape_count(const char *s, size_t n) {
        if (n == 0 || n > SHAPE_COUNT_DIGITS_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] < '0' || s[i] > '9')
                        return false;
        return true;
}

/* A session or client id: a GUID, or "SHARED". */
static bool shape_id(const char *s, size_t n) {
        if (n == 0 || n > SHAPE_ID_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
                      s[i] == '-'))
                        return false;
        return true;
}

/* An EventCounters provider as dotnet-counters asks for one: keywords 0, Informational at most,
 * and "EventCounterIntervalSec=SECONDS" alone. */
static bool shape_is_event_counters(const EventPipeProvider *p) {
        static const char key[] = "EventCounterIntervalSec=";

        return strcmp(p->name, SHAPE_METRICS_PROVIDER) != 0 && p->keywords == 0 &&
               p->level <= SHAPE_LEVEL_INFORMATIONAL && p->arguments &&
               strncmp(p->arguments, key, sizeof(key) - 1) == 0 &&
               shape_seconds(p->arguments + sizeof(key) - 1, strlen(p->arguments) - (sizeof(key) - 1));
}

/* @name (@n bytes) is the name of one of @c's EventCounters providers. */
static bool shape_names_counters_provider(const EventPipeConfig *c, const char *name, size_t n) {
        for (size_t i = 0; i < c->n_providers; i++)
                if (strlen(c->providers[i].name) == n && memcmp(c->providers[i].name, name, n) == 0 &&
                    shape_is_event_counters(&c->providers[i]))
                        return true;
        return false;
}

/* Metrics=: "Meter[\Instrument],...", each Meter one of the session's EventCounters providers
 * (dotnet-counters asks for every name as both), so counter_providers decides the meters too. */
static bool shape_meters(const EventPipeConfig *c, const char *s, size_t n) {
        size_t i = 0;

        while (i < n) {
                size_t start = i, meter_len, instrument_len = 0;

                while (i < n && eventpipe_name_char_is_valid(s[i]))
                        i++;
                meter_len = i - start;
                if (meter_len == 0 || !shape_names_counters_provider(c, s + start, meter_len))
                        return false;
                if (i < n && s[i] == '\\') {
                        for (i++; i < n && eventpipe_name_char_is_valid(s[i]); i++)
                                instrument_len++;
                        if (instrument_len == 0)
                                return false;
                }
                if (i < n && (s[i] != ',' || ++i == n))
                        return false;
        }
        return true;
}

/* The arguments dotnet-counters gives System.Diagnostics.Metrics: each of these keys at most once,
 * SessionId and Metrics present, and every value of its own form. */
static bool shape_metrics_arguments(const EventPipeConfig *c, const char *args) {
        static const char *const keys[] = { "SessionId", "Metrics", "RefreshInterval", "MaxTimeSeries",
                                            "MaxHistograms", "ClientId" };
        unsigned seen = 0;
        const char *p = args;

        while (*p) {
                const char *end = strchrnul(p, ';'), *eq = memchr(p, '=', (size_t)(end - p));
                size_t k, n;

                if (!eq)
                        return false;
                for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
                        if (strlen(keys[k]) == (size_t)(eq - p) && memcmp(keys[k], p, (size_t)(eq - p)) == 0)
                                break;
                if (k == sizeof(keys) / sizeof(keys[0]) || (seen & (1u << k)))
                        return false;
                seen |= 1u << k;
                n = (size_t)(end - (eq + 1));
                switch (k) {
                case 0: case 5: if (!shape_id(eq + 1, n)) return false; break;
                case 1: if (!shape_meters(c, eq + 1, n)) return false; break;
                case 2: if (!shape_seconds(eq + 1, n)) return false; break;
                default: if (!shape_count(eq + 1, n)) return false; break;
                }
                if (*end == '\0')
                        break;
                p = end + 1;
                if (*p == '\0')
                        return false; /* a trailing ';' */
        }
        return (seen & 0x3u) == 0x3u;
}

/* dotnet-counters' session: EventCounters providers, and maybe System.Diagnostics.Metrics; no rundown. */
static bool shape_is_counters(const IpcRequestTracing *t) {
        const EventPipeConfig *c = &t->config;
        size_t n_counters = 0;

        if (t->rundown_keyword != 0)
                return false;
        for (size_t i = 0; i < c->n_providers; i++) {
                const EventPipeProvider *p = &c->providers[i];

                if (shape_is_event_counters(p)) {
                        n_counters++;
                        continue;
                }
                if (strcmp(p->name, SHAPE_METRICS_PROVIDER) != 0 || p->keywords != SHAPE_METRICS_KEYWORD_TIME_SERIES ||
                    p->level > SHAPE_LEVEL_INFORMATIONAL || !p->arguments || !shape_metrics_arguments(c, p->arguments))
                        return false;
        }
        return n_counters > 0;
}

/* The one provider of @t, when it is @name with exactly @keywords and @level, and no arguments. */
static bool shape_is_only(const IpcRequestTracing *t, const char *name, uint64_t keywords, uint32_t level) {
        const EventPipeProvider *p = t->config.providers;

        return t->config.n_providers == 1 && strcmp(p->name, name) == 0 && p->keywords == keywords &&
               p->level == level && (!p->arguments || !*p->arguments);
}

IpcTracingShape ipc_policy_tracing_shape(const IpcRequestTracing *t) {
        if (shape_is_counters(t))
                return IPC_TRACING_SHAPE_COUNTERS;
        if (shape_is_only(t, EVENTPIPE_CLR_PROVIDER, SHAPE_GC_HEAP_SNAPSHOT_KEYWORDS, SHAPE_LEVEL_VERBOSE))
                return IPC_TRACING_SHAPE_GCDUMP;
        if (shape_is_only(t, EVENTPIPE_SAMPLE_PROFILER, EVENTPIPE_SAMPLE_PROFILER_KEYWORDS, SHAPE_LEVEL_INFORMATIONAL))
                return t->rundown_keyword == 0 ? IPC_TRACING_SHAPE_GCDUMP_TYPES : IPC_TRACING_SHAPE_STACKS;
        return IPC_TRACING_SHAPE_TRACE;
}

PolicyCommand ipc_policy_shape_command(IpcTracingShape shape) {
        switch (shape) {
        case IPC_TRACING_SHAPE_COUNTERS: return POLICY_COMMAND_COUNTERS;
        case IPC_TRACING_SHAPE_GCDUMP:
        case IPC_TRACING_SHAPE_GCDUMP_TYPES: return POLICY_COMMAND_GCDUMP;
        case IPC_TRACING_SHAPE_STACKS: return POLICY_COMMAND_STACKS;
        default: return POLICY_COMMAND_TRACE;
        }
}

/* The request decided as @command; for a CollectTracing @command is trace, or its shape's. */
static int policy_request_as(const IpcRequest *r, PolicyCommand command, PolicyProvider *providers,
                             size_t n_providers, PolicyRequest *ret) {
        const EventPipeConfig *config = &r->tracing.config;
        PolicyRequest q = { .command = command, .dump_type = POLICY_DUMP_NONE, .buffer_mb = r->tracing.buffer_mb };

        if (config->n_providers > n_providers)
                return -ENOBUFS;
        for (size_t i = 0; i < config->n_providers; i++) {
                const EventPipeProvider *p = &config->providers[i];

                /* counters: the EventCounters providers, whose names are the meters' too */
                if (command == POLICY_COMMAND_COUNTERS && strcmp(p->name, SHAPE_METRICS_PROVIDER) == 0)
                        continue;
                providers[q.n_providers++] = (PolicyProvider){
                        .name = p->name,
                        .keywords = p->keywords,
                        .level = p->level,
                        .arguments = p->arguments && *p->arguments ? p->arguments : NULL,
                };
        }
        q.providers = providers;
        *ret = q;
        return 0;
}

int ipc_policy_request(const IpcRequest *r, PolicyProvider *providers, size_t n_providers,
                               PolicyRequest *ret) {
        PolicyRequest q = { .command = ipc_policy_command(r->command), .dump_type = POLICY_DUMP_NONE };

        assert(providers || n_providers == 0);
        if (q.command == _POLICY_COMMAND_INVALID)
                return -EINVAL;
        if (q.command == POLICY_COMMAND_DUMP) {
                q.dump_type = ipc_policy_dump_type(r->dump.type);
                if (q.dump_type == _POLICY_DUMP_INVALID)
                        return -EINVAL;
        }
        if (q.command == POLICY_COMMAND_TRACE && r->command != DOTNET_IPC_STOP_TRACING) {
                q.command = ipc_policy_shape_command(ipc_policy_tracing_shape(&r->tracing));
                if (q.command != POLICY_COMMAND_TRACE && q.command != POLICY_COMMAND_COUNTERS) {
                        /* gcdump and stacks: the command alone is decided, as for dsctl's own */
                        q.buffer_mb = r->tracing.buffer_mb;
                        *ret = q;
                        return 0;
                }
                return policy_request_as(r, q.command, providers, n_providers, ret);
        }
        *ret = q;
        return 0;
}

int ipc_policy_trace_request(const IpcRequest *r, PolicyProvider *providers, size_t n_providers,
                                     PolicyRequest *ret) {
        if (r->command < DOTNET_IPC_COLLECT_TRACING || r->command > DOTNET_IPC_COLLECT_TRACING5)
                return -EINVAL;
        return policy_request_as(r, POLICY_COMMAND_TRACE, providers, n_providers, ret);
}
