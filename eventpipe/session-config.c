/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What an EventPipe session asks a runtime for (session-config.h): providers, profiles and counters
 * sessions; pure.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "eventpipe/session-config.h"
#include "common/text.h"

#define METRICS_PROVIDER EVENTPIPE_METRICS_PROVIDER
#define TPL_PROVIDER "System.Threading.Tasks.TplEventSource"
#define DIAGNOSTIC_SOURCE_PROVIDER "Microsoft-Diagnostics-DiagnosticSource"

/* Keywords of the runtime's provider (ClrEtwAll.man, TraceEvent's ClrTraceEventParser.Keywords) */
#define CLR_KEYWORD_GC 0x1ULL
#define CLR_KEYWORD_GC_HANDLE 0x2ULL
#define CLR_KEYWORD_EXCEPTION 0x8000ULL
#define CLR_KEYWORDS_DEFAULT 0x14c14fccbdULL /* ClrTraceEventParser.Keywords.Default */
#define CLR_KEYWORDS_COMMON 0x100003801dULL  /* GC, loaders, JIT, exceptions, threading, compilation */
#define TPL_KEYWORD_TASK_TRANSFER 0x80ULL    /* activity ids across awaits */
#define DIAGNOSTIC_SOURCE_KEYWORDS 0x3ULL    /* Messages, Events */
#define METRICS_KEYWORD_TIME_SERIES 0x2ULL
#define LEVEL_INFORMATIONAL 4u
#define LEVEL_VERBOSE 5u

/* The database profile's DiagnosticSource filter: the SqlClient and Entity Framework Core command
 * events, with the command text and the connection's properties (its connection string too). */
#define DATABASE_FILTER                                                                                                \
        "FilterAndPayloadSpecs=\""                                                                                     \
        "SqlClientDiagnosticListener/System.Data.SqlClient.WriteCommandBefore@Activity1Start:-Command;"                \
        "Command.CommandText;ConnectionId;Operation;Command.Connection.ServerVersion;Command.CommandTimeout;"          \
        "Command.CommandType;Command.Connection.ConnectionString;Command.Connection.Database;"                         \
        "Command.Connection.DataSource;Command.Connection.PacketSize\r\n"                                              \
        "SqlClientDiagnosticListener/System.Data.SqlClient.WriteCommandAfter@Activity1Stop:\r\n"                       \
        "Microsoft.EntityFrameworkCore/Microsoft.EntityFrameworkCore.Database.Command.CommandExecuting@Activity2Start:" \
        "-Command.CommandText;Command;ConnectionId;IsAsync;Command.Connection.ClientConnectionId;"                     \
        "Command.Connection.ServerVersion;Command.CommandTimeout;Command.CommandType;"                                  \
        "Command.Connection.ConnectionString;Command.Connection.Database;Command.Connection.DataSource;"                \
        "Command.Connection.PacketSize\r\n"                                                                            \
        "Microsoft.EntityFrameworkCore/Microsoft.EntityFrameworkCore.Database.Command.CommandExecuted@Activity2Stop:\""

/*
 * The profiles: dsctl trace runs them, rules grant them, and a tool's request is matched against
 * them provider for provider. The stock ones are what dotnet-trace 10.0.750501's collect sends
 * for --profile NAME, provider for provider, as recorded on the wire in front of a .NET 10
 * runtime (tests/tools/capture-ipc-requests.py; `dotnet-trace list-profiles` names them):
 * CollectTracing2 with a rundown, each provider's arguments "" but database's, and for gc-collect
 * alone CollectTracing4 with the GC-only rundown keyword (0x1). The tool's default, with neither
 * --profile nor --providers, is dotnet-common and dotnet-sampled-thread-time together.
 * cpu-sampling is the EventPipe one of dotnet-trace 8 and 9 and dsctl trace's default (dotnet-trace
 * 10 moved that name to collect-linux's perf_events). dsctl's gc-collect asks for no rundown, as
 * dotnet-trace does on runtimes that cannot take a GC-only rundown keyword.
 */
