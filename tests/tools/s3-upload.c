/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * s3-upload: agent/egress/s3-upload.c driven from the command line, for the egress tests against a real store
 * (tests/integration/test_egress_upload.py). Prints one JSON object: the result, the report, the seconds the
 * upload took and the process's peak RSS (VmHWM), so a test can check what the uploader said and how much memory it
 * held.
 *
 *   s3-upload --endpoint URL --bucket B --region R --credentials FILE [--virtual-host] [--ca-file F]
 *             [--part-size BYTES] [--attempts N] [--backoff-usec N] [--low-speed BYTES/SECONDS]
 *             [--meta NAME=VALUE]... [--presign SECONDS [--presign-time UNIXTIME]] [--progress [--hold-after-part N]] KEY FILE
 *
 * --presign adds "url": a presigned GET of the object (agent/egress/s3-presign.c), valid for SECONDS from
 * UNIXTIME (default: now), made after a successful upload. --progress writes "part N" as the store takes
 * each part and "retry N WHY" before each retry on stderr, one line each, flushed; --hold-after-part N then
 * waits for a line on stdin after part N.
 *
 * FILE of --credentials holds ACCESS_KEY:SECRET_KEY on its first line (as curl --user takes them).
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/egress/s3-presign.h"
#include "agent/egress/s3-upload.h"

#define META_MAX 16

static void json_string(const char *s) {
        putchar('"');
        for (; *s; s++) {
                if (*s == '"' || *s == '\\')
                        printf("\\%c", *s);
                else if ((unsigned char)*s < 0x20)
                        printf("\\u%04x", (unsigned char)*s);
                else
                        putchar(*s);
        }
        putchar('"');
}

/* VmHWM: this program's own peak, unlike getrusage()'s ru_maxrss, which keeps the forking parent's across exec */
static long peak_rss_kib(void) {
        char line[256];
        long kib = -1;
        FILE *f = fopen("/proc/self/status", "re");

        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
                        break;
        fclose(f);
        return kib;
}

/* The whole of @path (a CA bundle, for S3Target.ca_pem), or NULL. */
static char *read_whole(const char *path, size_t *ret_size) {
        FILE *f = fopen(path, "re");
        char *text = NULL;
        size_t size = 0;

        if (!f)
                return NULL;
        for (;;) {
                char *more = realloc(text, size + 65536);
                size_t n;

                if (!more) {
                        free(text);
                        fclose(f);
                        return NULL;
                }
                text = more;
                n = fread(text + size, 1, 65536, f);
                size += n;
                if (n < 65536)
                        break;
        }
        fclose(f);
        *ret_size = size;
        return text;
}

static int read_credentials(const char *path, char **ret_access, char **ret_secret) {
        char line[512], *colon;
        FILE *f = fopen(path, "re");

        if (!f)
                return -errno;
        if (!fgets(line, sizeof(line), f)) {
                fclose(f);
                return -EINVAL;
        }
        fclose(f);
        line[strcspn(line, "\r\n")] = '\0';
        colon = strchr(line, ':');
        if (!colon)
                return -EINVAL;
        *colon = '\0';
        *ret_access = strdup(line);
        *ret_secret = strdup(colon + 1);
        return *ret_access && *ret_secret ? 0 : -ENOMEM;
}

/*
 * --progress: one line on stderr per event, flushed, for a test that acts when a part is in or a retry comes.
 * With --hold-after-part N, the upload waits after part N until a line comes on stdin: the test does what it
 * wants done between two parts (stop the store) before the next part goes.
 */
static void print_progress(S3UploadEvent event, unsigned number, const S3UploadReport *report, void *userdata) {
        unsigned hold_after_part = *(unsigned *)userdata;
        char line[16];

        fprintf(stderr, "%s %u %s\n", event == S3_UPLOAD_PART_DONE ? "part" : "retry", number, report->message);
        fflush(stderr);
        if (event == S3_UPLOAD_PART_DONE && number == hold_after_part && !fgets(line, sizeof(line), stdin))
                fprintf(stderr, "s3-upload: no line on stdin after part %u; going on\n", number);
}

