/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes eventpipe_providers_parse(): a client's --providers text, which the
 * privileged agent parses before it decides, and the CollectTracing2 request
 * built from it.
 *
 * Input: any bytes; up to the first NUL they are the list.
 *
 * Invariants: a parsed list has 1 to EVENTPIPE_PROVIDERS_MAX providers, each
 * with a valid name, a level of at most 5 and bounded arguments of valid
 * UTF-8 without control characters; no name appears twice; printing the list and parsing
 * that again gives the same providers; the request encodes or is refused as
 * too large, never malformed.
 */
#include <errno.h>
#include <string.h>

#include "dotnet-ipc.h"
#include "fuzz.h"
#include "session-config.h"
#include "text.h"

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static uint8_t request[DOTNET_IPC_MESSAGE_MAX];
        EventPipeConfig c = EVENTPIPE_CONFIG_NULL;
        char *spec = strndup((const char *)data, size);
        size_t request_size;
        int r;

        if (!spec)
                return 0;
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
