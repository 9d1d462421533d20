/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One file to an S3-compatible store (s3-upload.h). Signing is libcurl's (CURLOPT_AWS_SIGV4), hashing
 * OpenSSL's; what is written here is S3's request sequence and what Debian 12's curl 7.88 needs around it:
 *   - curl 7.88 sends no x-amz-content-sha256, which S3's SigV4 requires: every request carries it, and curl
 *     signs it. It is the body's real sha256, so the store refuses (XAmzContentSHA256Mismatch) any bytes that
 *     are not the ones hashed: a transfer corrupted on the way cannot land.
 *   - curl 7.88 signs a query parameter without a value differently from S3: every one is written with its
 *     '=' (?uploads=), and parameters are written in sorted order, as the canonical query string has them.
 *   - radosgw answers CompleteMultipartUpload with an empty ETag: the object is confirmed by a HEAD.
 * tests/integration/test_egress_store.py shows each fact against a real radosgw.
 */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "agent/egress/s3-presign.h"
#include "agent/egress/s3-upload.h"

#define HASH_CHUNK (256 * 1024)         /* one pread() of the hashing pass */
#define RESPONSE_BODY_MAX (64 * 1024)   /* of an answer's body, what is kept (S3's answers are small) */
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define META_SHA256 "dsagent-sha256"     /* the metadata that carries the file's sha256, checked by the HEAD */

typedef struct Body {
        int fd;          /* -1: the body is mem */
        const char *mem;
        uint64_t offset; /* in the file */
        uint64_t length;
        uint64_t sent;
} Body;

typedef struct Response {
        long status;
        char body[RESPONSE_BODY_MAX + 1];
        size_t body_size;
        char etag[80];
        char meta_sha256[S3_SHA256_HEX_SIZE];
        curl_off_t content_length;
} Response;

typedef struct Uploader {
        const S3Target *target;
        S3UploadOptions options;
        S3UploadReport *report;
        CURL *curl;
        char *object_url; /* the object's URL without a query */
        char scope[128];  /* aws:amz:REGION:s3 */
        char error[CURL_ERROR_SIZE];
} Uploader;

/* cleanup.h's DEFINE_TRIVIAL_CLEANUP_FUNC wants a free function that returns NULL; these return nothing */
static void curl_easy_cleanupp(CURL **c) {
        if (*c)
                curl_easy_cleanup(*c);
}

static void curl_slist_free_allp(struct curl_slist **l) {
        curl_slist_free_all(*l);
}

static void EVP_MD_CTX_freep(EVP_MD_CTX **ctx) {
        EVP_MD_CTX_free(*ctx);
}

static void hex(const unsigned char *digest, size_t n, char *out) {
        for (size_t i = 0; i < n; i++)
                sprintf(out + 2 * i, "%02x", digest[i]);
        out[2 * n] = '\0';
}

static int digest_final_hex(EVP_MD_CTX *ctx, char out[S3_SHA256_HEX_SIZE]) {
        unsigned char digest[EVP_MAX_MD_SIZE];
        unsigned n = 0;

        if (EVP_DigestFinal_ex(ctx, digest, &n) != 1 || n != 32)
                return -EIO;
        hex(digest, n, out);
        return 0;
}

