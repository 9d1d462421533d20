/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of agent/egress/egress-credentials.c's parser: the keys taken, every refusal, and no value in a word */
#include <string.h>

#include "agent/egress/egress-credentials.h"
#include "common/cleanup.h"
#include "tests/unit/tap.h"

#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

static void test_keys_taken(void) {
        static const char text[] = "access_key_id = \"AKIAIOSFODNN7EXAMPLE\"\nsecret_access_key = \"" SECRET "\"\n";
        static const char with_token[] = "secret_access_key = \"" SECRET "\"\nsession_token = \"FwoG+Z/x==\"\n"
                                         "access_key_id = \"ASIA0\"\n";
        EgressCredentials c = {};
        char why[256] = "";

        check(egress_credentials_parse(text, strlen(text), &c, why, sizeof(why)) == 0);
        check(c.access_key_id && strcmp(c.access_key_id, "AKIAIOSFODNN7EXAMPLE") == 0);
        check(c.secret_access_key && strcmp(c.secret_access_key, SECRET) == 0 && !c.session_token);
        egress_credentials_done(&c);
        check(!c.access_key_id && !c.secret_access_key);
        check(egress_credentials_parse(with_token, strlen(with_token), &c, why, sizeof(why)) == 0);
        check(c.session_token && strcmp(c.session_token, "FwoG+Z/x==") == 0 && strcmp(c.access_key_id, "ASIA0") == 0);
        egress_credentials_done(&c);
}

/* each refused, with words that name a key or a place, never a value (nor a key name, which may be a pasted secret) */
static void test_refusals(void) {
        static const struct { const char *text, *words; } bad[] = {
                { "AKIAIOSFODNN7EXAMPLE:" SECRET "\n", "not TOML at line 1" },
                { "access_key_id = \"A\"\n", "'secret_access_key' is missing" },
                { "secret_access_key = \"" SECRET "\"\n", "'access_key_id' is missing" },
                { "access_key_id = \"A\"\nsecret_access_key = \"" SECRET "\"\nregion = \"x\"\n",
                  "an unknown key at line 3, column 1" },
                { "access_key_id = \"A\"\nsecret_access_key = \"" SECRET "\"\nwJalrXUtnFEMI = \"x\"\n",
                  "an unknown key at line 3, column 1" },
                { "access_key_id = \"A\"\nsecret_access_key = \"has space\"\n", "'secret_access_key' must be a string" },
                { "access_key_id = \"A\"\nsecret_access_key = \"\"\n", "'secret_access_key' must be a string" },
                { "access_key_id = 1\nsecret_access_key = \"" SECRET "\"\n", "'access_key_id' must be a string" },
                { "access_key_id = \"A\\u0000B\"\nsecret_access_key = \"" SECRET "\"\n", "'access_key_id' must be" },
                { "access_key_id = \"A\"\nsecret_access_key = \"\\u00e9" SECRET "\"\n", "'secret_access_key' must be" },
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                EgressCredentials c = {};
                char why[256] = "";
                int r = egress_credentials_parse(bad[i].text, strlen(bad[i].text), &c, why, sizeof(why));

                check(r == EGRESS_CREDENTIALS_E_INVALID);
                check(strstr(why, bad[i].words) != NULL);
                check(!strstr(why, "wJalrXUtnFEMI") && !strstr(why, "AKIA"));
                check(!c.access_key_id && !c.secret_access_key && !c.session_token);
                if (!strstr(why, bad[i].words))
                        printf("# case %zu: %s\n", i, why);
        }
}

int main(void) {
        run_test(test_keys_taken);
        run_test(test_refusals);
        return tap_finish();
}
