/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What an EventPipe session asks a runtime for, as data: providers with their keywords, levels
 * and arguments, their limits, and the one check of a provider's name. The IPC codecs
 * (dotnet-ipc.h, ipc-request.h) encode and decode these; eventpipe/session-config.h builds them
 * from profiles and dotnet-trace's provider syntax. Pure: no I/O, no logging, no global state.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EVENTPIPE_PROVIDERS_MAX 32
#define EVENTPIPE_NAME_MAX 256        /* bytes of a provider name */
#define EVENTPIPE_ARGUMENTS_MAX 2048  /* bytes of a provider's arguments */
#define EVENTPIPE_LEVEL_MAX 5         /* Verbose; the runtime refuses higher levels */

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

/* Frees every provider's name and arguments and the array, and resets *@c to EVENTPIPE_CONFIG_NULL; NULL is fine. */
void eventpipe_config_done(EventPipeConfig *c);

/* A character a provider name may have: letters, digits, '.', '-' and '_' (also meters and instruments). */
bool eventpipe_name_char_is_valid(char ch);

/*
 * Is @name a provider name: 1 to EVENTPIPE_NAME_MAX characters of eventpipe_name_char_is_valid()?
 * Names go into the runtime's request and, for counters, into an argument list; so never "*",
 * which the runtime takes as every provider at once. NULL is not.
 */
bool eventpipe_provider_name_is_valid(const char *name);

/* The same for the @len bytes at @s, which need not end in a NUL. */
bool eventpipe_provider_name_is_valid_n(const char *s, size_t len);