/* endpoint/bucket/key (path style) or scheme://bucket.host[:port]/key, the key percent-encoded */
static int object_url(const S3Target *t, const char *key, char **ret) {
        _cleanup_free_ char *encoded = s3_uri_encode(key, true), *host = NULL, *url = NULL;
        CURLU *u = NULL;
        char *s = NULL;
        int r = 0;

        if (!encoded)
                return -ENOMEM;
        /* a key's leading '/' would make an empty path segment: keys never start with one */
        if (t->path_style) {
                size_t n = strlen(t->endpoint);
                while (n > 0 && t->endpoint[n - 1] == '/')
                        n--;
                if (asprintf(&url, "%.*s/%s/%s", (int)n, t->endpoint, t->bucket,
                             encoded + strspn(encoded, "/")) < 0)
                        return -ENOMEM;
                *ret = TAKE_PTR(url);
                return 0;
        }
        u = curl_url();
        if (!u)
                return -ENOMEM;
        if (curl_url_set(u, CURLUPART_URL, t->endpoint, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_HOST, &s, 0) != CURLUE_OK)
                r = -EINVAL;
        if (r == 0 && asprintf(&host, "%s.%s", t->bucket, s) < 0)
                r = -ENOMEM;
        curl_free(s);
        s = NULL;
        if (r == 0 && asprintf(&url, "/%s", encoded + strspn(encoded, "/")) < 0)
                r = -ENOMEM;
        if (r == 0 && (curl_url_set(u, CURLUPART_HOST, host, 0) != CURLUE_OK ||
                       curl_url_set(u, CURLUPART_PATH, url, CURLU_PATH_AS_IS) != CURLUE_OK ||
                       curl_url_get(u, CURLUPART_URL, &s, 0) != CURLUE_OK))
                r = -EINVAL;
        if (r == 0) {
                *ret = strdup(s);
                if (!*ret)
                        r = -ENOMEM;
        }
        curl_free(s);
        curl_url_cleanup(u);
        return r;
}

static size_t on_read(char *buffer, size_t size, size_t n, void *userdata) {
        Body *b = userdata;
        size_t want = size * n;
        ssize_t k;

        if (want > b->length - b->sent)
                want = b->length - b->sent;
        if (want == 0)
                return 0;
        if (b->fd < 0) {
                memcpy(buffer, b->mem + b->sent, want);
                b->sent += want;
                return want;
        }
        k = pread(b->fd, buffer, want, (off_t)(b->offset + b->sent));
        if (k <= 0) /* an error, or the file is shorter than it was when hashed */
                return CURL_READFUNC_ABORT;
        b->sent += (uint64_t)k;
        return (size_t)k;
}

/* curl rewinds a body it must send again (a connection that closed under it) */
static int on_seek(void *userdata, curl_off_t offset, int origin) {
        Body *b = userdata;

        if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > b->length)
                return CURL_SEEKFUNC_FAIL;
        b->sent = (uint64_t)offset;
        return CURL_SEEKFUNC_OK;
}

static size_t on_write(char *data, size_t size, size_t n, void *userdata) {
        Response *resp = userdata;
        size_t len = size * n, room = RESPONSE_BODY_MAX - resp->body_size;

        /* what does not fit is dropped, not refused: an error's <Code> comes first */
        memcpy(resp->body + resp->body_size, data, len < room ? len : room);
        resp->body_size += len < room ? len : room;
        resp->body[resp->body_size] = '\0';
        return len;
}

/* a header's value into @out if the line is "@name: value" (case-insensitive name), trimmed */
static void header_value(const char *line, size_t len, const char *name, char *out, size_t out_size) {
        size_t name_len = strlen(name), start, end;

        if (len <= name_len || strncasecmp(line, name, name_len) != 0 || line[name_len] != ':')
                return;
        start = name_len + 1;
        while (start < len && (line[start] == ' ' || line[start] == '\t'))
                start++;
        end = len;
        while (end > start && (line[end - 1] == '\r' || line[end - 1] == '\n' || line[end - 1] == ' '))
                end--;
        if (end - start >= out_size)
                return; /* longer than any value expected: not taken */
        memcpy(out, line + start, end - start);
        out[end - start] = '\0';
}

static size_t on_header(char *line, size_t size, size_t n, void *userdata) {
        Response *resp = userdata;

        header_value(line, size * n, "ETag", resp->etag, sizeof(resp->etag));
        header_value(line, size * n, "x-amz-meta-" META_SHA256, resp->meta_sha256, sizeof(resp->meta_sha256));
        return size * n;
}