int main(int argc, char **argv) {
        static const struct option longopts[] = {
                { "endpoint", required_argument, NULL, 'e' }, { "bucket", required_argument, NULL, 'b' },
                { "region", required_argument, NULL, 'r' },   { "credentials", required_argument, NULL, 'c' },
                { "virtual-host", no_argument, NULL, 'v' },   { "ca-file", required_argument, NULL, 'C' },
                { "part-size", required_argument, NULL, 'p' }, { "attempts", required_argument, NULL, 'a' },
                { "backoff-usec", required_argument, NULL, 'B' }, { "low-speed", required_argument, NULL, 'l' },
                { "meta", required_argument, NULL, 'm' },     { "presign", required_argument, NULL, 'P' },
                { "presign-time", required_argument, NULL, 'T' }, { "progress", no_argument, NULL, 'g' },
                { "hold-after-part", required_argument, NULL, 'H' }, {}
        };
        S3Target target = { .path_style = true };
        S3UploadOptions options = {};
        S3Metadata metadata[META_MAX];
        S3UploadReport report;
        const char *credentials = NULL;
        unsigned presign_seconds = 0, hold_after_part = 0;
        time_t presign_time = 0;
        char *url = NULL;
        struct timespec began, ended;
        int opt, fd, r;

        while ((opt = getopt_long(argc, argv, "", longopts, NULL)) >= 0) {
                switch (opt) {
                case 'e': target.endpoint = optarg; break;
                case 'b': target.bucket = optarg; break;
                case 'r': target.region = optarg; break;
                case 'c': credentials = optarg; break;
                case 'v': target.path_style = false; break;
                case 'C':
                        target.ca_pem = read_whole(optarg, &target.ca_pem_size);
                        if (!target.ca_pem) {
                                fprintf(stderr, "s3-upload: cannot read %s\n", optarg);
                                return 2;
                        }
                        break;
                case 'p': options.part_size = strtoull(optarg, NULL, 10); break;
                case 'a': options.attempts = (unsigned)strtoul(optarg, NULL, 10); break;
                case 'B': options.backoff_first_usec = options.backoff_max_usec = strtoull(optarg, NULL, 10); break;
                case 'l':
                        if (sscanf(optarg, "%ld/%ld", &options.low_speed_bytes, &options.low_speed_seconds) != 2)
                                return 2;
                        break;
                case 'g': options.progress = print_progress; break;
                case 'H': hold_after_part = (unsigned)strtoul(optarg, NULL, 10); break;
                case 'P': presign_seconds = (unsigned)strtoul(optarg, NULL, 10); break;
                case 'T': presign_time = (time_t)strtoll(optarg, NULL, 10); break;
                case 'm': {
                        char *eq = strchr(optarg, '=');
                        if (!eq || options.n_metadata >= META_MAX)
                                return 2;
                        *eq = '\0';
                        metadata[options.n_metadata++] = (S3Metadata){ .name = optarg, .value = eq + 1 };
                        break;
                }
                default:
                        return 2;
                }
        }
        options.metadata = metadata;
        options.progress_userdata = &hold_after_part;
        if (argc - optind != 2 || !target.endpoint || !target.bucket || !target.region || !credentials) {
                fprintf(stderr, "usage: s3-upload --endpoint URL --bucket B --region R --credentials FILE KEY FILE\n");
                return 2;
        }
        r = read_credentials(credentials, (char **)&target.access_key, (char **)&target.secret_key);
        if (r < 0) {
                fprintf(stderr, "s3-upload: cannot read credentials from %s: %s\n", credentials, strerror(-r));
                return 2;
        }
        fd = open(argv[optind + 1], O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                fprintf(stderr, "s3-upload: %s: %m\n", argv[optind + 1]);
                return 2;
        }
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return 2;
        clock_gettime(CLOCK_MONOTONIC, &began);
        r = s3_upload_file(&target, argv[optind], fd, &options, &report);
        clock_gettime(CLOCK_MONOTONIC, &ended);
        if (r == 0 && presign_seconds > 0) {
                S3PresignRequest q = {
                        .endpoint = target.endpoint, .bucket = target.bucket, .key = argv[optind],
                        .region = target.region, .path_style = target.path_style, .access_key = target.access_key,
                        .secret_key = target.secret_key, .now = presign_time ? presign_time : time(NULL),
                        .expires_seconds = presign_seconds,
                };
                r = s3_presign_get(&q, &url);
        }

        printf("{\"result\": %d, \"size\": %" PRIu64 ", \"sha256\": ", r, report.size);
        json_string(report.sha256);
        printf(", \"parts\": %u, \"requests\": %u, \"retries\": %u, \"etag\": ", report.parts, report.requests,
               report.retries);
        json_string(report.etag);
        printf(", \"http_status\": %ld, \"s3_code\": ", report.http_status);
        json_string(report.s3_code);
        printf(", \"message\": ");
        json_string(report.message);
        if (url) {
                printf(", \"url\": ");
                json_string(url);
                free(url);
        }
        printf(", \"seconds\": %.3f, \"max_rss_kib\": %ld}\n",
               (double)(ended.tv_sec - began.tv_sec) + (double)(ended.tv_nsec - began.tv_nsec) / 1e9, peak_rss_kib());
        curl_global_cleanup();
        free((char *)target.access_key);
        free((char *)target.secret_key);
        close(fd);
        return r == 0 ? 0 : 1;
}
