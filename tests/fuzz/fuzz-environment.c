/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes what dsctl env and the proxy read of a runtime's environment: the block that
 * follows ProcessEnvironment's reply (common/dotnet-ipc.h), the size its reply announces,
 * and the env_redact patterns matched against the names in it (policy/policy.h). The
 * runtime is not trusted, and its owner chooses every name and value.
 *
 * Input: one mode byte, then
 *   mode % 3 == 0: an environment block (u32 count, strings "NAME=VALUE");
 *   mode % 3 == 1: the payload of an OK reply to ProcessEnvironment (u32 size, u16 0);
 *   mode % 3 == 2: a pattern, a NUL, and a name.
 *
 * Invariants: a decoded block has non-empty names without '=', names and values valid
 * UTF-8, and as many variables as its count; encoding them gives a block that decodes to
 * the same variables, and gives back the input bytes unless decoding replaced something
 * (U+FFFD); an announced size is 4 to DOTNET_IPC_ENVIRONMENT_MAX of a 6-byte payload; on
 * names of valid UTF-8 (as decoded ones are) the matcher agrees with a plain recursive one,
 * a pattern matches the very same string, and '*' matches every name.
 */
#include <stdbool.h>
#include <string.h>

#include "common/dotnet-ipc.h"
#include "tests/fuzz/fuzz.h"
#include "policy/policy.h"
#include "common/text.h"

/* Past these, the recursive reference would be slow; the matcher is still run. */
#define REFERENCE_PATTERN_MAX 24
#define REFERENCE_NAME_MAX 96

static bool contains_replacement(const char *s) {
        return strstr(s, "\xEF\xBF\xBD") != NULL;
}

static void fuzz_block(const uint8_t *data, size_t size) {
        DotnetEnvironment env = DOTNET_ENVIRONMENT_NULL, again = DOTNET_ENVIRONMENT_NULL;
        uint8_t *block = NULL;
        size_t block_size = 0;
        bool replaced = false;
        int r;

        r = dotnet_environment_decode(data, size, &env);
        if (r != 0) {
                fuzz_assert(r == DOTNET_IPC_E_MALFORMED || r == DOTNET_IPC_E_TOO_LARGE);
                fuzz_assert((r == DOTNET_IPC_E_TOO_LARGE) == (size > DOTNET_IPC_ENVIRONMENT_MAX));
                fuzz_assert(env.n == 0 && !env.variables);
                return;
        }
        fuzz_assert(size >= 4);
        fuzz_assert(env.n == ((size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24));
        for (size_t i = 0; i < env.n; i++) {
                const DotnetEnvVariable *v = &env.variables[i];

                fuzz_assert(*v->name && !strchr(v->name, '='));
                fuzz_assert(utf8_is_valid(v->name, strlen(v->name)) && utf8_is_valid(v->value, strlen(v->value)));
                replaced = replaced || contains_replacement(v->name) || contains_replacement(v->value);
        }

        r = dotnet_environment_encode(env.variables, env.n, &block, &block_size);
        fuzz_assert(r == 0);
        fuzz_assert(block_size == size || replaced);
        if (!replaced)
                fuzz_assert(memcmp(block, data, size) == 0);
        r = dotnet_environment_decode(block, block_size, &again);
        fuzz_assert(r == 0 && again.n == env.n);
        for (size_t i = 0; i < env.n; i++) {
                fuzz_assert(strcmp(again.variables[i].name, env.variables[i].name) == 0);
                fuzz_assert(strcmp(again.variables[i].value, env.variables[i].value) == 0);
        }
        dotnet_environment_done(&again);
        free(block);
        dotnet_environment_done(&env);
        fuzz_assert(env.n == 0 && !env.variables);
}

static void fuzz_size(const uint8_t *data, size_t size) {
        DotnetIpcResponse reply = { .ok = true, .payload = data, .payload_size = size };
        uint32_t announced = 0;
        int r;

        r = dotnet_ipc_environment_size_decode(&reply, &announced);
        if (r != 0) {
                fuzz_assert(r == DOTNET_IPC_E_MALFORMED || r == DOTNET_IPC_E_TOO_LARGE);
                return;
        }
        fuzz_assert(size == 6 && data[4] == 0 && data[5] == 0);
        fuzz_assert(announced >= 4 && announced <= DOTNET_IPC_ENVIRONMENT_MAX);
        reply.ok = false;
        fuzz_assert(dotnet_ipc_environment_size_decode(&reply, &announced) == DOTNET_IPC_E_MALFORMED);
}

static char upper(char c) {
        return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}

/* The plain definition, every split at each '*' tried, remembered per (pattern, name) position. */
typedef struct Reference {
        const char *pattern, *name;
        signed char known[REFERENCE_PATTERN_MAX + 1][REFERENCE_NAME_MAX + 1]; /* -1: not yet */
} Reference;

static bool reference_at(Reference *ref, size_t pi, size_t ni) {
        const char *p = ref->pattern + pi, *n = ref->name + ni;
        bool result;

        if (ref->known[pi][ni] >= 0)
                return ref->known[pi][ni];
        if (*p == '\0')
                result = *n == '\0';
        else if (*p == '*')
                result = reference_at(ref, pi + 1, ni) ||
                         (*n != '\0' && reference_at(ref, pi, ni + utf8_char_length(n)));
        else if (*n == '\0')
                result = false;
        else if (*p == '?')
                result = reference_at(ref, pi + 1, ni + utf8_char_length(n));
        else
                result = upper(*p) == upper(*n) && reference_at(ref, pi + 1, ni + 1);
        ref->known[pi][ni] = result;
        return result;
}

static bool reference_match(const char *pattern, const char *name) {
        Reference ref = { .pattern = pattern, .name = name };

        memset(ref.known, -1, sizeof(ref.known));
        return reference_at(&ref, 0, 0);
}

static void fuzz_match(const uint8_t *data, size_t size) {
        const uint8_t *nul = memchr(data, '\0', size);
        char *pattern, *name;
        bool matched;

        if (!nul)
                return;
        pattern = strndup((const char *)data, (size_t)(nul - data));
        name = strndup((const char *)nul + 1, size - (size_t)(nul - data) - 1);
        fuzz_assert(pattern && name);

        if (policy_env_pattern_is_valid(pattern)) {
                matched = policy_env_pattern_match(pattern, name);
                /* names come decoded, always valid UTF-8, whose characters have one segmentation */
                if (strlen(pattern) <= REFERENCE_PATTERN_MAX && strlen(name) <= REFERENCE_NAME_MAX &&
                    utf8_is_valid(name, strlen(name)))
                        fuzz_assert(matched == reference_match(pattern, name));
                fuzz_assert(policy_env_pattern_match("*", name));
                if (strcmp(pattern, name) == 0)
                        fuzz_assert(matched);
        }
        free(pattern);
        free(name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;

        switch (data[0] % 3) {
        case 0:
                fuzz_block(data + 1, size - 1);
                break;
        case 1:
                fuzz_size(data + 1, size - 1);
                break;
        case 2:
                fuzz_match(data + 1, size - 1);
                break;
        }
        return 0;
}