/* the text between <@tag> and </@tag> in an answer's body into @out; false if absent or too long */
static bool xml_text(const char *body, const char *tag, char *out, size_t out_size) {
        char open[64], close[64];
        const char *start, *end;

        snprintf(open, sizeof(open), "<%s>", tag);
        snprintf(close, sizeof(close), "</%s>", tag);
        start = strstr(body, open);
        if (!start)
                return false;
        start += strlen(open);
        end = strstr(start, close);
        if (!end || (size_t)(end - start) >= out_size)
                return false;
        memcpy(out, start, end - start);
        out[end - start] = '\0';
        return true;
}

typedef enum Method { METHOD_PUT, METHOD_POST, METHOD_HEAD, METHOD_DELETE, METHOD_GET } Method;

/* One request, one attempt. Return: a CURLcode; the answer, whatever its status, in @resp. */
static CURLcode perform_once(Uploader *u, Method method, const char *url, struct curl_slist *headers, Body *body,
                             Response *resp) {
        CURL *c = u->curl;
        const S3UploadOptions *o = &u->options;
        CURLcode rc;

        *resp = (Response){ .content_length = -1 };
        if (body)
                body->sent = 0;
        /* the connection cache stays across the reset: one upload's requests share a connection */
        curl_easy_reset(c);
        rc = curl_easy_setopt(c, CURLOPT_URL, url);
        (void)curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        (void)curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L); /* a redirect is an answer, never followed */
        (void)curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        (void)curl_easy_setopt(c, CURLOPT_ERRORBUFFER, u->error);
        (void)curl_easy_setopt(c, CURLOPT_USERAGENT, "dsagent/" DSAGENT_VERSION);
        (void)curl_easy_setopt(c, CURLOPT_AWS_SIGV4, u->scope);
        (void)curl_easy_setopt(c, CURLOPT_USERNAME, u->target->access_key);
        (void)curl_easy_setopt(c, CURLOPT_PASSWORD, u->target->secret_key);
        /* verification is curl's default; said here, since everything the upload proves rests on it */
        (void)curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
        (void)curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
        if (u->target->ca_pem) {
                struct curl_blob ca = { .data = (void *)u->target->ca_pem, .len = u->target->ca_pem_size,
                                        .flags = CURL_BLOB_COPY };

                /* that CA alone: Debian's libcurl also trusts the file and the directory /etc/ssl/certs (CAINFO,
                 * CAPATH) by default, and a CA given beside them would add to the system's store instead of
                 * replacing it */
                (void)curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
                (void)curl_easy_setopt(c, CURLOPT_CAINFO, NULL);
                (void)curl_easy_setopt(c, CURLOPT_CAPATH, NULL);
        }
        (void)curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, o->connect_timeout_seconds);
        (void)curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, o->low_speed_bytes);
        (void)curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, o->low_speed_seconds);
        (void)curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        (void)curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
        (void)curl_easy_setopt(c, CURLOPT_WRITEDATA, resp);
        (void)curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        (void)curl_easy_setopt(c, CURLOPT_HEADERDATA, resp);
        switch (method) {
        case METHOD_PUT:
                (void)curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
                (void)curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)body->length);
                (void)curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
                (void)curl_easy_setopt(c, CURLOPT_READDATA, body);
                (void)curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
                (void)curl_easy_setopt(c, CURLOPT_SEEKDATA, body);
                break;
        case METHOD_POST:
                (void)curl_easy_setopt(c, CURLOPT_POST, 1L);
                (void)curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body->length : 0));
                (void)curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body->mem : "");
                break;
        case METHOD_HEAD:
                (void)curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
                break;
        case METHOD_DELETE:
                (void)curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
                break;
        case METHOD_GET:
                (void)curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
                break;
        }
        if (rc != CURLE_OK)
                return rc;
        u->error[0] = '\0';
        u->report->requests++;
        rc = curl_easy_perform(c);
        (void)curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
        (void)curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &resp->content_length);
        u->report->http_status = resp->status;
        return rc;
}

/* failures another attempt may cure: the store unreachable, slow, overloaded or failing inside */
static bool curl_code_transient(CURLcode rc) {
        switch (rc) {
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_CONNECT:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
                return true;
        default:
                return false;
        }
}

