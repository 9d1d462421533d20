/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Object keys of uploaded artifacts (egress-name.h). Every part that comes from a target is copied through one
 * filter (safe_part): the key alphabet, a length bound, and no part that is empty or dots only.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cleanup.h"
#include "agent/egress/egress-name.h"
#include "policy/policy.h"

/* @s reduced to the key alphabet and EGRESS_NAME_PART_MAX bytes into @out; "_" for nothing or dots only */
static void safe_part(const char *s, char out[EGRESS_NAME_PART_MAX + 1]) {
        size_t n = 0;
        bool dots_only = true;

        for (; s && s[n] && n < EGRESS_NAME_PART_MAX; n++) {
                out[n] = policy_egress_key_char(s[n]) ? s[n] : '_';
                dots_only &= out[n] == '.';
        }
        out[n] = '\0';
        if (n == 0 || dots_only)
                strcpy(out, "_");
}

static bool empty(const char *s) {
        return !s || !*s;
}

int egress_object_key(const EgressNameParts *p, char **ret_key) {
        char host[EGRESS_NAME_PART_MAX + 1], scope[EGRESS_NAME_PART_MAX + 1], type[EGRESS_NAME_PART_MAX + 1],
                process[EGRESS_NAME_PART_MAX + 1], request[EGRESS_NAME_PART_MAX + 1],
                extension[EGRESS_NAME_PART_MAX + 1], day[16], stamp[24];
        time_t seconds = (time_t)(p->time_usec / 1000000);
        _cleanup_free_ char *key = NULL;
        struct tm tm;
        int n;

        if (!p->prefix || !policy_egress_prefix_is_valid(p->prefix) || empty(p->type) || empty(p->request_id) || empty(p->extension) ||
            !gmtime_r(&seconds, &tm))
                return -EINVAL;
        safe_part(p->host, host);
        safe_part(!empty(p->unit) ? p->unit : !empty(p->container) ? p->container : "host", scope);
        safe_part(p->type, type);
        safe_part(p->process, process);
        safe_part(p->request_id, request);
        safe_part(p->extension, extension);
        strftime(day, sizeof(day), "%Y/%m/%d", &tm);
        strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);

        n = asprintf(&key, "%s%s/%s/%s/%s/%s-%" PRIu32 "-%s-%s.%s", p->prefix, host, scope, type, day, process, p->pid,
                     stamp, request, extension);
        if (n < 0)
                return -ENOMEM;
        if (n > EGRESS_KEY_MAX)
                return -E2BIG;
        *ret_key = TAKE_PTR(key);
        return 0;
}
