/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes what env shows of a variable: env_name_looks_secret() and env_value_looks_secret()
 * (policy/env-secret.h) and policy_env_value_hidden() (policy/policy.h) under the built-in
 * policy. Both name and value are the target's: its owner chooses its environment.
 *
 * Input: a name, a NUL, a value (the rest of the input, up to a NUL).
 *
 * Invariants: a value that looks secret is hidden whatever its name, and so is a name that
 * looks secret; under env_reveal nothing is; a secret marker put before or after any value
 * ("Password=x;", "u:p@h ", "-----BEGIN", "eyJ..." JWT, a UUID, "x-api-key: v", "user:Winter2025!",
 * eight digits, a base32 seed, a token of letters and digits) makes it look secret. Nothing may
 * crash, hang or read out of bounds, whatever the bytes.
 */
#include <stdbool.h>
#include <string.h>

#include "policy/env-secret.h"
#include "tests/fuzz/fuzz.h"
#include "policy/policy.h"

#define INPUT_MAX (64u * 1024u)

static const char *const markers[] = {
        "Password=x;", "u:p@h ", "-----BEGIN ", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkw.",
        " sig=x", "AKIAIOSFODNN7EXAMPLE ",
        /* issue 35: a UUID, a header, a login, a passcode, a base32 seed, a token of letters and digits */
        "6f1c2d3e-4b5a-6978-8796-a5b4c3d2e1f0", " x-api-key: v ", " user:Winter2025! ", " 48213907 ",
        " JBSWY3DPEHPK3PXP ", " 3f9a2b7c1d5e4f60 ",
};

/* @marker then @value, and @value then @marker (after a space): both must look secret. */
static void check_marked(const char *value, size_t n) {
        static char buf[INPUT_MAX + 128];

        for (size_t i = 0; i < sizeof(markers) / sizeof(markers[0]); i++) {
                size_t m = strlen(markers[i]);

                memcpy(buf, markers[i], m);
                memcpy(buf + m, value, n + 1);
                fuzz_assert(env_value_looks_secret(buf));
                memcpy(buf, value, n);
                buf[n] = ' ';
                memcpy(buf + n + 1, markers[i], m + 1);
                fuzz_assert(env_value_looks_secret(buf));
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static char input[INPUT_MAX + 2];
        static Policy *builtin;
        PolicyVerdict redacting = { .allowed = true }, revealing = { .allowed = true, .env_reveal = true };
        const char *name, *value;
        bool secret_name, secret_value, hidden;

        if (size > INPUT_MAX)
                return 0;
        if (!builtin)
                builtin = policy_new_builtin();
        fuzz_assert(builtin);
        memcpy(input, data, size);
        input[size] = '\0';
        input[size + 1] = '\0';
        name = input;
        value = input + strlen(input) + 1; /* the second NUL when there is no first one within */

        secret_name = env_name_looks_secret(name);
        secret_value = env_value_looks_secret(value);
        hidden = policy_env_value_hidden(builtin, &redacting, name, value, &(size_t){ POLICY_ENV_CHECK_BUDGET });
        fuzz_assert(!secret_name || hidden);
        fuzz_assert(!secret_value || hidden);
        fuzz_assert(hidden || policy_env_name_shown_by_default(name));
        fuzz_assert(!policy_env_value_hidden(builtin, &revealing, name, value, &(size_t){ 0 }));
        check_marked(value, strlen(value));
        return 0;
}