/* TLS that verification refused, or could not set up: the certificate is not signed by a trusted CA, is not
 * for the endpoint's name, or ca_file cannot be read. Another attempt would meet the same certificate */
static bool curl_code_untrusted(CURLcode rc) {
        switch (rc) {
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_ISSUER_ERROR:
        case CURLE_SSL_CRL_BADFILE:
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        case CURLE_SSL_INVALIDCERTSTATUS:
                return true;
        default:
                return false;
        }
}

static bool status_transient(long status) {
        return status >= 500 || status == 408 || status == 429;
}

static void backoff(Uploader *u, unsigned attempt) {
        uint64_t wait = u->options.backoff_first_usec, jitter = 0;
        struct timespec ts;

        for (unsigned i = 1; i < attempt && wait < u->options.backoff_max_usec; i++)
                wait *= 2;
        if (wait > u->options.backoff_max_usec)
                wait = u->options.backoff_max_usec;
        /* from the upper half: many agents that lost one store do not all come back at once */
        if (getrandom(&jitter, sizeof(jitter), 0) == sizeof(jitter) && wait > 1)
                wait = wait / 2 + jitter % (wait / 2 + 1);
        ts = (struct timespec){ .tv_sec = (time_t)(wait / 1000000), .tv_nsec = (long)(wait % 1000000) * 1000 };
        while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
                ;
}

static void note_answer(Uploader *u, const Response *resp) {
        S3UploadReport *rep = u->report;

        if (!xml_text(resp->body, "Code", rep->s3_code, sizeof(rep->s3_code)))
                rep->s3_code[0] = '\0';
        snprintf(rep->message, sizeof(rep->message), "HTTP %ld%s%s", resp->status, rep->s3_code[0] ? " " : "",
                 rep->s3_code);
}

/*
 * One request with its retries. Return: 0 with a 2xx answer in @resp; S3_E_REFUSED (a 4xx), S3_E_GARBAGE
 * (a 3xx or 1xx), S3_E_UNAVAILABLE (every attempt failed transiently), S3_E_CHANGED (the body could not be
 * read), -EINVAL (curl refused an option), -ENOMEM.
 */
static int perform(Uploader *u, Method method, const char *url, struct curl_slist *headers, Body *body,
                   Response *resp) {
        for (unsigned attempt = 1;; attempt++) {
                CURLcode rc = perform_once(u, method, url, headers, body, resp);

                if (rc == CURLE_OK && resp->status >= 200 && resp->status < 300)
                        return 0;
                if (rc == CURLE_OK) {
                        note_answer(u, resp);
                        if (!status_transient(resp->status))
                                return resp->status >= 400 ? S3_E_REFUSED : S3_E_GARBAGE;
                } else {
                        snprintf(u->report->message, sizeof(u->report->message), "%s",
                                 u->error[0] ? u->error : curl_easy_strerror(rc));
                        if (rc == CURLE_ABORTED_BY_CALLBACK || rc == CURLE_READ_ERROR)
                                return S3_E_CHANGED;
                        if (rc == CURLE_OUT_OF_MEMORY)
                                return -ENOMEM;
                        if (curl_code_untrusted(rc))
                                return S3_E_UNTRUSTED;
                        if (!curl_code_transient(rc))
                                return rc == CURLE_UNKNOWN_OPTION || rc == CURLE_NOT_BUILT_IN ? -EINVAL
                                                                                                : S3_E_UNAVAILABLE;
                }
                if (attempt >= u->options.attempts)
                        return S3_E_UNAVAILABLE;
                u->report->retries++;
                backoff(u, attempt);
                if (u->options.progress)
                        u->options.progress(S3_UPLOAD_RETRY, attempt + 1, u->report, u->options.progress_userdata);
        }
}

