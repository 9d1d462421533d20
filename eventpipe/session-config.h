/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What an EventPipe session asks a runtime for: providers with their
 * keywords, levels and arguments. Pure: parses dotnet-trace's provider
 * syntax, expands named profiles, and builds the providers of a counters
 * session. No I/O.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cleanup.h"

#define EVENTPIPE_PROVIDERS_MAX 32
#define EVENTPIPE_NAME_MAX 256        /* bytes of a provider name */
#define EVENTPIPE_ARGUMENTS_MAX 2048  /* bytes of a provider's arguments */
#define EVENTPIPE_SPEC_MAX 16384      /* bytes of a whole --providers or --counters list */
#define EVENTPIPE_LEVEL_MAX 5         /* Verbose; the runtime refuses higher levels */
#define EVENTPIPE_BUFFER_MB_DEFAULT 256
#define EVENTPIPE_BUFFER_MB_MAX 1024

enum {
        _EVENTPIPE_E_SUCCESS,
        EVENTPIPE_E_SYNTAX,        /* the list does not follow Provider[:Keywords[:Level[:Arguments]]] */
        EVENTPIPE_E_LIMIT,         /* too many providers, or a name or arguments too long */
        EVENTPIPE_E_UNKNOWN,       /* no such profile */
};

/* EventLevel: 0 LogAlways, 1 Critical, 2 Error, 3 Warning, 4 Informational, 5 Verbose */
typedef struct EventPipeProvider {
        char *name;
        uint64_t keywords;
        uint32_t level;
        char *arguments; /* "key=value;..." or NULL */
} EventPipeProvider;

typedef struct EventPipeConfig {
        EventPipeProvider *providers;
        size_t n_providers;
        bool rundown; /* ask for rundown at the end, so stacks can be symbolized */
} EventPipeConfig;

#define EVENTPIPE_CONFIG_NULL {}

typedef struct EventPipeProfile {
        const char *name;
        const char *description;
} EventPipeProfile;

int eventpipe_providers_parse(const char *spec, EventPipeConfig *ret);
int eventpipe_profile_config(const char *name, EventPipeConfig *ret);
const EventPipeProfile *eventpipe_profiles(size_t *ret_count);
bool eventpipe_profile_is_known(const char *name);
bool eventpipe_provider_name_is_valid(const char *name);
/* The provider eventpipe_counters_config() asks the Meters through: no name a counters session may give. */
#define EVENTPIPE_METRICS_PROVIDER "System.Diagnostics.Metrics"
int eventpipe_counters_config(const char *const *names, size_t n_names, unsigned interval_sec,
                              const char *session_id, EventPipeConfig *ret);
char *eventpipe_config_to_string(const EventPipeConfig *c);
void eventpipe_config_done(EventPipeConfig *c);
