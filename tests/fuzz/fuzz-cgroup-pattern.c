/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes the matcher of targets.cgroups (policy_cgroup_pattern_match() and
 * policy_cgroup_pattern_is_valid(), policy/policy.h). The pattern is the
 * policy's; the path is the target's cgroup, named by whoever made it: a
 * container engine, the kubelet, or a user with a delegated subtree, who can
 * choose every component below it.
 *
 * Input: a pattern, a NUL, a path (the rest of the input, up to a NUL).
 *
 * Invariants: for a valid pattern and a path in valid UTF-8, the answer is
 * that of a plain reference (components compared by dynamic programming, no
 * greed); a match still holds for any cgroup below the path; "/""**" matches
 * every path. An invalid pattern (the engine never sees one) and any path
 * are run anyway: nothing may crash, hang or read out of bounds.
 */
#include <stdbool.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "policy/policy.h"
#include "common/text.h"

#define COMPONENTS_MAX 300

typedef struct Parts {
        const char *at[COMPONENTS_MAX];
        size_t len[COMPONENTS_MAX];
        size_t n;
} Parts;

/* The non-empty components between '/'; false when there are too many for the reference. */
static bool split(const char *s, Parts *ret) {
        ret->n = 0;
        while (*s) {
                size_t len = strcspn(s, "/");

                if (len > 0) {
                        if (ret->n == COMPONENTS_MAX)
                                return false;
                        ret->at[ret->n] = s;
                        ret->len[ret->n++] = len;
                }
                s += len + (s[len] == '/');
        }
        return true;
}

/* The bytes of the UTF-8 character led by @c, in a string known to be valid. */
static size_t lead_length(unsigned char c) {
        return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

/* '*' any run, '?' one character, by a table of which suffixes match which. */
static bool reference_component(const char *p, size_t m, const char *s, size_t n) {
        static bool table[(POLICY_CGROUP_PATTERN_MAX + 1) * (4096 + 1)];
#define AT(i, j) table[(i) * (n + 1) + (j)]

        /* AT(i, j): the pattern from i matches the name from j; every cell read is written first */
        for (size_t i = m + 1; i-- > 0;)
                for (size_t j = n + 1; j-- > 0;) {
                        size_t len = j < n ? lead_length((unsigned char)s[j]) : 0;

                        if (i == m)
                                AT(i, j) = j == n;
                        else if (p[i] == '*')
                                AT(i, j) = AT(i + 1, j) || (j < n && AT(i, j + 1));
                        else if (p[i] == '?')
                                AT(i, j) = j < n && j + len <= n && AT(i + 1, j + len);
                        else
                                AT(i, j) = j < n && p[i] == s[j] && AT(i + 1, j + 1);
                }
        return AT(0, 0);
#undef AT
}

static bool is_double_star(const Parts *p, size_t i) {
        return p->len[i] == 2 && p->at[i][0] == '*' && p->at[i][1] == '*';
}

/* The pattern with an unwritten "**" at its end, component by component. */
static bool reference_match(const Parts *pattern, const Parts *path) {
        static bool dp[COMPONENTS_MAX + 1][COMPONENTS_MAX + 1];

        for (size_t i = pattern->n + 1; i-- > 0;)
                for (size_t j = path->n + 1; j-- > 0;) {
                        if (i == pattern->n)
                                dp[i][j] = true;
                        else if (is_double_star(pattern, i))
                                dp[i][j] = dp[i + 1][j] || (j < path->n && dp[i][j + 1]);
                        else
                                dp[i][j] = j < path->n &&
                                           reference_component(pattern->at[i], pattern->len[i], path->at[j],
                                                               path->len[j]) &&
                                           dp[i + 1][j + 1];
                }
        return dp[0][0];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static Parts pattern_parts, path_parts;
        char *pattern, *path, *below;
        size_t pattern_len, path_len;
        bool matched;

        if (size > 4096)
                return 0;
        pattern = malloc(size + 1);
        fuzz_assert(pattern);
        memcpy(pattern, data, size);
        pattern[size] = '\0';
        pattern_len = strlen(pattern);
        path = pattern_len < size ? pattern + pattern_len + 1 : pattern + size;
        path_len = strlen(path);

        matched = policy_cgroup_pattern_match(pattern, path);
        (void)policy_cgroup_pattern_match(path, pattern);
        fuzz_assert(policy_cgroup_pattern_match("/**", path));
        if (!policy_cgroup_pattern_is_valid(pattern) || !utf8_is_valid(path, path_len)) {
                free(pattern);
                return 0;
        }
        fuzz_assert(pattern[0] == '/' && pattern_len <= POLICY_CGROUP_PATTERN_MAX);
        if (split(pattern, &pattern_parts) && split(path, &path_parts))
                fuzz_assert(matched == reference_match(&pattern_parts, &path_parts));

        /* what is below a match matches too */
        below = malloc(path_len + 3);
        fuzz_assert(below);
        memcpy(below, path, path_len);
        memcpy(below + path_len, "/x", 3);
        if (matched)
                fuzz_assert(policy_cgroup_pattern_match(pattern, below));
        free(below);
        free(pattern);
        return 0;
}
