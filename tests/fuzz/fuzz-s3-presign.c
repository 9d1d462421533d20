/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes s3_presign_get() and s3_uri_encode() (agent/egress/s3-presign.h): the presigned GET URL a requester
 * is handed, built from the policy's endpoint, bucket and region, the artifact's key (which holds names its
 * target's owner chose) and the store's keys.
 *
 * Input: a flags byte (bit 0: path style, bit 1: a session token), 8 bytes of time (seconds, little endian),
 * 4 bytes of expiry, then NUL-separated fields: endpoint, bucket, key, region, access key id, secret key,
 * session token. A missing field is "".
 *
 * Invariants:
 * - refusals are exactly the documented ones: an endpoint that is not http[s]://AUTHORITY[/] with AUTHORITY of
 *   A-Z a-z 0-9 . - : [ ], an empty key, region or key id, a bucket not of a-z 0-9 . - with a letter or
 *   digit at each end (it may be part of the host), a key with a "." or ".." segment (a client would remove it before asking), a time outside the years
 *   1970-9999, an expiry out of range; @ret_url is set only on success;
 * - a URL is printable ASCII without a space: nothing raw of any field (no control byte, space, '#', or a
 *   second '?');
 * - it reads back: the scheme and host of the endpoint (bucket.host in virtual-host style), a path that
 *   decodes to /bucket/key or /key, the query's parameters in SigV4's order, the credential decoding to
 *   KEYID/DATE/REGION/s3/aws4_request, the token decoding to the token, a signature of 64 hex digits;
 * - the secret is never in it: the same request with another secret gives the same URL but for the
 *   signature, which differs; a secret of 8 bytes or more appears in the URL only where it appears in the URL
 *   signed with another secret (that is, through another field);
 * - s3_uri_encode() decodes back to its input and leaves only the unreserved bytes (and '/', when kept).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/egress/s3-presign.h"
#include "tests/fuzz/fuzz.h"

#define INPUT_MAX 8192
#define N_FIELDS 7

static const char unreserved[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~";

/* %XX-decodes @n bytes of @s into a new string; NULL on a malformed escape or a raw byte that needed one */
static char *decode(const char *s, size_t n, bool slash_raw) {
        char *out = malloc(n + 1), *p = out;

        fuzz_assert(out);
        for (size_t i = 0; i < n; i++) {
                unsigned byte;

                if (s[i] != '%') {
                        if (!(s[i] && strchr(unreserved, s[i])) && !(slash_raw && s[i] == '/')) {
                                free(out);
                                return NULL;
                        }
                        *p++ = s[i];
                        continue;
                }
                if (i + 2 >= n) {
                        free(out);
                        return NULL;
                }
                if (sscanf(s + i + 1, "%2X", &byte) != 1 || !strchr("0123456789ABCDEF", s[i + 1]) ||
                    !strchr("0123456789ABCDEF", s[i + 2])) {
                        free(out);
                        return NULL;
                }
                *p++ = (char)byte;
                i += 2;
        }
        *p = '\0';
        return out;
}

static bool authority_valid(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-:[]", s[i]) || !s[i])
                        return false;
        return n > 0;
}

/* a "." or ".." segment: "/./" or "/../" in the key between slashes (a reference apart from s3-presign.c's walk) */
static bool key_has_dot_segment(const char *key) {
        char *framed;
        bool found;

        fuzz_assert(asprintf(&framed, "/%s/", key) > 0);
        found = strstr(framed, "/./") || strstr(framed, "/../");
        free(framed);
        return found;
}

/* what s3_presign_get() must accept; @ret_scheme_size and @ret_authority* say where they are in the endpoint */
static bool request_valid(const S3PresignRequest *q, size_t *ret_scheme_size, const char **ret_authority,
                          size_t *ret_authority_size) {
        const char *sep = strstr(q->endpoint, "://"), *authority;
        size_t scheme_size, n, bucket_size;
        struct tm tm;

        if (!sep)
                return false;
        scheme_size = (size_t)(sep - q->endpoint);
        if (!((scheme_size == 4 && strncmp(q->endpoint, "http", 4) == 0) ||
              (scheme_size == 5 && strncmp(q->endpoint, "https", 5) == 0)))
                return false;
        authority = sep + 3;
        n = strcspn(authority, "/");
        if (!authority_valid(authority, n) || (authority[n] && strcmp(authority + n, "/") != 0))
                return false;
        if (!*q->bucket || !*q->key || !*q->region || !*q->access_key || key_has_dot_segment(q->key))
                return false;
        bucket_size = strlen(q->bucket);
        if (strspn(q->bucket, "abcdefghijklmnopqrstuvwxyz0123456789.-") != bucket_size ||
            strchr(".-", q->bucket[0]) || strchr(".-", q->bucket[bucket_size - 1]))
                return false;
        if (q->expires_seconds < 1 || q->expires_seconds > S3_PRESIGN_EXPIRES_MAX || !gmtime_r(&q->now, &tm) ||
            tm.tm_year < 70 || tm.tm_year > 9999 - 1900)
                return false;
        *ret_scheme_size = scheme_size;
        *ret_authority = authority;
        *ret_authority_size = n;
        return true;
}

/* the URL without its signature: everything before "&X-Amz-Signature=" */
static size_t unsigned_part(const char *url) {
        const char *s = strstr(url, "&X-Amz-Signature=");

        fuzz_assert(s && strlen(s) == strlen("&X-Amz-Signature=") + 64);
        for (const char *h = s + strlen("&X-Amz-Signature="); *h; h++)
                fuzz_assert(strchr("0123456789abcdef", *h));
        return (size_t)(s - url);
}

/* expects @prefix at *@at, then a value up to '&' (or the end) that decodes to @expected (NULL: any) */
static void expect_parameter(const char **at, const char *name, const char *expected) {
        size_t n = strlen(name), value_size;
        char *value;

        fuzz_assert(strncmp(*at, name, n) == 0 && (*at)[n] == '=');
        *at += n + 1;
        value_size = strcspn(*at, "&");
        value = decode(*at, value_size, false);
        fuzz_assert(value);
        fuzz_assert(!expected || strcmp(value, expected) == 0);
        free(value);
        *at += value_size;
        if (**at == '&')
                (*at)++;
}

static void check_url(const S3PresignRequest *q, const char *url, size_t scheme_size, const char *authority,
                      size_t authority_size) {
        const char *at = url, *path;
        char *decoded, *expected, date[9], stamp[17], expires[16];
        struct tm tm;
        size_t n;

        for (const char *c = url; *c; c++)
                fuzz_assert(*c > ' ' && *c < 0x7f && *c != '#');
        fuzz_assert(strchr(url, '?') && strchr(url, '?') == strrchr(url, '?'));

        fuzz_assert(strncmp(at, q->endpoint, scheme_size + 3) == 0);
        at += scheme_size + 3;
        if (!q->path_style) {
                n = strlen(q->bucket);
                fuzz_assert(strncmp(at, q->bucket, n) == 0 && at[n] == '.');
                at += n + 1;
        }
        fuzz_assert(strncmp(at, authority, authority_size) == 0 && at[authority_size] == '/');
        at += authority_size;

        path = at;
        n = strcspn(path, "?");
        decoded = decode(path, n, true);
        fuzz_assert(decoded);
        fuzz_assert(asprintf(&expected, q->path_style ? "/%s/%s" : "/%.0s%s", q->bucket, q->key) > 0);
        fuzz_assert(strcmp(decoded, expected) == 0);
        fuzz_assert(!key_has_dot_segment(decoded + 1)); /* what a client would send as it is */
        free(decoded);
        free(expected);
        at = path + n + 1;

        fuzz_assert(gmtime_r(&q->now, &tm));
        fuzz_assert(strftime(date, sizeof(date), "%Y%m%d", &tm) == 8);
        fuzz_assert(strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm) == 16);
        snprintf(expires, sizeof(expires), "%u", q->expires_seconds);
        fuzz_assert(asprintf(&expected, "%s/%s/%s/s3/aws4_request", q->access_key, date, q->region) > 0);
        expect_parameter(&at, "X-Amz-Algorithm", "AWS4-HMAC-SHA256");
        expect_parameter(&at, "X-Amz-Credential", expected);
        expect_parameter(&at, "X-Amz-Date", stamp);
        expect_parameter(&at, "X-Amz-Expires", expires);
        if (q->session_token)
                expect_parameter(&at, "X-Amz-Security-Token", q->session_token);
        expect_parameter(&at, "X-Amz-SignedHeaders", "host");
        expect_parameter(&at, "X-Amz-Signature", NULL);
        fuzz_assert(*at == '\0');
        free(expected);
        unsigned_part(url);
}

static void check_uri_encode(const char *s) {
        for (int keep_slash = 0; keep_slash <= 1; keep_slash++) {
                char *encoded = s3_uri_encode(s, keep_slash), *decoded;

                fuzz_assert(encoded);
                decoded = decode(encoded, strlen(encoded), keep_slash);
                fuzz_assert(decoded && strcmp(decoded, s) == 0);
                free(decoded);
                free(encoded);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static char input[INPUT_MAX + 1];
        const char *fields[N_FIELDS] = { "", "", "", "", "", "", "" }, *authority = NULL;
        S3PresignRequest q;
        char *url = (char *)"untouched", *other_url = NULL, *other_secret;
        size_t n_fields = 0, at = 13, scheme_size = 0, authority_size = 0, cut;
        int64_t now;
        uint32_t expires;
        bool valid;
        int r;

        if (size < 13 || size > INPUT_MAX)
                return 0;
        memcpy(input, data, size);
        input[size] = '\0';
        memcpy(&now, data + 1, 8);
        memcpy(&expires, data + 9, 4);
        while (at <= size && n_fields < N_FIELDS) {
                fields[n_fields++] = input + at;
                at += strlen(input + at) + 1;
        }
        q = (S3PresignRequest){ .endpoint = fields[0], .bucket = fields[1], .key = fields[2], .region = fields[3],
                                .access_key = fields[4], .secret_key = fields[5],
                                .session_token = data[0] & 2 ? fields[6] : NULL, .path_style = data[0] & 1,
                                .now = (time_t)now, .expires_seconds = expires };
        for (size_t i = 0; i < N_FIELDS; i++)
                check_uri_encode(fields[i]);

        valid = request_valid(&q, &scheme_size, &authority, &authority_size);
        r = s3_presign_get(&q, &url);
        if (!valid) {
                fuzz_assert(r == -EINVAL);
                fuzz_assert(strcmp(url, "untouched") == 0);
                return 0;
        }
        fuzz_assert(r == 0);
        check_url(&q, url, scheme_size, authority, authority_size);

        /* the secret changes the signature and nothing else */
        fuzz_assert(asprintf(&other_secret, "%s%s", q.secret_key, "x") > 0);
        q.secret_key = other_secret;
        fuzz_assert(s3_presign_get(&q, &other_url) == 0);
        cut = unsigned_part(url);
        fuzz_assert(unsigned_part(other_url) == cut && strncmp(url, other_url, cut) == 0);
        fuzz_assert(strcmp(url + cut, other_url + cut) != 0);
        if (strlen(fields[5]) >= 8)
                fuzz_assert(!strstr(url, fields[5]) || strstr(other_url, fields[5]));
        free(other_secret);
        free(other_url);
        free(url);
        return 0;
}
