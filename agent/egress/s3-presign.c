/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * SigV4 query authentication for S3 GETs (s3-presign.h), as AWS's "Authenticating Requests: Using Query
 * Parameters" describes it: a canonical request (method, path, sorted query, the host header, UNSIGNED-PAYLOAD),
 * its sha256 in a string to sign, and HMAC-SHA256 with a key derived from the secret through date, region,
 * service and "aws4_request". The unit test pins it to AWS's published example; the integration test has a
 * real radosgw serve the URL and refuse it altered or expired.
 */
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "agent/egress/s3-presign.h"

char *s3_uri_encode(const char *s, bool keep_slash) {
        static const char unreserved[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~";
        char *out = malloc(3 * strlen(s) + 1), *p = out;

        if (!out)
                return NULL;
        for (const unsigned char *c = (const unsigned char *)s; *c; c++)
                if (strchr(unreserved, *c) || (keep_slash && *c == '/'))
                        *p++ = (char)*c;
                else
                        p += sprintf(p, "%%%02X", *c);
        *p = '\0';
        return out;
}

static void hex(const unsigned char *bytes, size_t n, char *out) {
        for (size_t i = 0; i < n; i++)
                sprintf(out + 2 * i, "%02x", bytes[i]);
        out[2 * n] = '\0';
}

static int hmac_sha256(const void *key, size_t key_size, const char *data, unsigned char out[32]) {
        unsigned n = 0;

        if (!HMAC(EVP_sha256(), key, (int)key_size, (const unsigned char *)data, strlen(data), out, &n) || n != 32)
                return -EIO;
        return 0;
}

/* scheme and authority (host[:port]) of an endpoint http[s]://host[:port] with at most a trailing '/' */
static int split_endpoint(const char *endpoint, char *scheme, size_t scheme_size, const char **ret_authority,
                          size_t *ret_authority_size) {
        const char *sep = strstr(endpoint, "://"), *authority;
        size_t n;

        if (!sep || (size_t)(sep - endpoint) >= scheme_size)
                return -EINVAL;
        memcpy(scheme, endpoint, sep - endpoint);
        scheme[sep - endpoint] = '\0';
        if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)
                return -EINVAL;
        authority = sep + 3;
        /* a host name, an IPv4 or a bracketed IPv6 address, a port: it is copied into the URL as it is */
        n = strspn(authority, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-:[]");
        if (n == 0 || (authority[n] && strcmp(authority + n, "/") != 0))
                return -EINVAL;
        *ret_authority = authority;
        *ret_authority_size = n;
        return 0;
}

static bool empty(const char *s) {
        return !s || !*s;
}

/* S3's bucket alphabet, a letter or digit at each end: it may be part of the host, and is never "." or ".." */
static bool bucket_valid(const char *s) {
        size_t n = strlen(s);

        return n > 0 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789.-") == n && !strchr(".-", s[0]) &&
               !strchr(".-", s[n - 1]);
}

/* A key with a "." or ".." segment: a client removes those before it asks (RFC 3986, 5.2.4), for another path
 * than the one signed */
static bool key_has_dot_segment(const char *key) {
        const char *segment = key;

        for (const char *c = key;; c++)
                if (*c == '/' || *c == '\0') {
                        size_t n = (size_t)(c - segment);

                        if ((n == 1 && segment[0] == '.') || (n == 2 && segment[0] == '.' && segment[1] == '.'))
                                return true;
                        if (*c == '\0')
                                return false;
                        segment = c + 1;
                }
}

int s3_presign_get(const S3PresignRequest *q, char **ret_url) {
        _cleanup_free_ char *path = NULL, *credential = NULL, *query = NULL, *canonical = NULL, *to_sign = NULL,
                            *token = NULL, *secret = NULL, *url = NULL, *host = NULL;
        const char *authority;
        size_t authority_size;
        char scheme[8], date[9], stamp[17], canonical_hash[65], signature[65];
        unsigned char digest[32], k[32], k2[32]; /* two keys in turn: HMAC's key and output never overlap */
        struct tm tm;
        int r;

        if (!q->bucket || !bucket_valid(q->bucket) || empty(q->key) || key_has_dot_segment(q->key) ||
            empty(q->region) || empty(q->access_key) || !q->secret_key || q->expires_seconds < 1 ||
            q->expires_seconds > S3_PRESIGN_EXPIRES_MAX || !gmtime_r(&q->now, &tm))
                return -EINVAL;
        /* SigV4's dates are YYYYMMDD: four digits of year */
        if (tm.tm_year < 1970 - 1900 || tm.tm_year > 9999 - 1900)
                return -EINVAL;
        r = split_endpoint(q->endpoint, scheme, sizeof(scheme), &authority, &authority_size);
        if (r < 0)
                return r;
        strftime(date, sizeof(date), "%Y%m%d", &tm);
        strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);

        /* the host the client will send, and the path: /bucket/key or /key on bucket.host */
        if (q->path_style) {
                _cleanup_free_ char *key = s3_uri_encode(q->key, true), *bucket = s3_uri_encode(q->bucket, false);
                if (!key || !bucket || asprintf(&path, "/%s/%s", bucket, key) < 0 ||
                    asprintf(&host, "%.*s", (int)authority_size, authority) < 0)
                        return -ENOMEM;
        } else {
                _cleanup_free_ char *key = s3_uri_encode(q->key, true);
                if (!key || asprintf(&path, "/%s", key) < 0 ||
                    asprintf(&host, "%s.%.*s", q->bucket, (int)authority_size, authority) < 0)
                        return -ENOMEM;
        }

        /* the query, its parameters in byte order as the canonical request wants them */
        if (asprintf(&credential, "%s/%s/%s/s3/aws4_request", q->access_key, date, q->region) < 0)
                return -ENOMEM;
        {
                _cleanup_free_ char *credential_encoded = s3_uri_encode(credential, false);
                if (!credential_encoded)
                        return -ENOMEM;
                if (q->session_token) {
                        _cleanup_free_ char *t = s3_uri_encode(q->session_token, false);
                        if (!t || asprintf(&token, "&X-Amz-Security-Token=%s", t) < 0)
                                return -ENOMEM;
                }
                if (asprintf(&query,
                             "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%s&X-Amz-Date=%s&X-Amz-Expires=%u%s"
                             "&X-Amz-SignedHeaders=host",
                             credential_encoded, stamp, q->expires_seconds, token ? token : "") < 0)
                        return -ENOMEM;
        }

        if (asprintf(&canonical, "GET\n%s\n%s\nhost:%s\n\nhost\nUNSIGNED-PAYLOAD", path, query, host) < 0)
                return -ENOMEM;
        if (EVP_Digest(canonical, strlen(canonical), digest, NULL, EVP_sha256(), NULL) != 1)
                return -EIO;
        hex(digest, sizeof(digest), canonical_hash);
        if (asprintf(&to_sign, "AWS4-HMAC-SHA256\n%s\n%s/%s/s3/aws4_request\n%s", stamp, date, q->region,
                     canonical_hash) < 0)
                return -ENOMEM;

        /* the signing key: HMAC chained through date, region, service and the terminator */
        if (asprintf(&secret, "AWS4%s", q->secret_key) < 0)
                return -ENOMEM;
        r = hmac_sha256(secret, strlen(secret), date, k);
        if (r == 0)
                r = hmac_sha256(k, sizeof(k), q->region, k2);
        if (r == 0)
                r = hmac_sha256(k2, sizeof(k2), "s3", k);
        if (r == 0)
                r = hmac_sha256(k, sizeof(k), "aws4_request", k2);
        if (r == 0)
                r = hmac_sha256(k2, sizeof(k2), to_sign, digest);
        explicit_bzero(secret, strlen(secret));
        explicit_bzero(k, sizeof(k));
        explicit_bzero(k2, sizeof(k2));
        if (r < 0)
                return r;
        hex(digest, sizeof(digest), signature);

        if (asprintf(&url, "%s://%s%s?%s&X-Amz-Signature=%s", scheme, host, path, query, signature) < 0)
                return -ENOMEM;
        *ret_url = TAKE_PTR(url);
        return 0;
}
