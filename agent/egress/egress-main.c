/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsagent-egress: the process that reaches S3 stores (docs/egress-plan.md), exec'd by dsagent with one
 * SOCK_SEQPACKET socket as fd 3 (egress-protocol.h), never run by hand. It is the only one that reads an egress
 * store's keys and links libcurl: the agent's binary does neither. Today it answers EGRESS_REQUEST_CHECK for
 * `dsagent --check-policy --egress`; the uploads' worker pool and its SANDBOX_EGRESS profile are the plan's
 * next steps.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/egress/egress-credentials.h"
#include "agent/egress/egress-protocol.h"
#include "agent/egress/s3-upload.h"

#define EGRESS_FD 3

static bool field_terminated(const char *field, size_t size) {
        return memchr(field, '\0', size) != NULL;
}

/* Every string ends within its field, and the request is one this build sends. Return: NULL or what is wrong. */
static const char *request_problem(const EgressRequest *q) {
        if (q->version != EGRESS_PROTOCOL_VERSION)
                return "a request of another protocol version";
        if (q->type != EGRESS_REQUEST_CHECK)
                return "an unknown request";
        if (!field_terminated(q->name, sizeof(q->name)) || !field_terminated(q->endpoint, sizeof(q->endpoint)) ||
            !field_terminated(q->bucket, sizeof(q->bucket)) || !field_terminated(q->region, sizeof(q->region)) ||
            !field_terminated(q->ca_file, sizeof(q->ca_file)) ||
            !field_terminated(q->credentials, sizeof(q->credentials)))
                return "a field without its end";
        if (q->credentials[0] != '/' || !q->endpoint[0] || !q->bucket[0] || !q->region[0] || q->attempts < 1 ||
            q->attempts > 20)
                return "a request without a target";
        return NULL;
}

static void answer_check(const EgressRequest *q, EgressReply *a) {
        EgressCredentials keys = {};
        S3UploadReport report;
        S3UploadOptions options = { .attempts = q->attempts };
        char why[400];
        int r;

        r = egress_credentials_read(q->credentials, &keys, why, sizeof(why));
        if (r != 0) {
                a->result = r < 0 ? r : EGRESS_E_CREDENTIALS;
                snprintf(a->message, sizeof(a->message), "the credentials: %s", why);
                return;
        }
        r = s3_check_bucket(&(S3Target){ .endpoint = q->endpoint,
                                         .bucket = q->bucket,
                                         .region = q->region,
                                         .path_style = q->path_style != 0,
                                         .ca_file = q->ca_file[0] ? q->ca_file : NULL,
                                         .access_key = keys.access_key_id,
                                         .secret_key = keys.secret_access_key,
                                         .session_token = keys.session_token },
                            &options, &report);
        egress_credentials_done(&keys);
        a->result = r;
        a->http_status = (int32_t)report.http_status;
        snprintf(a->s3_code, sizeof(a->s3_code), "%s", report.s3_code);
        snprintf(a->message, sizeof(a->message), "%s", r < 0 ? strerror(-r) : report.message);
}

int main(int argc, char *argv[]) {
        struct stat st;

        if (argc != 1 || fstat(EGRESS_FD, &st) < 0 || !S_ISSOCK(st.st_mode)) {
                fprintf(stderr, "dsagent-egress: started by dsagent only, with its socket as fd %d\n", EGRESS_FD);
                return EXIT_FAILURE;
        }
        /* it holds the keys: no core of it, no ptrace by its own uid's other processes */
        if (prctl(PR_SET_DUMPABLE, 0) < 0 || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return EXIT_FAILURE;
        for (;;) {
                EgressRequest *q = malloc(sizeof(EgressRequest));
                EgressReply a = { .version = EGRESS_PROTOCOL_VERSION };
                const char *problem;
                ssize_t n;

                if (!q)
                        return EXIT_FAILURE;
                n = recv(EGRESS_FD, q, sizeof(*q), 0);
                if (n == 0) {
                        free(q);
                        break; /* the agent closed its end */
                }
                if (n < 0 && errno == EINTR) {
                        free(q);
                        continue;
                }
                if (n < 0) {
                        free(q);
                        return EXIT_FAILURE;
                }
                problem = n != sizeof(*q) ? "a request of the wrong size" : request_problem(q);
                if (problem) {
                        a.result = -EBADMSG;
                        snprintf(a.message, sizeof(a.message), "malformed egress request: %s", problem);
                } else
                        answer_check(q, &a);
                free(q);
                if (send(EGRESS_FD, &a, sizeof(a), MSG_NOSIGNAL) != sizeof(a))
                        return EXIT_FAILURE;
        }
        curl_global_cleanup();
        return EXIT_SUCCESS;
}
