/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes egress_object_key() (agent/egress/egress-name.h): the object key an uploaded artifact is stored
 * under, built from the target's process name (its owner's to choose), its unit or container (whoever names
 * its cgroup), the node's name and the policy's prefix.
 *
 * Input: 4 bytes pid (little endian), 8 bytes time in microseconds, then up to eight fields separated by
 * NULs: prefix, host, unit, container, type, process, request id, extension. A missing field is NULL; a NULL
 * unit or container is "none".
 *
 * Invariants: a key is refused with -EINVAL exactly when the prefix breaks policy_egress_prefix_is_valid() or
 * type, request id or extension is missing, and with -E2BIG exactly when it would be longer than
 * EGRESS_KEY_MAX; @ret_key is set only on success. A key is the prefix, then exactly seven more segments
 * (host, scope, type, year, month, day, the file), each of the key alphabet, none empty, "." or ".."; each
 * part equals a reference reduction of its field (the alphabet, EGRESS_NAME_PART_MAX bytes, "_" for empty or
 * dots only); the scope is the unit, else the container, else "host"; the date is the time's, in UTC.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "agent/egress/egress-name.h"
#include "policy/policy.h"
#include "tests/fuzz/fuzz.h"

#define INPUT_MAX 4096
#define N_FIELDS 8

/* the reference reduction of a field to a key part, written apart from egress-name.c's */
static void reference_part(const char *s, char *out) {
        size_t n = 0, dots = 0;

        while (s && s[n] && n < EGRESS_NAME_PART_MAX) {
                out[n] = policy_egress_key_char(s[n]) ? s[n] : '_';
                dots += out[n] == '.';
                n++;
        }
        out[n] = '\0';
        if (n == dots)
                strcpy(out, "_");
}

static bool segment_safe(const char *s, size_t n) {
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!policy_egress_key_char(s[i]))
                        return false;
        return true;
}

static bool missing(const char *s) {
        return !s || !*s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static char input[INPUT_MAX + 1];
        const char *fields[N_FIELDS] = {};
        char host[EGRESS_NAME_PART_MAX + 1], scope[EGRESS_NAME_PART_MAX + 1], type[EGRESS_NAME_PART_MAX + 1],
                process[EGRESS_NAME_PART_MAX + 1], request[EGRESS_NAME_PART_MAX + 1],
                extension[EGRESS_NAME_PART_MAX + 1], day[32], stamp[40], expected[4 * EGRESS_KEY_MAX];
        EgressNameParts parts;
        char *key = (char *)"untouched";
        uint32_t pid;
        uint64_t usec;
        time_t seconds;
        struct tm tm;
        size_t n_fields = 0, at = 12;
        int r, n;

        if (size < 12 || size > INPUT_MAX)
                return 0;
        memcpy(&pid, data, 4);
        memcpy(&usec, data + 4, 8);
        memcpy(input, data, size);
        input[size] = '\0';
        while (at <= size && n_fields < N_FIELDS) {
                fields[n_fields++] = input + at;
                at += strlen(input + at) + 1;
        }
        parts = (EgressNameParts){ .prefix = fields[0], .host = fields[1], .unit = fields[2], .container = fields[3],
                                   .type = fields[4], .process = fields[5], .request_id = fields[6],
                                   .extension = fields[7], .pid = pid, .time_usec = usec };

        r = egress_object_key(&parts, &key);
        if (!parts.prefix || !policy_egress_prefix_is_valid(parts.prefix) || missing(parts.type) ||
            missing(parts.request_id) || missing(parts.extension)) {
                fuzz_assert(r == -EINVAL);
                fuzz_assert(strcmp(key, "untouched") == 0);
                return 0;
        }

        /* the key the layout says, from the reference reduction */
        seconds = (time_t)(usec / 1000000);
        fuzz_assert(gmtime_r(&seconds, &tm));
        fuzz_assert(strftime(day, sizeof(day), "%Y/%m/%d", &tm) > 0);
        fuzz_assert(strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm) > 0);
        reference_part(parts.host, host);
        reference_part(!missing(parts.unit) ? parts.unit : !missing(parts.container) ? parts.container : "host",
                       scope);
        reference_part(parts.type, type);
        reference_part(parts.process, process);
        reference_part(parts.request_id, request);
        reference_part(parts.extension, extension);
        n = snprintf(expected, sizeof(expected), "%s%s/%s/%s/%s/%s-%" PRIu32 "-%s-%s.%s", parts.prefix, host, scope,
                     type, day, process, pid, stamp, request, extension);
        fuzz_assert(n > 0 && (size_t)n < sizeof(expected));

        if (n > EGRESS_KEY_MAX) {
                fuzz_assert(r == -E2BIG);
                fuzz_assert(strcmp(key, "untouched") == 0);
                return 0;
        }
        fuzz_assert(r == 0);
        fuzz_assert(strcmp(key, expected) == 0);

        /* whatever the fields, the key's segments after the prefix are seven safe ones */
        {
                const char *segment = key + strlen(parts.prefix);
                unsigned n_segments = 0;

                for (const char *c = segment;; c++)
                        if (*c == '/' || *c == '\0') {
                                fuzz_assert(segment_safe(segment, (size_t)(c - segment)));
                                n_segments++;
                                if (!*c)
                                        break;
                                segment = c + 1;
                        }
                fuzz_assert(n_segments == 7);
        }
        free(key);
        return 0;
}
