/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What crosses the socketpair between dsagent and the egress process it execs (libexec/dsagent-egress, fd 3):
 * fixed-size messages, as the PAM helper's (agent/decide/pam-check.c), since both ends are this build. One
 * SOCK_SEQPACKET message each; every string is NUL-terminated within its field, and the receiver checks that
 * before it reads one. The egress process runs as a user of its own (egress-check.h's EGRESS_USER), which can
 * open none of root's files: the agent opens the store's keys and its ca_file and sends them open with the request
 * (SCM_RIGHTS, in this order: keys, CA if any, the artifact of an upload); the paths cross for messages only.
 */
#pragma once

#include <stdint.h>

#define EGRESS_PROTOCOL_VERSION 2
#define EGRESS_FIELD_MAX 1024 /* bytes of a string field with its NUL: an endpoint, a path */

typedef enum EgressRequestType {
        EGRESS_REQUEST_CHECK = 1,  /* may the keys reach the bucket? (s3_check_bucket()) */
        EGRESS_REQUEST_UPLOAD = 2, /* store the file that comes with it (SCM_RIGHTS, O_RDONLY) under .key */
        EGRESS_REQUEST_PRESIGN = 3, /* a presigned GET URL of .key, for .url_seconds (dsctl dumps --url) */
} EgressRequestType;

#define EGRESS_KEY_FIELD 1025   /* S3's longest key (egress-name.h's EGRESS_KEY_MAX) and its NUL */
#define EGRESS_METADATA_MAX 12  /* x-amz-meta- pairs of one upload (docs/egress-plan.md, "Metadata") */
#define EGRESS_UPLOADS_MAX 4    /* uploads the egress process runs at once */
#define EGRESS_QUEUE_MAX 16     /* uploads it takes beyond those, to run as slots free; more are answered busy */

typedef struct EgressMetadata {
        char name[32];   /* lower case letters, digits and '-'; "" ends the list */
        char value[160]; /* printable ASCII */
} EgressMetadata;

typedef struct EgressRequest {
        uint32_t version;     /* EGRESS_PROTOCOL_VERSION */
        uint32_t type;        /* EgressRequestType */
        uint32_t path_style;  /* 1: endpoint/bucket/key */
        uint32_t attempts;    /* tries of each request */
        char name[72];        /* the [egress.NAME], for messages */
        char endpoint[EGRESS_FIELD_MAX];
        char bucket[72];
        char region[72];
        char ca_file[EGRESS_FIELD_MAX];     /* "": the system's store; else sent open unless ca_error */
        char credentials[EGRESS_FIELD_MAX]; /* the absolute path of the credentials file, sent open unless
                                             * credentials_error */
        int32_t credentials_error;          /* 0, or the agent's open() of credentials failed: -errno */
        int32_t ca_error;                   /* 0, or the agent's open() of ca_file failed: -errno */
        /* EGRESS_REQUEST_UPLOAD only: */
        uint64_t id;            /* the agent's, echoed in the reply */
        uint64_t part_size;     /* bytes; 0: the core's default */
        uint64_t timeout_usec;  /* the whole upload's deadline: past it the upload's process is killed */
        uint64_t min_speed;     /* bytes a second; slower for 30 s cuts a transfer, which is tried again */
        char key[EGRESS_KEY_FIELD];
        EgressMetadata metadata[EGRESS_METADATA_MAX];
        /* EGRESS_REQUEST_PRESIGN only (and .key): */
        uint64_t url_seconds;   /* how long the URL lives: 1 s to seven days (the policy's url_max_age) */
} EgressRequest;

typedef enum EgressReplyKind {
        EGRESS_REPLY_ANSWER = 0, /* the answer to request .id */
        EGRESS_REPLY_TAKEN = 1,  /* upload .id was read by the server: from now on only its answer, or the server's
                                  * death, ends it (what was not taken waits in the socket for the next server) */
        EGRESS_REPLY_DIED = 2,   /* the server died (.message: how, and when the next one starts); every upload it
                                  * took and did not answer is lost, and so is every one up to .id, the last
                                  * request it read (0: none), said taken or not. Sent by the supervisor */
} EgressReplyKind;

typedef struct EgressReply {
        uint32_t version;
        uint32_t kind;        /* EgressReplyKind */
        int32_t result;       /* 0, an S3_E_* of s3-upload.h, EGRESS_E_CREDENTIALS, or a negative errno */
        int32_t http_status;  /* of the last answer; 0: none */
        char s3_code[64];     /* S3's <Code>, "" when none */
        char message[512];    /* what happened, in words; never a credential */
        /* EGRESS_REQUEST_UPLOAD only: */
        uint64_t id;          /* the request's */
        uint64_t size;        /* bytes read from the file */
        uint64_t usec;        /* from the start of the upload to its end */
        uint32_t parts;       /* 0: one PUT */
        uint32_t attempts;    /* HTTP requests made, retries included */
        char sha256[65];      /* of the file, as read; "" until hashed */
        char etag[80];        /* the stored object's */
        /* EGRESS_REQUEST_PRESIGN only: */
        char url[4096];       /* the presigned URL: the access key's id and a signature, never the secret */
} EgressReply;

/* A result of the egress process's own, beside s3-upload.h's S3_E_*: the credentials file could not be used. */
#define EGRESS_E_CREDENTIALS 100
/* The upload did not end by its deadline (the request's timeout_usec): its process was killed. */
#define EGRESS_E_TIMEOUT 101
/* The egress process's queue was full (EGRESS_QUEUE_MAX): the upload was not taken, and may be handed over later. */
#define EGRESS_E_BUSY 102
/* The server died before it answered (EGRESS_REPLY_DIED): made up by the agent for each upload it had taken. */
#define EGRESS_E_LOST 103
