/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Presigned S3 GET URLs (s3-presign.c): AWS Signature Version 4 in the query string, the one piece of signing
 * libcurl cannot do (it signs requests it sends, and makes no URL for someone else). Pure: no I/O, no clock,
 * no logging; the HMAC and sha256 are OpenSSL's. Also the URI encoding both it and s3-upload.c use.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define S3_PRESIGN_EXPIRES_MAX 604800 /* seven days: SigV4's longest */

typedef struct S3PresignRequest {
        const char *endpoint;      /* http[s]://host[:port], no path, no user, no query */
        const char *bucket;
        const char *key;           /* the object's key, as is */
        const char *region;
        bool path_style;           /* endpoint/bucket/key; else bucket.host/key */
        const char *access_key;
        const char *secret_key;
        const char *session_token; /* NULL: none; else signed in as X-Amz-Security-Token */
        time_t now;                /* the signature's time (X-Amz-Date), UTC seconds */
        unsigned expires_seconds;  /* 1 to S3_PRESIGN_EXPIRES_MAX */
} S3PresignRequest;

/**
 * s3_presign_get() - a URL anyone may GET the object with, until @request->now + expires_seconds
 *
 * The URL holds the access key's id and the signature, never the secret key.
 *
 * Return: 0 with the URL in @ret_url (the caller frees it); -EINVAL for an endpoint that is not
 * http[s]://AUTHORITY[/] with AUTHORITY of A-Z a-z 0-9 . - : [ ] (host[:port], an IPv6 address in brackets), a
 * bucket not of a-z 0-9 . - with a letter or digit at each end, an empty key or one with a "." or ".." segment
 * (clients remove those, RFC 3986 5.2.4, and would ask for a path other than the one signed), an empty region
 * or key id, a time outside the years 1970-9999, or an expiry out of range; -ENOMEM; -EIO if OpenSSL failed.
 * Every field but the authority and the bucket is %XX-encoded: the URL is printable ASCII without a space.
 */
int s3_presign_get(const S3PresignRequest *request, char **ret_url);

/**
 * s3_uri_encode() - @s with every byte but A-Z a-z 0-9 - . _ ~ written %XX (upper case hex), and '/' kept
 * when @keep_slash: SigV4's URI encoding, of a path (keep_slash) or of a query value.
 *
 * Return: a new string, or NULL without memory.
 */
char *s3_uri_encode(const char *s, bool keep_slash);