static const EventPipeProfile profiles[] = {
        {
                "cpu-sampling", "thread stacks sampled about every millisecond, and the runtime's default events",
                true, false, 2,
                { { EVENTPIPE_SAMPLE_PROFILER, EVENTPIPE_SAMPLE_PROFILER_KEYWORDS, LEVEL_INFORMATIONAL, NULL },
                  { EVENTPIPE_CLR_PROVIDER, CLR_KEYWORDS_DEFAULT, LEVEL_INFORMATIONAL, NULL } },
        },
        {
                "gc-verbose", "garbage collections, GC handles, exceptions and sampled allocations",
                true, true, 1,
                { { EVENTPIPE_CLR_PROVIDER, CLR_KEYWORD_GC | CLR_KEYWORD_GC_HANDLE | CLR_KEYWORD_EXCEPTION,
                    LEVEL_VERBOSE, NULL } },
        },
        {
                "gc-collect", "garbage collections only, at very low overhead",
                false, true, 2,
                { { EVENTPIPE_CLR_PROVIDER, CLR_KEYWORD_GC, LEVEL_INFORMATIONAL, NULL },
                  { EVENTPIPE_CLR_PRIVATE_PROVIDER, CLR_KEYWORD_GC, LEVEL_INFORMATIONAL, NULL } },
        },
        {
                "dotnet-common", "lightweight runtime events: GC, assembly loading, JIT, exceptions, threading",
                true, true, 1,
                { { EVENTPIPE_CLR_PROVIDER, CLR_KEYWORDS_COMMON, LEVEL_INFORMATIONAL, NULL } },
        },
        {
                "dotnet-sampled-thread-time", "managed thread stacks sampled about every millisecond",
                true, true, 1,
                { { EVENTPIPE_SAMPLE_PROFILER, EVENTPIPE_SAMPLE_PROFILER_KEYWORDS, LEVEL_INFORMATIONAL, NULL } },
        },
        {
                "database", "SqlClient and Entity Framework Core commands, their text and connection strings",
                true, true, 2,
                { { TPL_PROVIDER, TPL_KEYWORD_TASK_TRANSFER, LEVEL_INFORMATIONAL, NULL },
                  { DIAGNOSTIC_SOURCE_PROVIDER, DIAGNOSTIC_SOURCE_KEYWORDS, LEVEL_VERBOSE, DATABASE_FILTER } },
        },
};

#define N_PROFILES (sizeof(profiles) / sizeof(profiles[0]))

static int config_add(EventPipeConfig *c, const char *name, size_t name_len, uint64_t keywords, uint32_t level,
                      const char *arguments, size_t arguments_len) {
        EventPipeProvider *p;

        if (c->n_providers >= EVENTPIPE_PROVIDERS_MAX)
                return EVENTPIPE_E_LIMIT;
        p = realloc(c->providers, (c->n_providers + 1) * sizeof(*p));
        if (!p)
                return -ENOMEM;
        c->providers = p;
        p = &c->providers[c->n_providers];
        *p = (EventPipeProvider){ .keywords = keywords, .level = level };
        p->name = strndup(name, name_len);
        p->arguments = arguments ? strndup(arguments, arguments_len) : NULL;
        if (!p->name || (arguments && !p->arguments)) {
                free(p->name);
                free(p->arguments);
                return -ENOMEM;
        }
        c->n_providers++;
        return 0;
}

static int parse_keywords(const char *s, size_t len, uint64_t *ret) {
        uint64_t v = 0;

        if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
                s += 2;
                len -= 2;
        }
        if (len == 0 || len > 16)
                return EVENTPIPE_E_SYNTAX;
        for (size_t i = 0; i < len; i++) {
                char ch = s[i];
                unsigned digit;

                if (ch >= '0' && ch <= '9')
                        digit = (unsigned)(ch - '0');
                else if (ch >= 'a' && ch <= 'f')
                        digit = (unsigned)(ch - 'a' + 10);
                else if (ch >= 'A' && ch <= 'F')
                        digit = (unsigned)(ch - 'A' + 10);
                else
                        return EVENTPIPE_E_SYNTAX;
                v = v << 4 | digit;
        }
        *ret = v;
        return 0;
}

