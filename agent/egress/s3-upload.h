/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One local file to an S3-compatible store (s3-upload.c): a single PUT up to the part size, multipart above
 * it, every request signed by libcurl's AWS SigV4 with the body's sha256 in x-amz-content-sha256 (so the store
 * itself refuses bytes that are not what was hashed), then a HEAD that confirms size and sha256. Memory stays
 * bounded whatever the size: the file is read twice by pread(), once to hash, once to send, never held.
 *
 * It blocks for as long as the upload takes and does network I/O: it runs in the egress worker only
 * (docs/egress-plan.md), never in the agent's loop. The caller has initialised libcurl
 * (curl_global_init()) once, before any thread exists.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define S3_SHA256_HEX_SIZE 65             /* 64 hex digits and the NUL */
#define S3_PART_SIZE_MIN (UINT64_C(5) << 20)  /* S3's smallest part but the last */
#define S3_PART_SIZE_DEFAULT (UINT64_C(16) << 20)
#define S3_PARTS_MAX 10000                /* S3's most parts of one upload */

/* Positive results: the upload did not happen, for a reason the caller records (report says more). */
enum {
        _S3_E_SUCCESS,
        S3_E_REFUSED,     /* the store answered an error another attempt would not change (4xx: keys, quota) */
        S3_E_UNAVAILABLE, /* every attempt failed to reach the store or was answered 5xx, 408, 429 */
        S3_E_GARBAGE,     /* the answer was not S3's: a redirect, no UploadId, an unreadable result */
        S3_E_MISMATCH,    /* the stored object's size or sha256 is not the file's */
        S3_E_CHANGED,     /* the file changed size or could not be read while it was being sent */
        S3_E_UNTRUSTED,   /* TLS refused: the store's certificate is not signed by a CA of ca_pem (or of the
                           * system's store without one), not for the endpoint's name, or ca_pem is unusable.
                           * Never retried: only the operator's configuration can cure it */
};

/* Where objects go, and with which keys. The strings are the caller's and outlive the call. */
typedef struct S3Target {
        const char *endpoint;      /* http[s]://host[:port], no path */
        const char *bucket;
        const char *region;        /* the SigV4 scope's region, e.g. us-east-1 */
        bool path_style;           /* endpoint/bucket/key; else bucket.host/key */
        const char *ca_pem;        /* PEM bundle to trust instead of the system's (CURLOPT_CAINFO_BLOB: the
                                    * egress process's user cannot open a CA file of root's); NULL: the
                                    * system's. The peer's certificate and name are always verified */
        size_t ca_pem_size;
        const char *access_key;
        const char *secret_key;
        const char *session_token; /* temporary credentials' token (x-amz-security-token); NULL: none */
} S3Target;

typedef struct S3Metadata {
        const char *name;  /* sent as x-amz-meta-NAME: lower case letters, digits and '-' */
        const char *value; /* printable ASCII */
} S3Metadata;

typedef struct S3UploadReport S3UploadReport;

/* What an upload tells as it goes, for a worker that reports progress (and for tests that act on it). */
typedef enum S3UploadEvent {
        S3_UPLOAD_PART_DONE, /* @number: the part the store took */
        S3_UPLOAD_RETRY,     /* @number: the attempt about to be made, after its backoff; the report says why */
} S3UploadEvent;

typedef void (*S3UploadProgress)(S3UploadEvent event, unsigned number, const S3UploadReport *report,
                                 void *userdata);

typedef struct S3UploadOptions {
        uint64_t part_size;          /* 0: S3_PART_SIZE_DEFAULT; at least S3_PART_SIZE_MIN; grown so that a
                                      * file needs at most S3_PARTS_MAX parts. Larger files go multipart */
        unsigned attempts;           /* tries of each request; 0: 5 */
        uint64_t backoff_first_usec; /* wait before the second try (0: 1 s), doubled each time up to */
        uint64_t backoff_max_usec;   /* this (0: 30 s); each wait is drawn from its upper half */
        long connect_timeout_seconds; /* 0: 10 */
        long low_speed_bytes;        /* a transfer slower than this many bytes a second (0: 1024) ... */
        long low_speed_seconds;      /* ... for this long (0: 30) is cut, and tried again */
        const S3Metadata *metadata;
        size_t n_metadata;
        S3UploadProgress progress; /* NULL: none; called from inside s3_upload_file() */
        void *progress_userdata;
} S3UploadOptions;

/* What happened, filled in whatever the outcome (the caller records it). */
struct S3UploadReport {
        uint64_t size;
        char sha256[S3_SHA256_HEX_SIZE];  /* of the file, as read; empty until hashed */
        unsigned parts;                   /* 0: one PUT */
        unsigned requests;                /* HTTP requests made, retries included */
        unsigned retries;
        char etag[80];                    /* the stored object's, from the confirming HEAD */
        long http_status;                 /* of the last request; 0: none was answered */
        char s3_code[64];                 /* <Code> of the store's last error answer */
        char message[256];                /* the last failure in words (curl's, or the store's) */
};

/**
 * s3_upload_file() - store the whole of @fd under @key in @target's bucket, and confirm it
 * @fd: a regular file open for reading; read with pread() from offset 0, its offset left alone
 * @key: the object's key, as is (bytes outside A-Z a-z 0-9 - . _ ~ / are percent-encoded in the URL)
 * @options: NULL for the defaults
 * @report: filled in whatever the result
 *
 * A multipart upload that fails is aborted (once, best effort) so that its parts do not linger in the store.
 *
 * Return: 0 once the store holds the object and a HEAD confirmed its size and sha256; a positive S3_E_* code
 * (S3_E_UNTRUSTED at the first request whose TLS handshake fails verification, without retries); or a negative
 * errno (the file could not be read or hashed, no memory, libcurl unusable).
 */
int s3_upload_file(const S3Target *target, const char *key, int fd, const S3UploadOptions *options,
                   S3UploadReport *report);

/**
 * s3_check_bucket() - may these keys reach @target's bucket? (dsagent --check-policy --egress)
 *
 * A HEAD of the bucket, signed as an upload's requests are, with @options' attempts and timeouts. A refused
 * HEAD has no body to name S3's <Code>: then one GET of the bucket's listing of no key (?max-keys=0, the same
 * s3:ListBucket permission) reads it into @report's s3_code. Nothing is written to the store.
 *
 * Return: 0 (reachable, the keys taken); S3_E_REFUSED (a 4xx: keys, signature, no such bucket; http_status
 * and s3_code say which); S3_E_UNAVAILABLE (unreachable: the message is curl's words, or a 5xx); S3_E_UNTRUSTED
 * (the store's certificate not trusted, curl's words in the message); S3_E_GARBAGE
 * (a redirect, never followed, or a 1xx); -EINVAL; -ENOMEM.
 */
int s3_check_bucket(const S3Target *target, const S3UploadOptions *options, S3UploadReport *report);
