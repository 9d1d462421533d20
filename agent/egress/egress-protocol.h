/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What crosses the socketpair between dsagent and the egress process it execs (libexec/dsagent-egress, fd 3):
 * fixed-size messages, as the PAM helper's (agent/decide/pam-check.c), since both ends are this build. One
 * SOCK_SEQPACKET message each; every string is NUL-terminated within its field, and the receiver checks that
 * before it reads one. The credentials cross only as where they are: the egress process reads them itself.
 */
#pragma once

#include <stdint.h>

#define EGRESS_PROTOCOL_VERSION 1
#define EGRESS_FIELD_MAX 1024 /* bytes of a string field with its NUL: an endpoint, a path */

typedef enum EgressRequestType {
        EGRESS_REQUEST_CHECK = 1, /* may the keys reach the bucket? (s3_check_bucket()) */
} EgressRequestType;

typedef struct EgressRequest {
        uint32_t version;     /* EGRESS_PROTOCOL_VERSION */
        uint32_t type;        /* EgressRequestType */
        uint32_t path_style;  /* 1: endpoint/bucket/key */
        uint32_t attempts;    /* tries of each request */
        char name[72];        /* the [egress.NAME], for messages */
        char endpoint[EGRESS_FIELD_MAX];
        char bucket[72];
        char region[72];
        char ca_file[EGRESS_FIELD_MAX];     /* "": the system's store */
        char credentials[EGRESS_FIELD_MAX]; /* the absolute path of the credentials file */
} EgressRequest;

typedef struct EgressReply {
        uint32_t version;
        int32_t result;       /* 0, an S3_E_* of s3-upload.h, EGRESS_E_CREDENTIALS, or a negative errno */
        int32_t http_status;  /* of the last answer; 0: none */
        char s3_code[64];     /* S3's <Code>, "" when none */
        char message[512];    /* what happened, in words; never a credential */
} EgressReply;

/* A result of the egress process's own, beside s3-upload.h's S3_E_*: the credentials file could not be used. */
#define EGRESS_E_CREDENTIALS 100
