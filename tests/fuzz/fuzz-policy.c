/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes the policy compiler (policy/policy-compile.h) behind the TOML parser: every table and key of
 * a policy ([agent], [[rule]], [[port]], [[on_start]], [[collect]] with its when.counter selector, [egress.NAME]
 * with its endpoint and credentials location, and the egress names rules and tables give), and
 * the matchers of [[collect]] tables. Policy files are root's, but a policy.d drop-in is often written
 * by a deployment tool from values others chose (a ConfigMap, a team's counter names): whatever they
 * hold must not crash the agent, make it read out of bounds or spin.
 *
 * Input: a TOML document; the part after the first NUL, if any, is a counter sample's
 * "provider\nname\ntags" and an exception type, one a line, for the matchers.
 *
 * Invariants: the result is 0 or POLICY_E_INVALID; a refused document has at least one message,
 * each "policy.toml:LINE:COLUMN: text" with LINE and COLUMN from 1; a compiled policy's [[collect]]
 * tables are whole (a name, a file, the keys of their trigger and action, a line to cross that some value
 * can, a limit of at least one); its egress stores are whole and every egress name points at its store;
 * a counter table matches its own provider and name with its own tags, an exception table its own
 * type, and neither matches the other's kind.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "policy/policy-compile.h"
#include "policy/toml.h"

/* Every name resolves, so that the fuzzer reaches past readers and targets.users; "nobody" does not. */
static int any_user(const char *name, uid_t *ret, void *userdata) {
        if (strcmp(name, "nobody") == 0)
                return -ENOENT;
        *ret = (uid_t)(strlen(name) + 1000);
        return 0;
}

static int any_group(const char *name, gid_t *ret, void *userdata) {
        return any_user(name, (uid_t *)ret, userdata);
}

static void check_message(const char *m) {
        unsigned line = 0, column = 0;
        int n = 0;

        fuzz_assert(sscanf(m, "policy.toml:%u:%u: %n", &line, &column, &n) == 2 && n > 0);
        fuzz_assert(line >= 1 && column >= 1 && m[n] != '\0');
}

/* A table's own sample, rebuilt from what it compiled to, must match it. */
static void check_collect(const PolicyCollect *c) {
        char tags[POLICY_COLLECT_TAGS_MAX * (2 * 256 + 2) + 1] = "";
        size_t n = 0;

        fuzz_assert(c->name && c->file && c->line >= 1 && c->limit.count >= 1 && c->limit.period_usec > 0);
        switch (c->when) {
        case POLICY_COLLECT_WHEN_COUNTER:
                fuzz_assert(c->counter_provider && c->counter_name && !c->exception_type);
                fuzz_assert(c->n_counter_tags <= POLICY_COLLECT_TAGS_MAX);
                fuzz_assert(c->has_above || c->has_below);
                fuzz_assert(!(c->has_above && c->has_below) || c->above < c->below);
                for (size_t i = 0; i < c->n_counter_tags; i++)
                        n += (size_t)snprintf(tags + n, sizeof(tags) - n, "%s%s=%s", i ? "," : "",
                                              c->counter_tags[i].key, c->counter_tags[i].value);
                fuzz_assert(n < sizeof(tags));
                fuzz_assert(policy_collect_counter_matches(c, c->counter_provider, c->counter_name, tags));
                fuzz_assert(!policy_collect_exception_matches(c, c->counter_name));
                break;
        case POLICY_COLLECT_WHEN_EXCEPTION:
                fuzz_assert(c->exception_type && c->exception_count >= 1 && !c->counter_provider);
                fuzz_assert((c->exception_count == 1) == (c->within_usec == 0));
                fuzz_assert(policy_collect_exception_matches(c, c->exception_type));
                fuzz_assert(!policy_collect_counter_matches(c, c->exception_type, c->exception_type, NULL));
                break;
        default:
                fuzz_assert(!"a trigger");
        }
        switch (c->then) {
        case POLICY_COLLECT_THEN_DUMP:
                fuzz_assert(c->dump_type > POLICY_DUMP_NONE && c->dump_type < _POLICY_DUMP_MAX);
                break;
        case POLICY_COLLECT_THEN_STACKS:
        case POLICY_COLLECT_THEN_GCDUMP:
                fuzz_assert(!c->trace_profile && c->duration_usec == 0);
                break;
        case POLICY_COLLECT_THEN_TRACE:
                fuzz_assert(c->trace_profile && c->duration_usec > 0);
                break;
        case POLICY_COLLECT_THEN_COUNTERS:
                fuzz_assert(!c->trace_profile && c->duration_usec > 0);
                fuzz_assert(c->counters_providers.n >= 1 && c->counters_providers.n <= POLICY_COLLECT_COUNTERS_MAX);
                break;
        default:
                fuzz_assert(!"an action");
        }
}

/* The matchers on the sample after the NUL: "provider\nname\ntags\nexception". */
static void match_sample(const Policy *p, const char *sample) {
        char *copy = strdup(sample), *lines[4] = {}, *next = copy;

        fuzz_assert(copy);
        for (size_t i = 0; i < 4 && next; i++) {
                lines[i] = strsep(&next, "\n");
        }
        for (size_t i = 0; i < p->n_collect; i++) {
                (void)policy_collect_counter_matches(&p->collect[i], lines[0], lines[1], lines[2]);
                (void)policy_collect_exception_matches(&p->collect[i], lines[3]);
        }
        free(copy);
}

/* A compiled policy's egress names each point at the store of that name, and each store is whole. */
static void check_egress(const Policy *p) {
        for (size_t i = 0; i < p->n_egress; i++) {
                const PolicyEgress *e = &p->egress[i];

                fuzz_assert(e->name && e->endpoint && e->bucket && e->region && e->credentials && e->prefix);
                fuzz_assert(policy_egress_find(p, e->name) == e);
                fuzz_assert(policy_egress_prefix_is_valid(e->prefix));
                fuzz_assert(e->part_size >= POLICY_EGRESS_PART_MIN && e->attempts >= 1);
        }
        for (size_t i = 0; i < p->n_rules; i++)
                fuzz_assert(!p->rules[i].egress_name ||
                            p->rules[i].egress == policy_egress_find(p, p->rules[i].egress_name));
        for (size_t i = 0; i < p->n_collect; i++)
                fuzz_assert((p->collect[i].egress_name != NULL) == (p->collect[i].egress != NULL));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const PolicyResolver resolver = { .user = any_user, .group = any_group };
        const char *nul = memchr(data, '\0', size);
        size_t doc_size = nul ? (size_t)(nul - (const char *)data) : size;
        PolicyDiagnostics d = {};
        TomlValue *root = NULL;
        Policy *p = NULL;
        TomlError e;
        char *sample;
        int r;

        if (toml_parse((const char *)data, doc_size, &root, &e) != 0)
                return 0;
        r = policy_compile(&(PolicySource){ .path = "policy.toml", .root = root, .is_main = true }, 1, &resolver, &p,
                           &d);
        fuzz_assert(r == 0 || r == POLICY_E_INVALID);
        fuzz_assert((r == 0) == (p != NULL));
        fuzz_assert(r == 0 ? d.n == 0 : d.n > 0);
        for (size_t i = 0; i < d.n; i++)
                check_message(d.messages[i]);
        if (p) {
                for (size_t i = 0; i < p->n_collect; i++)
                        check_collect(&p->collect[i]);
                check_egress(p);
                if (nul) {
                        sample = strndup(nul + 1, size - doc_size - 1);
                        fuzz_assert(sample);
                        match_sample(p, sample);
                        free(sample);
                }
        }
        policy_unref(p);
        policy_diagnostics_done(&d);
        toml_value_free(root);
        return 0;
}
