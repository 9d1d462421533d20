/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of agent/egress/s3-presign.c: AWS's published SigV4 presigned-URL example, path style, tokens, refusals */
#include <string.h>

#include "agent/egress/s3-presign.h"
#include "tests/unit/tap.h"

/* AWS's example in "Authenticating Requests: Using Query Parameters (AWS Signature Version 4)" */
static const S3PresignRequest aws_example = {
        .endpoint = "https://s3.amazonaws.com",
        .bucket = "examplebucket",
        .key = "test.txt",
        .region = "us-east-1",
        .access_key = "AKIAIOSFODNN7EXAMPLE",
        .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        .now = 1369353600, /* 2013-05-24T00:00:00Z */
        .expires_seconds = 86400,
};

static void test_aws_published_example(void) {
        char *url = NULL;

        check(s3_presign_get(&aws_example, &url) == 0);
        check(url && strcmp(url, "https://examplebucket.s3.amazonaws.com/test.txt"
                                 "?X-Amz-Algorithm=AWS4-HMAC-SHA256"
                                 "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
                                 "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
                                 "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404") == 0);
        if (url)
                printf("# %s\n", url);
        free(url);
}

/* path style keeps the endpoint's port in the host it signs, and puts the bucket in the path */
static void test_path_style_with_port(void) {
        S3PresignRequest q = aws_example;
        char *url = NULL, *other = NULL;

        q.endpoint = "http://127.0.0.1:8080/";
        q.path_style = true;
        q.key = "node 1/dump+1.dmp";
        check(s3_presign_get(&q, &url) == 0);
        check(url && strncmp(url, "http://127.0.0.1:8080/examplebucket/node%201/dump%2B1.dmp?X-Amz-Algorithm=", 71) == 0);
        /* another host is another signature */
        q.endpoint = "http://127.0.0.1:8081";
        check(s3_presign_get(&q, &other) == 0);
        check(url && other && strcmp(strstr(url, "X-Amz-Signature="), strstr(other, "X-Amz-Signature=")) != 0);
        free(url);
        free(other);
}

/* a session token is signed in, between X-Amz-Expires and X-Amz-SignedHeaders (byte order), encoded */
static void test_session_token(void) {
        S3PresignRequest q = aws_example;
        char *url = NULL;

        q.session_token = "tok/en+=";
        check(s3_presign_get(&q, &url) == 0);
        check(url && strstr(url, "&X-Amz-Expires=86400&X-Amz-Security-Token=tok%2Fen%2B%3D&X-Amz-SignedHeaders=host&"));
        check(url && !strstr(url, "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"));
        free(url);
}

static void test_refusals(void) {
        static const char *const bad_endpoints[] = {
                "s3.amazonaws.com", "ftp://host", "https://", "https://host/path", "https://user@host",
                "https://host?x", "file:///etc/passwd",
                /* found by fuzz-s3-presign: copied into the URL as they were */
                "https://host name", "https://host\r\nX-Injected: 1", "https://ho%st", "https://h\x01",
        };
        static const char *const bad_buckets[] = { "", ".", "..", "evil.com/x?y#", "a b", "Upper", "-a", "a.", "b\n" };
        static const char *const bad_keys[] = { ".", "..", "./x", "a/../../b", "a/.", "a/..", "a/./b" };
        S3PresignRequest q = aws_example;
        char *url = NULL;

        for (size_t i = 0; i < sizeof(bad_endpoints) / sizeof(bad_endpoints[0]); i++) {
                q.endpoint = bad_endpoints[i];
                check(s3_presign_get(&q, &url) == -EINVAL);
        }
        q = aws_example;
        for (size_t i = 0; i < sizeof(bad_buckets) / sizeof(bad_buckets[0]); i++) {
                q.bucket = bad_buckets[i];
                check(s3_presign_get(&q, &url) == -EINVAL);
                q.path_style = !q.path_style; /* in the path too: ".." would climb out of it */
                check(s3_presign_get(&q, &url) == -EINVAL);
        }
        q = aws_example;
        for (size_t i = 0; i < sizeof(bad_keys) / sizeof(bad_keys[0]); i++) {
                q.key = bad_keys[i];
                check(s3_presign_get(&q, &url) == -EINVAL);
        }
        q.key = "a/.../..b/b../.x/x.//y"; /* dots that are no segment of their own, an empty segment */
        check(s3_presign_get(&q, &url) == 0 && url && strstr(url, "/a/.../..b/b../.x/x.//y?"));
        free(url);
        url = NULL;
        q = aws_example;
        q.now = -1; /* 1969: before SigV4's four-digit years */
        check(s3_presign_get(&q, &url) == -EINVAL);
        q.now = 253402300800; /* 10000-01-01 */
        check(s3_presign_get(&q, &url) == -EINVAL);
        q.now = 253402300799; /* 9999-12-31T23:59:59Z */
        check(s3_presign_get(&q, &url) == 0 && url && strstr(url, "X-Amz-Date=99991231T235959Z"));
        free(url);
        url = NULL;
        q = aws_example;
        q.expires_seconds = 0;
        check(s3_presign_get(&q, &url) == -EINVAL);
        q.expires_seconds = S3_PRESIGN_EXPIRES_MAX + 1;
        check(s3_presign_get(&q, &url) == -EINVAL);
        q = aws_example;
        q.key = "";
        check(s3_presign_get(&q, &url) == -EINVAL);
        check(url == NULL); /* ret_url is set only on success */
}

static void test_uri_encode(void) {
        char *path = s3_uri_encode("a/b c~d_e.f-g%\xff", true), *value = s3_uri_encode("a/b", false);

        check(path && strcmp(path, "a/b%20c~d_e.f-g%25%FF") == 0);
        check(value && strcmp(value, "a%2Fb") == 0);
        free(path);
        free(value);
}

int main(void) {
        run_test(test_aws_published_example);
        run_test(test_path_style_with_port);
        run_test(test_session_token);
        run_test(test_refusals);
        run_test(test_uri_encode);
        return tap_finish();
}