/* the headers every request of the upload carries, and @payload_sha256 as x-amz-content-sha256 */
static int base_headers(Uploader *u, const char *payload_sha256, struct curl_slist **ret) {
        _cleanup_(curl_slist_free_allp) struct curl_slist *h = NULL;
        char line[256];
        struct curl_slist *n;

        snprintf(line, sizeof(line), "x-amz-content-sha256: %s", payload_sha256);
        h = curl_slist_append(NULL, line);
        if (!h)
                return -ENOMEM;
        if (u->target->session_token) {
                _cleanup_free_ char *token = NULL;
                if (asprintf(&token, "x-amz-security-token: %s", u->target->session_token) < 0)
                        return -ENOMEM;
                n = curl_slist_append(h, token);
                if (!n)
                        return -ENOMEM;
                h = n;
        }
        *ret = TAKE_PTR(h);
        return 0;
}

/* the object's metadata, its sha256 among it: for the PUT or the multipart upload's start */
static int add_metadata(Uploader *u, struct curl_slist **headers) {
        char line[512];
        struct curl_slist *n;

        for (size_t i = 0; i <= u->options.n_metadata; i++) {
                const char *name = i < u->options.n_metadata ? u->options.metadata[i].name : META_SHA256;
                const char *value = i < u->options.n_metadata ? u->options.metadata[i].value : u->report->sha256;
                if (strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(name) || !*name)
                        return -EINVAL;
                for (const char *c = value; *c; c++)
                        if (*c < 0x20 || *c > 0x7e)
                                return -EINVAL;
                if ((size_t)snprintf(line, sizeof(line), "x-amz-meta-%s: %s", name, value) >= sizeof(line))
                        return -E2BIG;
                n = curl_slist_append(*headers, line);
                if (!n)
                        return -ENOMEM;
                *headers = n;
        }
        return 0;
}

/*
 * The hashing pass: the whole file's sha256 into the report and, when @part_size is not 0, each part's
 * into @part_hashes. Return: 0, -EIO/-errno (unreadable), S3_E_CHANGED (shorter than its size said).
 */
static int hash_file(Uploader *u, int fd, uint64_t part_size, char (*part_hashes)[S3_SHA256_HEX_SIZE]) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *whole = EVP_MD_CTX_new(), *part = EVP_MD_CTX_new();
        _cleanup_free_ unsigned char *buffer = malloc(HASH_CHUNK);
        uint64_t offset = 0, size = u->report->size;
        unsigned index = 0;
        int r;

        if (!whole || !part || !buffer)
                return -ENOMEM;
        if (EVP_DigestInit_ex(whole, EVP_sha256(), NULL) != 1 ||
            (part_size && EVP_DigestInit_ex(part, EVP_sha256(), NULL) != 1))
                return -EIO;
        while (offset < size) {
                uint64_t want = size - offset;
                ssize_t k;

                if (want > HASH_CHUNK)
                        want = HASH_CHUNK;
                if (part_size && want > part_size - offset % part_size)
                        want = part_size - offset % part_size; /* a read never crosses a part's end */
                k = pread(fd, buffer, want, (off_t)offset);
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return S3_E_CHANGED;
                if (EVP_DigestUpdate(whole, buffer, k) != 1 || (part_size && EVP_DigestUpdate(part, buffer, k) != 1))
                        return -EIO;
                offset += (uint64_t)k;
                if (part_size && (offset % part_size == 0 || offset == size)) {
                        r = digest_final_hex(part, part_hashes[index++]);
                        if (r < 0 || (offset < size && EVP_DigestInit_ex(part, EVP_sha256(), NULL) != 1))
                                return r < 0 ? r : -EIO;
                }
        }
        return digest_final_hex(whole, u->report->sha256);
}

static int put_single(Uploader *u, int fd) {
        _cleanup_(curl_slist_free_allp) struct curl_slist *headers = NULL;
        Body body = { .fd = fd, .length = u->report->size };
        _cleanup_free_ Response *resp = malloc(sizeof(Response));
        int r;

        if (!resp)
                return -ENOMEM;
        r = hash_file(u, fd, 0, NULL);
        if (r == 0)
                r = base_headers(u, u->report->sha256, &headers);
        if (r == 0)
                r = add_metadata(u, &headers);
        if (r == 0)
                r = perform(u, METHOD_PUT, u->object_url, headers, &body, resp);
        return r;
}

