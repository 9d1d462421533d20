/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of agent/egress/egress-name.c: the key's layout, hostile process names, the prefix's rules */
#include <string.h>

#include "agent/egress/egress-name.h"
#include "tests/unit/tap.h"

static const EgressNameParts example = {
        .prefix = "prod/",
        .host = "node-7",
        .unit = "orders.service",
        .container = "0123456789ab",
        .type = "dump",
        .process = "Orders.Api",
        .pid = 4711,
        .time_usec = UINT64_C(1795955696) * 1000000 + 999999, /* 2026-11-29T12:34:56.999999Z */
        .request_id = "9f2c41aa",
        .extension = "dmp",
};

static char *key_of(const EgressNameParts *p) {
        char *key = NULL;
        return egress_object_key(p, &key) == 0 ? key : NULL;
}

static void test_layout(void) {
        EgressNameParts p = example;
        char *key = key_of(&p);

        check(key && strcmp(key, "prod/node-7/orders.service/dump/2026/11/29/Orders.Api-4711-20261129T123456Z-9f2c41aa.dmp") == 0);
        free(key);
        /* no unit: the container; neither: "host"; no prefix */
        p.unit = "";
        p.prefix = "";
        key = key_of(&p);
        check(key && strcmp(key, "node-7/0123456789ab/dump/2026/11/29/Orders.Api-4711-20261129T123456Z-9f2c41aa.dmp") == 0);
        free(key);
        p.container = NULL;
        key = key_of(&p);
        check(key && strncmp(key, "node-7/host/dump/", 17) == 0);
        free(key);
}

/* what a process's owner can name it: never a '/', never a "." or ".." segment, never longer than the bound */
static void test_hostile_names(void) {
        static const char *const names[] = { "../../etc/passwd", "a/b", ".", "..", "", "\n\r\t", "caf\xc3\xa9",
                                              "x%2Fy", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" };
        EgressNameParts p = example;

        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                char *key;
                p.process = names[i];
                p.unit = names[i]; /* a unit's name is the user's too, for a user's own manager */
                p.host = names[i];
                key = key_of(&p);
                check(key);
                if (!key)
                        continue;
                printf("# %s\n", key);
                /* exactly the prefix's and the layout's slashes */
                size_t slashes = 0;
                for (const char *c = key; *c; c++)
                        slashes += *c == '/';
                check(slashes == 7);
                check(!strstr(key, "/../") && !strstr(key, "/./") && !strstr(key, "//"));
                check(strspn(key, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-/") == strlen(key));
                check(strlen(key) < 5 * (EGRESS_NAME_PART_MAX + 1) + 64);
                free(key);
        }
        p = example;
        p.process = "../../etc";
        char *key = key_of(&p);
        check(key && strstr(key, "/29/.._.._etc-4711-"));
        free(key);
}

static void test_prefix_rules(void) {
        static const char *const bad[] = { "prod", "/prod/", "prod//", "./", "../", "a/../", "a b/", "caf\xc3\xa9/" };
        static const char *const good[] = { "", "prod/", "a/b/", "..a/", "a.b-c_d/" };
        EgressNameParts p = example;
        char *key = NULL;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                p.prefix = bad[i];
                check(egress_object_key(&p, &key) == -EINVAL);
        }
        check(key == NULL);
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                p.prefix = good[i];
                key = key_of(&p);
                check(key && strncmp(key, good[i], strlen(good[i])) == 0);
                free(key);
        }
        p = example;
        p.request_id = "";
        check(egress_object_key(&p, &key) == -EINVAL);
}

static void test_too_long(void) {
        char prefix[1100];
        EgressNameParts p = example;
        char *key = NULL;

        memset(prefix, 'a', sizeof(prefix) - 2);
        prefix[sizeof(prefix) - 2] = '/';
        prefix[sizeof(prefix) - 1] = '\0';
        p.prefix = prefix;
        check(egress_object_key(&p, &key) == -E2BIG && key == NULL);
}

int main(void) {
        run_test(test_layout);
        run_test(test_hostile_names);
        run_test(test_prefix_rules);
        run_test(test_too_long);
        return tap_finish();
}
