/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes eventpipe_providers_parse(): a client's --providers text, which the
 * privileged agent parses before it decides, and the CollectTracing2 request
 * built from it; and eventpipe_stock_trace_config(), which merges such a list
 * with a list of profiles for explain, as stock dotnet-trace does.
 *
 * Input: any bytes; up to the first NUL they are the list; after it, up to the
 * next NUL, a --profile list for the merge (none when there is no NUL).
 *
 * Invariants: a parsed list has 1 to EVENTPIPE_PROVIDERS_MAX providers, each
 * with a valid name, a level of at most 5 and bounded arguments of valid
 * UTF-8 without control characters; no name appears twice; printing the list and parsing
 * that again gives the same providers; the request encodes or is refused as
 * too large, never malformed. A merge is refused with one of its codes, or
 * has each of the list's providers, then profile providers exactly as the
 * table has them, no name twice.
 */
#include <errno.h>
#include <string.h>

#include "common/dotnet-ipc.h"
#include "tests/fuzz/fuzz.h"
#include "eventpipe/session-config.h"
#include "common/text.h"

static void check_provider(const EventPipeProvider *p) {
        fuzz_assert(eventpipe_provider_name_is_valid(p->name));
        fuzz_assert(p->level <= EVENTPIPE_LEVEL_MAX);
        if (p->arguments) {
                size_t n = strlen(p->arguments);
                fuzz_assert(n > 0 && n <= EVENTPIPE_ARGUMENTS_MAX && utf8_is_valid(p->arguments, n));
                for (size_t i = 0; i < n; i++)
                        fuzz_assert((unsigned char)p->arguments[i] >= 0x20 && p->arguments[i] != 0x7f);
        }
}

static void check_round_trip(const EventPipeConfig *c) {
        EventPipeConfig again = EVENTPIPE_CONFIG_NULL;
        char *text = eventpipe_config_to_string(c);
        int r;

        fuzz_assert(text);
        r = eventpipe_providers_parse(text, &again);
        /* printing adds "0x" and the level, so a list at the length limit may not fit again */
        if (r == EVENTPIPE_E_LIMIT) {
                free(text);
                return;
        }
        fuzz_assert(r == 0 && again.n_providers == c->n_providers);
        for (size_t i = 0; i < c->n_providers; i++) {
                fuzz_assert(strcmp(again.providers[i].name, c->providers[i].name) == 0);
                fuzz_assert(again.providers[i].keywords == c->providers[i].keywords);
                fuzz_assert(again.providers[i].level == c->providers[i].level);
                fuzz_assert(!again.providers[i].arguments == !c->providers[i].arguments);
        }
        eventpipe_config_done(&again);
        free(text);
}

/* Whether @p is one of the table's profile providers, exactly. */
static bool is_profile_provider(const EventPipeProvider *p) {
        size_t n;
        const EventPipeProfile *profiles = eventpipe_profiles(&n);

        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < profiles[i].n_providers; k++)
                        if (eventpipe_profile_provider_matches(&profiles[i].providers[k], p->name, p->keywords,
                                                               p->level, p->arguments))
                                return true;
        return false;
}

static void check_stock_merge(const char *spec, const char *profile_list) {
        EventPipeConfig listed = EVENTPIPE_CONFIG_NULL, merged = EVENTPIPE_CONFIG_NULL;
        int r = eventpipe_stock_trace_config(profile_list, *spec ? spec : NULL, &merged);
        size_t n_listed;

        if (r != 0) {
                fuzz_assert(r == EVENTPIPE_E_SYNTAX || r == EVENTPIPE_E_LIMIT || r == EVENTPIPE_E_UNKNOWN ||
                            r == EVENTPIPE_E_NOT_STOCK || r == -ENOMEM);
                fuzz_assert(merged.n_providers == 0 && !merged.providers);
                return;
        }
        fuzz_assert(merged.n_providers >= 1 && merged.n_providers <= EVENTPIPE_PROVIDERS_MAX);
        n_listed = *spec && eventpipe_providers_parse(spec, &listed) == 0 ? listed.n_providers : 0;
        fuzz_assert(merged.n_providers >= n_listed);
        for (size_t i = 0; i < merged.n_providers; i++) {
                const EventPipeProvider *p = &merged.providers[i];

                fuzz_assert(eventpipe_provider_name_is_valid(p->name) && p->level <= EVENTPIPE_LEVEL_MAX);
                /* a profile's own arguments may hold what a list's may not (database's line breaks) */
                if (i < n_listed)
                        fuzz_assert(strcmp(p->name, listed.providers[i].name) == 0);
                else
                        fuzz_assert(is_profile_provider(p));
                for (size_t j = 0; j < i; j++)
                        fuzz_assert(strcmp(p->name, merged.providers[j].name) != 0);
        }
        eventpipe_config_done(&listed);
        eventpipe_config_done(&merged);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static uint8_t request[DOTNET_IPC_MESSAGE_MAX];
        EventPipeConfig c = EVENTPIPE_CONFIG_NULL;
        char *spec = strndup((const char *)data, size), *profile_list = NULL;
        const uint8_t *nul = memchr(data, 0, size);
        size_t request_size;
        int r;

        if (!spec)
                return 0;
        if (nul) {
                profile_list = strndup((const char *)nul + 1, size - (size_t)(nul + 1 - data));
                if (!profile_list) {
                        free(spec);
                        return 0;
                }
        }
        check_stock_merge(spec, profile_list);
        free(profile_list);
        r = eventpipe_providers_parse(spec, &c);
        free(spec);
        if (r != 0) {
                fuzz_assert(r == EVENTPIPE_E_SYNTAX || r == EVENTPIPE_E_LIMIT || r == -ENOMEM);
                fuzz_assert(c.n_providers == 0 && !c.providers);
                return 0;
        }
        fuzz_assert(c.n_providers >= 1 && c.n_providers <= EVENTPIPE_PROVIDERS_MAX);
        for (size_t i = 0; i < c.n_providers; i++) {
                check_provider(&c.providers[i]);
                for (size_t j = 0; j < i; j++)
                        fuzz_assert(strcmp(c.providers[i].name, c.providers[j].name) != 0);
        }
        check_round_trip(&c);
        r = dotnet_ipc_collect_tracing_encode(&c, 256, request, sizeof(request), &request_size);
        fuzz_assert(r == 0 || r == DOTNET_IPC_E_TOO_LARGE);
        eventpipe_config_done(&c);
        return 0;
}