static void abort_multipart(Uploader *u, const char *upload_id_escaped) {
        _cleanup_(curl_slist_free_allp) struct curl_slist *headers = NULL;
        _cleanup_free_ Response *resp = malloc(sizeof(Response));
        _cleanup_free_ char *url = NULL;
        S3UploadReport kept = *u->report;

        /* what the report says is the failure's, not the abort's */
        if (resp && base_headers(u, EMPTY_SHA256, &headers) == 0 &&
            asprintf(&url, "%s?uploadId=%s", u->object_url, upload_id_escaped) >= 0)
                (void)perform_once(u, METHOD_DELETE, url, headers, NULL, resp);
        kept.requests = u->report->requests;
        *u->report = kept;
}

static int put_multipart(Uploader *u, int fd, uint64_t part_size) {
        _cleanup_(curl_slist_free_allp) struct curl_slist *headers = NULL;
        _cleanup_free_ char (*part_hashes)[S3_SHA256_HEX_SIZE] = NULL;
        _cleanup_free_ char (*etags)[80] = NULL;
        _cleanup_free_ char *url = NULL, *complete = NULL, *upload_id_escaped = NULL;
        _cleanup_free_ Response *resp = malloc(sizeof(Response));
        char upload_id[512], complete_sha256[S3_SHA256_HEX_SIZE];
        unsigned n_parts = (unsigned)((u->report->size + part_size - 1) / part_size);
        size_t complete_size = 0, complete_room;
        int r;

        part_hashes = calloc(n_parts, sizeof(*part_hashes));
        etags = calloc(n_parts, sizeof(*etags));
        if (!resp || !part_hashes || !etags)
                return -ENOMEM;
        u->report->parts = n_parts;
        r = hash_file(u, fd, part_size, part_hashes);
        if (r != 0)
                return r;

        /* start: POST ?uploads= with the object's metadata */
        r = base_headers(u, EMPTY_SHA256, &headers);
        if (r == 0)
                r = add_metadata(u, &headers);
        if (r == 0 && asprintf(&url, "%s?uploads=", u->object_url) < 0)
                r = -ENOMEM;
        if (r == 0)
                r = perform(u, METHOD_POST, url, headers, NULL, resp);
        if (r != 0)
                return r;
        if (!xml_text(resp->body, "UploadId", upload_id, sizeof(upload_id)) || !upload_id[0]) {
                snprintf(u->report->message, sizeof(u->report->message), "the store's answer has no UploadId");
                return S3_E_GARBAGE;
        }
        upload_id_escaped = curl_easy_escape(u->curl, upload_id, 0);
        if (!upload_id_escaped)
                return -ENOMEM;

        /* the parts, each under its own sha256; on any failure the upload is aborted */
        for (unsigned i = 0; i < n_parts; i++) {
                _cleanup_(curl_slist_free_allp) struct curl_slist *part_headers = NULL;
                Body body = { .fd = fd, .offset = (uint64_t)i * part_size };

                body.length = u->report->size - body.offset < part_size ? u->report->size - body.offset : part_size;
                free(url);
                url = NULL;
                /* the canonical query string's order: partNumber before uploadId */
                if (asprintf(&url, "%s?partNumber=%u&uploadId=%s", u->object_url, i + 1, upload_id_escaped) < 0)
                        r = -ENOMEM;
                if (r == 0)
                        r = base_headers(u, part_hashes[i], &part_headers);
                if (r == 0)
                        r = perform(u, METHOD_PUT, url, part_headers, &body, resp);
                if (r == 0 && !resp->etag[0]) {
                        snprintf(u->report->message, sizeof(u->report->message), "part %u has no ETag", i + 1);
                        r = S3_E_GARBAGE;
                }
                if (r != 0) {
                        abort_multipart(u, upload_id_escaped);
                        return r;
                }
                memcpy(etags[i], resp->etag, sizeof(etags[i]));
                if (u->options.progress)
                        u->options.progress(S3_UPLOAD_PART_DONE, i + 1, u->report, u->options.progress_userdata);
        }

        /* complete: the parts' list, under its own sha256 */
        complete_room = 128 + (size_t)n_parts * (64 + sizeof(etags[0]));
        complete = malloc(complete_room);
        if (!complete)
                return -ENOMEM;
        complete_size += sprintf(complete, "<CompleteMultipartUpload>");
        for (unsigned i = 0; i < n_parts; i++)
                complete_size += sprintf(complete + complete_size, "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>",
                                         i + 1, etags[i]);
        complete_size += sprintf(complete + complete_size, "</CompleteMultipartUpload>");
        {
                unsigned char digest[32];
                if (EVP_Digest(complete, complete_size, digest, NULL, EVP_sha256(), NULL) != 1)
                        return -EIO;
                hex(digest, sizeof(digest), complete_sha256);
        }
        curl_slist_free_all(headers);
        headers = NULL;
        free(url);
        url = NULL;
        r = base_headers(u, complete_sha256, &headers);
        if (r == 0 && asprintf(&url, "%s?uploadId=%s", u->object_url, upload_id_escaped) < 0)
                r = -ENOMEM;
        if (r == 0) {
                Body body = { .fd = -1, .mem = complete, .length = complete_size };
                struct curl_slist *n = curl_slist_append(headers, "Content-Type: application/xml");
                if (!n)
                        return -ENOMEM;
                headers = n;
                r = perform(u, METHOD_POST, url, headers, &body, resp);
        }
        /* S3 may answer 200 and put an error in the body, when it fails after it began answering */
        if (r == 0 && !strstr(resp->body, "<CompleteMultipartUploadResult")) {
                note_answer(u, resp);
                r = strstr(resp->body, "<Error>") ? S3_E_REFUSED : S3_E_GARBAGE;
        }
        if (r != 0)
                abort_multipart(u, upload_id_escaped);
        return r;
}

