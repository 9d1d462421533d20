/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-env-check: what one env request's secret checks cost the event loop, bounded by
 * POLICY_ENV_CHECK_BUDGET against unbounded (every allow-listed byte a target may send, 256 KiB),
 * on the classifier's worst inputs. Both ways run in one sitting, interleaved; the ratio is what
 * the budget saves. Pure CPU: no agent, no target.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy/policy.h"

#define UNBOUNDED (256u * 1024u) /* the env block's 512 KiB of UTF-16, as ASCII */
#define NAME "DOTNET_EventPipeConfig" /* on the allow list: its values are checked */

static double now_ms(void) {
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int compare_double(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

/* One request's checks: 2 KiB values of @pattern under an allow-listed name until @total bytes are offered. */
static double request_ms(const Policy *p, const PolicyVerdict *v, const char *pattern, size_t total, size_t budget) {
        static char value[2048];
        size_t m = strlen(pattern);
        double start;

        for (size_t i = 0; i < sizeof(value) - 1; i++)
                value[i] = pattern[i % m];
        start = now_ms();
        for (size_t offered = 0; offered < total; offered += sizeof(value) + strlen(NAME))
                (void)policy_env_value_hidden(p, v, NAME, value, &budget);
        return now_ms() - start;
}

int main(int argc, char **argv) {
        /* the classifier's slowest inputs found by hand: a check triggered at every few bytes */
        static const char *const patterns[] = { "'  :", "a=", "://a", " : ", "ab ", "A1a-", "x:y" };
        int rounds = argc > 1 ? atoi(argv[1]) : 21;
        Policy *p = policy_new_builtin();
        PolicyVerdict v = { .allowed = true };
        double worst_bounded = 0, worst_unbounded = 0;

        if (!p || rounds <= 0)
                return 1;
        printf("%-8s %14s %14s %7s\n", "pattern", "bounded ms", "unbounded ms", "ratio");
        for (size_t k = 0; k < sizeof(patterns) / sizeof(patterns[0]); k++) {
                double *b = calloc(rounds, sizeof(double)), *u = calloc(rounds, sizeof(double));

                for (int r = 0; r < rounds; r++) {
                        b[r] = request_ms(p, &v, patterns[k], UNBOUNDED, POLICY_ENV_CHECK_BUDGET);
                        u[r] = request_ms(p, &v, patterns[k], UNBOUNDED, (size_t)-1);
                }
                qsort(b, rounds, sizeof(double), compare_double);
                qsort(u, rounds, sizeof(double), compare_double);
                printf("%-8s %14.2f %14.2f %7.1f\n", patterns[k], b[rounds / 2], u[rounds / 2], u[rounds / 2] / b[rounds / 2]);
                worst_bounded = b[rounds / 2] > worst_bounded ? b[rounds / 2] : worst_bounded;
                worst_unbounded = u[rounds / 2] > worst_unbounded ? u[rounds / 2] : worst_unbounded;
                free(b);
                free(u);
        }
        printf("RESULT rounds=%d worst_bounded_ms=%.2f worst_unbounded_ms=%.2f ratio=%.1f\n", rounds, worst_bounded,
               worst_unbounded, worst_unbounded / worst_bounded);
        policy_unref(p);
        return 0;
}
