/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What an EventPipe session asks a runtime for: providers with their
 * keywords, levels and arguments. Pure: parses dotnet-trace's provider
 * syntax, holds the one table of named profiles (dsctl's and stock
 * dotnet-trace's, provider for provider as the tool sends them), merges
 * profiles and providers as dotnet-trace collect does, and builds the
 * providers of a counters session. No I/O.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cleanup.h"
#include "common/eventpipe-provider.h" /* EventPipeConfig, EventPipeProvider, their limits and checks */

#define EVENTPIPE_SPEC_MAX 16384      /* bytes of a whole --providers or --counters list */
#define EVENTPIPE_BUFFER_MB_DEFAULT 256
#define EVENTPIPE_BUFFER_MB_MAX 1024
/*
 * A session stopped at its size limit (max_trace_size, an [[on_start]]'s max_size) still gets the
 * runtime's closing rundown, which names the methods, on top: at most this much more, after which
 * the stream is cut (docs/policy.md). One bound for a client's sessions (agent/runtime/session.c)
 * and the agent's own (agent/runtime/recorder.c, read by a worker).
 */
#define EVENTPIPE_RUNDOWN_BYTES_MAX (256ULL << 20)

enum {
        _EVENTPIPE_E_SUCCESS,
        EVENTPIPE_E_SYNTAX,        /* the list does not follow Provider[:Keywords[:Level[:Arguments]]] */
        EVENTPIPE_E_LIMIT,         /* too many providers, or a name or arguments too long */
        EVENTPIPE_E_UNKNOWN,       /* no such profile */
        EVENTPIPE_E_NOT_STOCK,     /* a profile of dsctl's that stock dotnet-trace collect does not take */
};

/* Providers the profiles, the tools' shapes (policy/ipc-policy.h) and the agent's own sessions name. */
#define EVENTPIPE_CLR_PROVIDER "Microsoft-Windows-DotNETRuntime"
#define EVENTPIPE_CLR_PRIVATE_PROVIDER "Microsoft-Windows-DotNETRuntimePrivate"
#define EVENTPIPE_SAMPLE_PROFILER "Microsoft-DotNETCore-SampleProfiler"
#define EVENTPIPE_SAMPLE_PROFILER_KEYWORDS 0xf00000000000ULL

/* One provider of a profile, exactly as the stock tool sends it. */
typedef struct EventPipeProfileProvider {
        const char *name;
        uint64_t keywords;
        uint32_t level;
        const char *arguments; /* NULL: none (the .NET client sends "" for none) */
} EventPipeProfileProvider;

#define EVENTPIPE_PROFILE_PROVIDERS_MAX 2

/*
 * A named profile. The table (session-config.c) is the only place profiles are defined: dsctl
 * trace runs them, a rule's trace_profiles grants them, and a tool's request is matched against
 * them provider for provider (policy.c).
 */
typedef struct EventPipeProfile {
        const char *name;
        const char *description;
        bool rundown;
        /* stock dotnet-trace 10.0.750501's collect takes it, and sends these providers for it;
         * false: dsctl's own (cpu-sampling: dotnet-trace 8 and 9's, which 10 moved to collect-linux) */
        bool stock;
        size_t n_providers;
        EventPipeProfileProvider providers[EVENTPIPE_PROFILE_PROVIDERS_MAX];
} EventPipeProfile;

/* What stock dotnet-trace collect asks for when given neither --profile nor --providers. */
#define EVENTPIPE_STOCK_DEFAULT_PROFILES "dotnet-common,dotnet-sampled-thread-time"

int eventpipe_providers_parse(const char *spec, EventPipeConfig *ret);
int eventpipe_profile_config(const char *name, EventPipeConfig *ret);
/* The whole table, in the order dsctl lists it. */
const EventPipeProfile *eventpipe_profiles(size_t *ret_count);
/* The profile named exactly @name, or NULL. */
const EventPipeProfile *eventpipe_profile_find(const char *name);
bool eventpipe_profile_is_known(const char *name);
/* Does the profile named exactly @name ask for the sample profiler, the stacks a flame graph draws? */
bool eventpipe_profile_samples_cpu(const char *name);
/*
 * Is the provider @name with @keywords, @level and @arguments exactly @pp, as the stock tool sends it?
 * Names compare exactly, keywords and level as numbers; @arguments NULL and "" both mean none.
 */
bool eventpipe_profile_provider_matches(const EventPipeProfileProvider *pp, const char *name, uint64_t keywords,
                                        uint32_t level, const char *arguments);
/**
 * eventpipe_stock_trace_config() - the providers stock dotnet-trace collect sends
 * @profiles: its --profile: a comma-separated list of profile names (any case), or NULL
 * @providers: its --providers, in eventpipe_providers_parse()'s syntax, or NULL
 *
 * As dotnet-trace 10.0.750501 merges them: the --providers first, a provider given without
 * keywords asking for keywords 0 (which an EventSource takes as all of them); then each
 * profile's providers in the order the profiles are named, a provider already there kept as it
 * is (--providers, or an earlier profile, wins). Neither given: EVENTPIPE_STOCK_DEFAULT_PROFILES.
 * Arguments are kept as written (the tool re-quotes them; a rule allows none anyway but a
 * profile's own).
 *
 * Return: 0; EVENTPIPE_E_UNKNOWN for a name no profile has, EVENTPIPE_E_NOT_STOCK for one the
 * tool's collect refuses (cpu-sampling), EVENTPIPE_E_SYNTAX or EVENTPIPE_E_LIMIT for the
 * lists; -ENOMEM.
 */
int eventpipe_stock_trace_config(const char *profiles, const char *providers, EventPipeConfig *ret);
/* The provider eventpipe_counters_config() asks the Meters through: no name a counters session may give. */
#define EVENTPIPE_METRICS_PROVIDER "System.Diagnostics.Metrics"
int eventpipe_counters_config(const char *const *names, size_t n_names, unsigned interval_sec,
                              const char *session_id, EventPipeConfig *ret);
char *eventpipe_config_to_string(const EventPipeConfig *c);