/* HEAD: the stored object is the file's size and carries the file's sha256 (and N parts' ETag) */
static int confirm(Uploader *u) {
        _cleanup_(curl_slist_free_allp) struct curl_slist *headers = NULL;
        _cleanup_free_ Response *resp = malloc(sizeof(Response));
        char parts_suffix[32];
        size_t etag_len;
        int r;

        if (!resp)
                return -ENOMEM;
        r = base_headers(u, EMPTY_SHA256, &headers);
        if (r == 0)
                r = perform(u, METHOD_HEAD, u->object_url, headers, NULL, resp);
        if (r != 0)
                return r;
        snprintf(u->report->etag, sizeof(u->report->etag), "%s", resp->etag);
        snprintf(parts_suffix, sizeof(parts_suffix), "-%u\"", u->report->parts);
        etag_len = strlen(resp->etag);
        if (resp->content_length < 0 || (uint64_t)resp->content_length != u->report->size ||
            strcmp(resp->meta_sha256, u->report->sha256) != 0 ||
            (u->report->parts > 0 &&
             (etag_len < strlen(parts_suffix) || strcmp(resp->etag + etag_len - strlen(parts_suffix), parts_suffix) != 0))) {
                snprintf(u->report->message, sizeof(u->report->message),
                         "the stored object is not the file: %" PRId64 " bytes, sha256 '%s', ETag %s",
                         (int64_t)resp->content_length, resp->meta_sha256, resp->etag);
                return S3_E_MISMATCH;
        }
        return 0;
}