static int parse_level(const char *s, size_t len, uint32_t *ret) {
        static const char *const names[] = { "logalways", "critical", "error", "warning", "informational", "verbose" };

        if (len == 1 && s[0] >= '0' && s[0] <= '0' + EVENTPIPE_LEVEL_MAX) {
                *ret = (uint32_t)(s[0] - '0');
                return 0;
        }
        for (uint32_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (strlen(names[i]) == len && strncasecmp(s, names[i], len) == 0) {
                        *ret = i;
                        return 0;
                }
        return EVENTPIPE_E_SYNTAX;
}

/* The runtime gets them as UTF-16: they must be valid UTF-8, and printable. */
static bool arguments_are_valid(const char *s, size_t len) {
        if (len == 0 || len > EVENTPIPE_ARGUMENTS_MAX || !utf8_is_valid(s, len))
                return false;
        for (size_t i = 0; i < len; i++)
                if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
                        return false;
        return true;
}

/*
 * One "Provider[:Keywords[:Level[:Arguments]]]". Omitted keywords are @omitted_keywords: all of
 * them for dsctl (UINT64_MAX), 0 for what dotnet-trace sends, which EventPipe takes as all of an
 * EventSource's events too. An omitted level is Informational, as in dotnet-trace.
 */
static int parse_one(EventPipeConfig *c, const char *s, size_t len, uint64_t omitted_keywords) {
        const char *end = s + len, *field[4] = { s }, *field_end[4] = {};
        uint64_t keywords = omitted_keywords;
        uint32_t level = 4;
        size_t n = 1;
        int r;

        /* the arguments are the rest of the item: they may contain ':' */
        for (const char *p = s; p < end && n < 4; p++)
                if (*p == ':') {
                        field_end[n - 1] = p;
                        field[n++] = p + 1;
                }
        field_end[n - 1] = end;

        if (!eventpipe_provider_name_is_valid_n(field[0], (size_t)(field_end[0] - field[0])))
                return (size_t)(field_end[0] - field[0]) > EVENTPIPE_NAME_MAX ? EVENTPIPE_E_LIMIT : EVENTPIPE_E_SYNTAX;
        if (n > 1 && field_end[1] > field[1]) {
                r = parse_keywords(field[1], (size_t)(field_end[1] - field[1]), &keywords);
                if (r != 0)
                        return r;
        }
        if (n > 2 && field_end[2] > field[2]) {
                r = parse_level(field[2], (size_t)(field_end[2] - field[2]), &level);
                if (r != 0)
                        return r;
        }
        if (n > 3 && !arguments_are_valid(field[3], (size_t)(field_end[3] - field[3])))
                return (size_t)(field_end[3] - field[3]) > EVENTPIPE_ARGUMENTS_MAX ? EVENTPIPE_E_LIMIT
                                                                                   : EVENTPIPE_E_SYNTAX;
        return config_add(c, field[0], (size_t)(field_end[0] - field[0]), keywords, level, n > 3 ? field[3] : NULL,
                          n > 3 ? (size_t)(field_end[3] - field[3]) : 0);
}

static bool config_has_provider(const EventPipeConfig *c, const char *name) {
        for (size_t i = 0; i < c->n_providers; i++)
                if (strcmp(c->providers[i].name, name) == 0)
                        return true;
        return false;
}

/* Whether the provider added last was there already. */
static bool provider_is_repeated(const EventPipeConfig *c) {
        const char *last = c->providers[c->n_providers - 1].name;

        for (size_t i = 0; i + 1 < c->n_providers; i++)
                if (strcmp(c->providers[i].name, last) == 0)
                        return true;
        return false;
}

static int providers_parse(const char *spec, uint64_t omitted_keywords, EventPipeConfig *ret) {
        _cleanup_(eventpipe_config_done) EventPipeConfig c = EVENTPIPE_CONFIG_NULL;
        size_t len = strlen(spec);
        const char *item = spec;
        bool quoted = false;
        int r;

        if (len == 0)
                return EVENTPIPE_E_SYNTAX;
        if (len > EVENTPIPE_SPEC_MAX)
                return EVENTPIPE_E_LIMIT;
        for (const char *p = spec;; p++) {
                if (*p == '"')
                        quoted = !quoted;
                if (*p != '\0' && (*p != ',' || quoted))
                        continue;
                if (p == item)
                        return EVENTPIPE_E_SYNTAX;
                r = parse_one(&c, item, (size_t)(p - item), omitted_keywords);
                if (r != 0)
                        return r;
                if (provider_is_repeated(&c))
                        return EVENTPIPE_E_SYNTAX;
                if (*p == '\0')
                        break;
                item = p + 1;
        }
        if (quoted)
                return EVENTPIPE_E_SYNTAX;
        c.rundown = true;
        *ret = c;
        c = (EventPipeConfig)EVENTPIPE_CONFIG_NULL;
        return 0;
}

/**
 * eventpipe_providers_parse() - dotnet-trace's --providers list
 *
 * Items are separated by ',' outside double quotes, so quoted arguments may
 * hold commas. A provider may appear once: the runtime would merge two
 * entries in ways the policy could not see.
 *
 * Return: 0, EVENTPIPE_E_SYNTAX, EVENTPIPE_E_LIMIT or -ENOMEM.
 */
int eventpipe_providers_parse(const char *spec, EventPipeConfig *ret) {
        return providers_parse(spec, UINT64_MAX, ret);
}

const EventPipeProfile *eventpipe_profile_find(const char *name) {
        for (size_t i = 0; name && i < N_PROFILES; i++)
                if (strcmp(profiles[i].name, name) == 0)
                        return &profiles[i];
        return NULL;
}

bool eventpipe_profile_is_known(const char *name) {
        return eventpipe_profile_find(name);
}

bool eventpipe_profile_samples_cpu(const char *name) {
        const EventPipeProfile *p = eventpipe_profile_find(name);

        for (size_t i = 0; p && i < p->n_providers; i++)
                if (strcmp(p->providers[i].name, EVENTPIPE_SAMPLE_PROFILER) == 0)
                        return true;
        return false;
}

const EventPipeProfile *eventpipe_profiles(size_t *ret_count) {
        *ret_count = N_PROFILES;
        return profiles;
}

bool eventpipe_profile_provider_matches(const EventPipeProfileProvider *pp, const char *name, uint64_t keywords,
                                        uint32_t level, const char *arguments) {
        const char *mine = pp->arguments ? pp->arguments : "", *theirs = arguments ? arguments : "";

        return strcmp(pp->name, name) == 0 && pp->keywords == keywords && pp->level == level &&
               strcmp(mine, theirs) == 0;
}

static int config_add_profile(EventPipeConfig *c, const EventPipeProfile *p, bool unless_there) {
        int r;

        for (size_t i = 0; i < p->n_providers; i++) {
                const EventPipeProfileProvider *pp = &p->providers[i];
                bool there = false;

                for (size_t k = 0; unless_there && k < c->n_providers; k++)
                        there = there || strcasecmp(c->providers[k].name, pp->name) == 0;
                if (there)
                        continue;
                r = config_add(c, pp->name, strlen(pp->name), pp->keywords, pp->level, pp->arguments,
                               pp->arguments ? strlen(pp->arguments) : 0);
                if (r != 0)
                        return r;
        }
        return 0;
}

/* Return: 0, EVENTPIPE_E_UNKNOWN or -ENOMEM. */
int eventpipe_profile_config(const char *name, EventPipeConfig *ret) {
        _cleanup_(eventpipe_config_done) EventPipeConfig c = EVENTPIPE_CONFIG_NULL;
        const EventPipeProfile *p = eventpipe_profile_find(name);
        int r;

        if (!p)
                return EVENTPIPE_E_UNKNOWN;
        r = config_add_profile(&c, p, false);
        if (r != 0)
                return r;
        c.rundown = p->rundown;
        *ret = c;
        c = (EventPipeConfig)EVENTPIPE_CONFIG_NULL;
        return 0;
}

/* The profile dotnet-trace takes for the @n bytes at @name: its names compare in any case. */
static const EventPipeProfile *stock_profile_find(const char *name, size_t n) {
        for (size_t i = 0; i < N_PROFILES; i++)
                if (strlen(profiles[i].name) == n && strncasecmp(profiles[i].name, name, n) == 0)
                        return &profiles[i];
        return NULL;
}

int eventpipe_stock_trace_config(const char *profile_list, const char *providers, EventPipeConfig *ret) {
        _cleanup_(eventpipe_config_done) EventPipeConfig c = EVENTPIPE_CONFIG_NULL;
        const char *list = profile_list;
        size_t n_profiles = 0;
        int r;

        if (!profile_list && !providers)
                list = EVENTPIPE_STOCK_DEFAULT_PROFILES;
        if (providers) {
                r = providers_parse(providers, 0, &c);
                if (r != 0)
                        return r;
        }
        for (const char *p = list; p && *p;) {
                size_t n = strcspn(p, ",");
                const EventPipeProfile *profile = stock_profile_find(p, n);

                if (n == 0)
                        return EVENTPIPE_E_SYNTAX;
                if (!profile)
                        return EVENTPIPE_E_UNKNOWN;
                if (!profile->stock)
                        return EVENTPIPE_E_NOT_STOCK;
                r = config_add_profile(&c, profile, true);
                if (r != 0)
                        return r;
                n_profiles++;
                p += n;
                if (*p == ',' && *++p == '\0')
                        return EVENTPIPE_E_SYNTAX;
        }
        if (list && n_profiles == 0)
                return EVENTPIPE_E_SYNTAX;
        c.rundown = true;
        *ret = c;
        c = (EventPipeConfig)EVENTPIPE_CONFIG_NULL;
        return 0;
}

/**
 * eventpipe_counters_config() - the providers dotnet-counters enables
 *
 * Each name is enabled as an EventSource publishing EventCounters every
 * @interval_sec, and is also asked for as a Meter of System.Diagnostics.Metrics,
 * so instruments of either kind report. No rundown: counters need no symbols.
 *
 * Return: 0, EVENTPIPE_E_SYNTAX for a bad name or interval, EVENTPIPE_E_LIMIT, -ENOMEM.
 */
int eventpipe_counters_config(const char *const *names, size_t n_names, unsigned interval_sec, const char *session_id,
                              EventPipeConfig *ret) {
        _cleanup_(eventpipe_config_done) EventPipeConfig c = EVENTPIPE_CONFIG_NULL;
        char arguments[EVENTPIPE_ARGUMENTS_MAX + 1], meters[EVENTPIPE_ARGUMENTS_MAX];
        size_t meters_len = 0;
        int r, n;

        if (n_names == 0 || interval_sec == 0 || interval_sec > 86400 || !eventpipe_provider_name_is_valid(session_id))
                return EVENTPIPE_E_SYNTAX;
        if (n_names >= EVENTPIPE_PROVIDERS_MAX)
                return EVENTPIPE_E_LIMIT;
        meters[0] = '\0';
        for (size_t i = 0; i < n_names; i++) {
                if (!eventpipe_provider_name_is_valid(names[i]) || strcmp(names[i], METRICS_PROVIDER) == 0 ||
                    config_has_provider(&c, names[i]))
                        return EVENTPIPE_E_SYNTAX;
                n = snprintf(arguments, sizeof(arguments), "EventCounterIntervalSec=%u", interval_sec);
                r = config_add(&c, names[i], strlen(names[i]), 0, 4, arguments, (size_t)n);
                if (r != 0)
                        return r;
                n = snprintf(meters + meters_len, sizeof(meters) - meters_len, "%s%s", i > 0 ? "," : "", names[i]);
                if (n < 0 || (size_t)n >= sizeof(meters) - meters_len)
                        return EVENTPIPE_E_LIMIT;
                meters_len += (size_t)n;
        }
        n = snprintf(arguments, sizeof(arguments),
                     "SessionId=%s;Metrics=%s;RefreshInterval=%u;MaxTimeSeries=1000;MaxHistograms=10;ClientId=%s",
                     session_id, meters, interval_sec, session_id);
        if (n < 0 || (size_t)n > EVENTPIPE_ARGUMENTS_MAX)
                return EVENTPIPE_E_LIMIT;
        r = config_add(&c, METRICS_PROVIDER, strlen(METRICS_PROVIDER), METRICS_KEYWORD_TIME_SERIES, 4, arguments,
                       (size_t)n);
        if (r != 0)
                return r;
        c.rundown = false;
        *ret = c;
        c = (EventPipeConfig)EVENTPIPE_CONFIG_NULL;
        return 0;
}

/* "Name:0xKEYWORDS:LEVEL[:arguments],...": for audit records and for the requester. */
char *eventpipe_config_to_string(const EventPipeConfig *c) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        if (!f)
                return NULL;
        for (size_t i = 0; i < c->n_providers; i++) {
                const EventPipeProvider *p = &c->providers[i];
                fprintf(f, "%s%s:0x%llx:%u%s%s", i > 0 ? "," : "", p->name, (unsigned long long)p->keywords, p->level,
                        p->arguments ? ":" : "", p->arguments ? p->arguments : "");
        }
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}
