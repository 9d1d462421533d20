/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes egress_credentials_parse() (agent/egress/egress-credentials.h): an egress store's keys file, TOML
 * (policy/toml.c) with access_key_id, secret_access_key and an optional session_token. The file is root's,
 * but its words are secrets: whatever is wrong with it, no message may hold a byte of what it says.
 *
 * Input: the file's text.
 *
 * Invariants:
 * - a refusal's words are one of the parser's fixed sentences, whose only variable parts are a known key's
 *   name and numbers no larger than the file (a line, a column) or the documented length bounds: so no value
 *   of the file, and no key name of it but the three known ones, can be in a message; they are NUL-terminated
 *   and fit the buffer given, even a short one; *@ret is untouched;
 * - what is accepted is exactly what toml_parse() reads from the same text: the three keys at the top level
 *   and nothing else, each a string of 1 to EGRESS_KEY_MAX (the token: EGRESS_TOKEN_MAX) printable ASCII
 *   characters without a space, the two keys present; egress_credentials_done() frees and clears it all
 *   (LeakSanitizer checks the freeing).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/egress/egress-credentials.h"
#include "policy/toml.h"
#include "tests/fuzz/fuzz.h"

#define INPUT_MAX (EGRESS_CREDENTIALS_FILE_MAX + 1)

/* the sentences a refusal may be, numbers written '#' */
static const char *const sentences[] = {
        "not TOML at line #, column #",
        "an unknown key at line #, column # (access_key_id, secret_access_key, session_token)",
        "'access_key_id' must be a string of # to # printable ASCII characters without spaces",
        "'secret_access_key' must be a string of # to # printable ASCII characters without spaces",
        "'session_token' must be a string of # to # printable ASCII characters without spaces",
        "'access_key_id' is missing",
        "'secret_access_key' is missing",
};

/* @why with each run of digits written '#', each number at most @number_max */
static bool is_a_sentence(const char *why, unsigned long number_max) {
        char shape[512], *p = shape;

        for (const char *c = why; *c; c++) {
                if (p >= shape + sizeof(shape) - 1)
                        return false;
                if (*c >= '0' && *c <= '9') {
                        char *end;
                        if (strtoul(c, &end, 10) > number_max || end - c > 9)
                                return false;
                        c = end - 1;
                        *p++ = '#';
                } else
                        *p++ = *c;
        }
        *p = '\0';
        for (size_t i = 0; i < sizeof(sentences) / sizeof(sentences[0]); i++)
                if (strcmp(shape, sentences[i]) == 0)
                        return true;
        return false;
}

static bool printable(const char *s, size_t max) {
        size_t n = strlen(s);

        if (n < 1 || n > max)
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] <= ' ' || s[i] > '~')
                        return false;
        return true;
}

/* the top-level string called @key of @root, if it is one */
static const char *top_string(const TomlValue *root, const char *key) {
        for (size_t i = 0; i < root->table.n_entries; i++)
                if (strcmp(root->table.entries[i].key, key) == 0)
                        return root->table.entries[i].value->type == TOML_STRING
                                       ? root->table.entries[i].value->string.data
                                       : NULL;
        return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const EgressCredentials untouched = { (char *)"a", (char *)"b", (char *)"c" };
        EgressCredentials c = untouched;
        char why[256], short_why[12];
        TomlValue *root = NULL;
        TomlError error = {};
        unsigned long number_max = size + 1 > EGRESS_TOKEN_MAX ? size + 1 : EGRESS_TOKEN_MAX;
        int r;

        if (size > INPUT_MAX)
                return 0;
        memset(why, 0xff, sizeof(why));
        r = egress_credentials_parse((const char *)data, size, &c, why, sizeof(why));
        fuzz_assert(r == 0 || r == EGRESS_CREDENTIALS_E_INVALID || r == -ENOMEM);
        if (r != 0) {
                fuzz_assert(memcmp(&c, &untouched, sizeof(c)) == 0);
                if (r > 0) {
                        fuzz_assert(memchr(why, '\0', sizeof(why)));
                        if (!is_a_sentence(why, number_max)) {
                                fprintf(stderr, "not one of the sentences: \"%s\"\n", why);
                                fuzz_assert(!"a refusal said something of its own");
                        }
                        /* a short buffer gets a cut sentence, never more */
                        memset(short_why, 0xff, sizeof(short_why));
                        fuzz_assert(egress_credentials_parse((const char *)data, size, &c, short_why,
                                                             sizeof(short_why)) == r);
                        fuzz_assert(memchr(short_why, '\0', sizeof(short_why)) &&
                                    strncmp(short_why, why, sizeof(short_why) - 1) == 0);
                }
                return 0;
        }

        /* what was taken is what the TOML says, and of the allowed shape */
        fuzz_assert(toml_parse((const char *)data, size, &root, &error) == 0);
        for (size_t i = 0; i < root->table.n_entries; i++) {
                const char *k = root->table.entries[i].key;
                fuzz_assert(strcmp(k, "access_key_id") == 0 || strcmp(k, "secret_access_key") == 0 ||
                            strcmp(k, "session_token") == 0);
        }
        fuzz_assert(c.access_key_id && printable(c.access_key_id, EGRESS_KEY_MAX));
        fuzz_assert(c.secret_access_key && printable(c.secret_access_key, EGRESS_KEY_MAX));
        fuzz_assert(!c.session_token || printable(c.session_token, EGRESS_TOKEN_MAX));
        fuzz_assert(top_string(root, "access_key_id") && strcmp(top_string(root, "access_key_id"), c.access_key_id) == 0);
        fuzz_assert(top_string(root, "secret_access_key") &&
                    strcmp(top_string(root, "secret_access_key"), c.secret_access_key) == 0);
        fuzz_assert(!top_string(root, "session_token") == !c.session_token);
        fuzz_assert(!c.session_token || strcmp(top_string(root, "session_token"), c.session_token) == 0);
        toml_value_free(root);
        egress_credentials_done(&c);
        fuzz_assert(!c.access_key_id && !c.secret_access_key && !c.session_token);
        return 0;
}