/* @options with every 0 made its default */
static void options_defaults(Uploader *u, const S3UploadOptions *options) {
        if (options)
                u->options = *options;
        if (!u->options.attempts)
                u->options.attempts = 5;
        if (!u->options.backoff_first_usec)
                u->options.backoff_first_usec = 1000000;
        if (!u->options.backoff_max_usec)
                u->options.backoff_max_usec = 30000000;
        if (!u->options.connect_timeout_seconds)
                u->options.connect_timeout_seconds = 10;
        if (!u->options.low_speed_bytes)
                u->options.low_speed_bytes = 1024;
        if (!u->options.low_speed_seconds)
                u->options.low_speed_seconds = 30;
}

int s3_check_bucket(const S3Target *target, const S3UploadOptions *options, S3UploadReport *report) {
        _cleanup_(curl_easy_cleanupp) CURL *curl = NULL;
        _cleanup_(curl_slist_free_allp) struct curl_slist *headers = NULL;
        _cleanup_free_ char *url = NULL, *list_url = NULL;
        _cleanup_free_ Response *resp = malloc(sizeof(Response));
        Uploader u = { .target = target, .report = report };
        int r;

        *report = (S3UploadReport){};
        if (!resp)
                return -ENOMEM;
        options_defaults(&u, options);
        if ((size_t)snprintf(u.scope, sizeof(u.scope), "aws:amz:%s:s3", target->region) >= sizeof(u.scope))
                return -EINVAL;
        r = object_url(target, "", &url); /* the bucket's own URL: endpoint/bucket/ or bucket.host/ */
        if (r < 0)
                return r;
        curl = curl_easy_init();
        if (!curl)
                return -ENOMEM;
        u.curl = curl;
        r = base_headers(&u, EMPTY_SHA256, &headers);
        if (r == 0)
                r = perform(&u, METHOD_HEAD, url, headers, NULL, resp);
        if (r != S3_E_REFUSED || report->s3_code[0])
                return r;
        /* an answer to a HEAD has no body, so no <Code>: the bucket's listing of no key says which refusal it is
         * (the same permission, s3:ListBucket; "=" written, as curl 7.88 signs only such a query) */
        if (asprintf(&list_url, "%s?max-keys=0", url) < 0)
                return -ENOMEM;
        if (perform(&u, METHOD_GET, list_url, headers, NULL, resp) == 0) {
                /* refused to a HEAD, answered to a GET: keep the HEAD's refusal, say so */
                snprintf(report->message, sizeof(report->message), "HTTP %ld to a HEAD of the bucket",
                         report->http_status);
        }
        return S3_E_REFUSED;
}

int s3_upload_file(const S3Target *target, const char *key, int fd, const S3UploadOptions *options,
                   S3UploadReport *report) {
        _cleanup_(curl_easy_cleanupp) CURL *curl = NULL;
        _cleanup_free_ char *url = NULL;
        Uploader u = { .target = target, .report = report };
        uint64_t part_size;
        struct stat st;
        int r;

        *report = (S3UploadReport){};
        options_defaults(&u, options);
        part_size = u.options.part_size ? u.options.part_size : S3_PART_SIZE_DEFAULT;
        if (part_size < S3_PART_SIZE_MIN)
                return -EINVAL;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        report->size = (uint64_t)st.st_size;
        /* at most S3_PARTS_MAX parts: a larger file gets larger parts, whole MiBs */
        while ((report->size + part_size - 1) / part_size > S3_PARTS_MAX)
                part_size += UINT64_C(1) << 20;

        if ((size_t)snprintf(u.scope, sizeof(u.scope), "aws:amz:%s:s3", target->region) >= sizeof(u.scope))
                return -EINVAL;
        r = object_url(target, key, &url);
        if (r < 0)
                return r;
        u.object_url = url;
        curl = curl_easy_init();
        if (!curl)
                return -ENOMEM;
        u.curl = curl;

        r = report->size > part_size ? put_multipart(&u, fd, part_size) : put_single(&u, fd);
        if (r == 0)
                r = confirm(&u);
        if (r == 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_size != report->size) {
                snprintf(report->message, sizeof(report->message), "the file changed size while it was uploaded");
                r = S3_E_CHANGED;
        }
        if (r == 0)
                report->message[0] = '\0';
        return r;
}
