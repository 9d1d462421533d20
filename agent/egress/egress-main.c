/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsagent-egress: the process that reaches S3 stores (docs/egress-plan.md), exec'd by dsagent with one
 * SOCK_SEQPACKET socket as fd 3 (egress-protocol.h), never run by hand. It is the only one that reads an egress
 * store's keys and links libcurl, and the only one whose seccomp filter (SANDBOX_EGRESS) lets it make an
 * AF_INET socket: the agent's binary does none of these. It runs as a user of its own (egress-check.h's
 * EGRESS_USER, set by the agent before the exec), which can open no file of root's: the keys and the CA come
 * open with each request.
 *
 * Two processes: the one the agent execs is the supervisor, which enters the sandbox, forks the server and does
 * nothing else but start it again when it dies (after a backoff, from 1 s doubling to a minute, so that a
 * server that dies at once is no tight loop), telling the agent first (EGRESS_REPLY_DIED). The server reads
 * every request as it comes: EGRESS_REQUEST_CHECK and EGRESS_REQUEST_PRESIGN (no network) are answered at once,
 * whatever uploads run, and each EGRESS_REQUEST_UPLOAD is said taken (EGRESS_REPLY_TAKEN) and run in a child of
 * its own, forked for it, that answers through a pipe: a slow store holds that child only. A child still
 * running at its request's deadline is killed, and the upload answered EGRESS_E_TIMEOUT. At most
 * EGRESS_UPLOADS_MAX run at once and EGRESS_QUEUE_MAX more wait for a slot; beyond those an upload is answered
 * EGRESS_E_BUSY, and a server too far behind to read leaves the requests in the socket's buffer, where the
 * agent, which never waits, is told "busy" when that is full.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/egress/egress-credentials.h"
#include "agent/egress/egress-protocol.h"
#include "agent/egress/s3-presign.h"
#include "agent/egress/s3-upload.h"
#include "common/cleanup.h"
#include "agent/workers/sandbox.h"
#if DSAGENT_TEST_HOOKS
#include "agent/support/test-hooks.h"
#endif

#define EGRESS_FD 3
#define EGRESS_CA_MAX (4 << 20) /* bytes of a CA bundle: the system's whole store is about 200 KiB */

/* What came open with a request (egress-protocol.h), -1 where nothing did. */
typedef struct RequestFiles {
        int credentials;
        int ca;
        int artifact;
} RequestFiles;

/* One upload's child: its pid (not reaped before it is done with, so the pid stays its own), the pipe it
 * answers through, and when it is killed. */
typedef struct Upload {
        pid_t pid;
        int pidfd;      /* to kill it at its deadline: the filter has no kill(), which reaches any pid of root's */
        int answer_fd;
        uint64_t id;
        uint64_t started_usec, deadline_usec;
        bool killed;
} Upload;

static Upload uploads[EGRESS_UPLOADS_MAX];
static size_t n_uploads;

/* Uploads taken while every slot ran one, oldest first, each with its file. */
typedef struct Queued {
        EgressRequest *request;
        RequestFiles files;
} Queued;

static Queued queue[EGRESS_QUEUE_MAX];
static size_t n_queued;

/* A page the supervisor shares with its server: the id of the last request the server read from fd 3 (0: none
 * yet), written as soon as it is read. A server killed after reading a request and before saying it taken has
 * taken it from the socket all the same: the supervisor's EGRESS_REPLY_DIED says up to which id, so that the
 * agent hands it over again instead of waiting for it for ever. */
static volatile uint64_t *server_last_read;

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static bool field_terminated(const char *field, size_t size) {
        return memchr(field, '\0', size) != NULL;
}

static bool open_error_valid(int32_t error) {
        return error <= 0 && error > -4096;
}

/* How many files come open with @q: its keys and its CA unless the agent could not open them, an upload's file. */
static size_t files_expected(const EgressRequest *q) {
        return (q->credentials_error == 0) + (q->ca_file[0] && q->ca_error == 0) + (q->type == EGRESS_REQUEST_UPLOAD);
}

/* Every string ends within its field, and the request is one this build sends, with the files it says.
 * Return: NULL or what is wrong. */
static const char *request_problem(const EgressRequest *q, size_t n_fds, const RequestFiles *f) {
        struct stat st;

        if (q->version != EGRESS_PROTOCOL_VERSION)
                return "a request of another protocol version";
        if (q->type != EGRESS_REQUEST_CHECK && q->type != EGRESS_REQUEST_UPLOAD && q->type != EGRESS_REQUEST_PRESIGN)
                return "an unknown request";
        if (!field_terminated(q->name, sizeof(q->name)) || !field_terminated(q->endpoint, sizeof(q->endpoint)) ||
            !field_terminated(q->bucket, sizeof(q->bucket)) || !field_terminated(q->region, sizeof(q->region)) ||
            !field_terminated(q->ca_file, sizeof(q->ca_file)) ||
            !field_terminated(q->credentials, sizeof(q->credentials)) || !field_terminated(q->key, sizeof(q->key)))
                return "a field without its end";
        for (size_t i = 0; i < EGRESS_METADATA_MAX; i++)
                if (!field_terminated(q->metadata[i].name, sizeof(q->metadata[i].name)) ||
                    !field_terminated(q->metadata[i].value, sizeof(q->metadata[i].value)))
                        return "a field without its end";
        if (q->credentials[0] != '/' || !q->endpoint[0] || !q->bucket[0] || !q->region[0] || q->attempts < 1 ||
            q->attempts > 20)
                return "a request without a target";
        if (!open_error_valid(q->credentials_error) || !open_error_valid(q->ca_error))
                return "an open() error that is none";
        if (n_fds != files_expected(q))
                return q->type == EGRESS_REQUEST_UPLOAD ? "an upload without its files" : "a request with files it does not say";
        if (q->type == EGRESS_REQUEST_CHECK)
                return NULL;
        if (q->type == EGRESS_REQUEST_PRESIGN)
                return !q->key[0] || q->url_seconds < 1 || q->url_seconds > S3_PRESIGN_EXPIRES_MAX ? "a URL without a key or a life"
                                                                                                : NULL;
        if (!q->key[0] || q->timeout_usec == 0)
                return "an upload without a key or a deadline";
        /* the agent opened it for reading: anything else is not what it sends */
        if (fstat(f->artifact, &st) < 0 || !S_ISREG(st.st_mode) || (fcntl(f->artifact, F_GETFL) & O_ACCMODE) != O_RDONLY)
                return "an upload without a regular file open for reading";
        return NULL;
}

static S3Target target_of(const EgressRequest *q, const EgressCredentials *keys, const char *ca_pem, size_t ca_pem_size) {
        return (S3Target){ .endpoint = q->endpoint,
                           .bucket = q->bucket,
                           .region = q->region,
                           .path_style = q->path_style != 0,
                           .ca_pem = ca_pem,
                           .ca_pem_size = ca_pem_size,
                           .access_key = keys->access_key_id,
                           .secret_key = keys->secret_access_key,
                           .session_token = keys->session_token };
}

/* The keys, from the file the agent opened, read at each request (a rotated key needs no reload); 0 or the
 * reply says why not. */
static int read_keys(const EgressRequest *q, const RequestFiles *f, EgressCredentials *keys, EgressReply *a) {
        char why[400] = "cannot read them"; /* not every failure says why (want of memory) */
        int r;

        if (q->credentials_error < 0) {
                r = q->credentials_error;
                snprintf(why, sizeof(why), "%.300s cannot be opened: %s", q->credentials, strerror(-r));
        } else
                r = egress_credentials_read(f->credentials, q->credentials, keys, why, sizeof(why));
        if (r == 0)
                return 0;
        a->result = r < 0 ? r : EGRESS_E_CREDENTIALS;
        snprintf(a->message, sizeof(a->message), "the credentials: %s", why);
        return -1;
}

/* The store's CA bundle, when it has one, from the file the agent opened (*@ret NULL: the system's store); 0 or
 * the reply says why not, untrusted as a CA file curl could not read was. */
static int read_ca(const EgressRequest *q, const RequestFiles *f, char **ret, size_t *ret_size, EgressReply *a) {
        _cleanup_free_ char *pem = NULL;
        size_t size = 0;
        struct stat st;
        const char *why = NULL;

        if (!q->ca_file[0]) {
                *ret = NULL;
                *ret_size = 0;
                return 0;
        }
        if (q->ca_error < 0)
                why = strerror(-q->ca_error);
        else if (fstat(f->ca, &st) < 0)
                why = strerror(errno);
        else if (!S_ISREG(st.st_mode))
                why = "not a regular file";
        else if (st.st_uid != 0 || (st.st_mode & 0022))
                /* it says whom the store's connection trusts: one another user could write would let that user
                 * put their own CA in it and read every upload on the way (as the keys, checked on the fd) */
                why = "not a file of root's that only root may write";
        else if (st.st_size > EGRESS_CA_MAX)
                why = "larger than 4 MiB";
        else if (!(pem = malloc((size_t)st.st_size + 1)))
                why = strerror(ENOMEM);
        while (!why && size <= (size_t)st.st_size) {
                ssize_t n = pread(f->ca, pem + size, (size_t)st.st_size + 1 - size, (off_t)size);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        why = strerror(errno);
                else if (n == 0)
                        break;
                else
                        size += (size_t)n;
        }
        if (!why && size > (size_t)st.st_size)
                why = "it grew while it was read";
        if (why) {
                a->result = S3_E_UNTRUSTED;
                snprintf(a->message, sizeof(a->message), "the CA file %.300s cannot be read: %s", q->ca_file, why);
                return -1;
        }
        *ret = TAKE_PTR(pem);
        *ret_size = size;
        return 0;
}

static void answer_check(const EgressRequest *q, const RequestFiles *f, EgressReply *a) {
        EgressCredentials keys = {};
        _cleanup_free_ char *ca = NULL;
        size_t ca_size;
        S3UploadReport report;
        S3UploadOptions options = { .attempts = q->attempts };
        S3Target target;
        int r;

        if (read_ca(q, f, &ca, &ca_size, a) < 0 || read_keys(q, f, &keys, a) < 0)
                return;
        target = target_of(q, &keys, ca, ca_size);
        r = s3_check_bucket(&target, &options, &report);
        egress_credentials_done(&keys);
        a->result = r;
        a->http_status = (int32_t)report.http_status;
        snprintf(a->s3_code, sizeof(a->s3_code), "%s", report.s3_code);
        snprintf(a->message, sizeof(a->message), "%s", r < 0 ? strerror(-r) : report.message);
}

/* A presigned GET URL of q->key (s3-presign.c: pure, no network), signed with the keys read now. */
static void answer_presign(const EgressRequest *q, const RequestFiles *f, EgressReply *a) {
        EgressCredentials keys = {};
        _cleanup_free_ char *url = NULL;
        int r;

        if (read_keys(q, f, &keys, a) < 0)
                return;
        r = s3_presign_get(&(S3PresignRequest){ .endpoint = q->endpoint, .bucket = q->bucket, .key = q->key,
                                                .region = q->region, .path_style = q->path_style != 0,
                                                .access_key = keys.access_key_id,
                                                .secret_key = keys.secret_access_key,
                                                .session_token = keys.session_token, .now = time(NULL),
                                                .expires_seconds = (unsigned)q->url_seconds },
                           &url);
        egress_credentials_done(&keys);
        if (r == 0 && strlen(url) >= sizeof(a->url))
                r = -ENAMETOOLONG;
        a->result = r;
        if (r == 0)
                snprintf(a->url, sizeof(a->url), "%s", url);
        else
                snprintf(a->message, sizeof(a->message), "cannot sign a URL: %s", strerror(-r));
}

#if DSAGENT_TEST_HOOKS
/*
 * Test builds only: in the upload's child, each part the store took and each retry said on stderr (the agent's
 * log), and a stop after part N while DSAGENT_TEST_PAUSE names "egress-after-part-N" (test_hook_pause(), ended by
 * DSAGENT_TEST_PAUSE_END): a test acts on the store between two parts of an upload the agent asked for.
 */
static void test_hook_progress(S3UploadEvent event, unsigned number, const S3UploadReport *report, void *userdata) {
        char point[48];

        (void)userdata;
        if (event == S3_UPLOAD_RETRY) {
                fprintf(stderr, "dsagent-egress: test: retry %u: %s\n", number, report->message);
                return;
        }
        fprintf(stderr, "dsagent-egress: test: part %u\n", number);
        snprintf(point, sizeof(point), "egress-after-part-%u", number);
        (void)test_hook_pause(point);
}
#endif

/* In the upload's child: the whole upload, its outcome in @a. */
static void run_upload(const EgressRequest *q, const RequestFiles *f, EgressReply *a) {
        EgressCredentials keys = {};
        _cleanup_free_ char *ca = NULL;
        size_t ca_size;
        S3Metadata metadata[EGRESS_METADATA_MAX];
        S3UploadReport report = {};
        S3UploadOptions options = { .part_size = q->part_size, .attempts = q->attempts, .metadata = metadata };
        S3Target target;
        int r;

        for (size_t i = 0; i < EGRESS_METADATA_MAX && q->metadata[i].name[0]; i++)
                metadata[options.n_metadata++] = (S3Metadata){ q->metadata[i].name, q->metadata[i].value };
        /* min_speed in bytes a second, as curl's low-speed limit takes it */
        options.low_speed_bytes = q->min_speed > 0 && q->min_speed < (uint64_t)LONG_MAX ? (long)q->min_speed : 0;
#if DSAGENT_TEST_HOOKS
        options.progress = test_hook_progress;
#endif
        if (read_ca(q, f, &ca, &ca_size, a) < 0 || read_keys(q, f, &keys, a) < 0)
                return;
        target = target_of(q, &keys, ca, ca_size);
        r = s3_upload_file(&target, q->key, f->artifact, &options, &report);
        egress_credentials_done(&keys);
        a->result = r;
        a->http_status = (int32_t)report.http_status;
        a->size = report.size;
        a->parts = report.parts;
        a->attempts = report.requests;
        snprintf(a->sha256, sizeof(a->sha256), "%s", report.sha256);
        snprintf(a->etag, sizeof(a->etag), "%s", report.etag);
        snprintf(a->s3_code, sizeof(a->s3_code), "%s", report.s3_code);
        snprintf(a->message, sizeof(a->message), "%s", r < 0 ? strerror(-r) : report.message);
}

static int send_reply(const EgressReply *a) {
        return send(EGRESS_FD, a, sizeof(*a), MSG_NOSIGNAL) == sizeof(*a) ? 0 : -1;
}

static void close_files(const RequestFiles *f);

/*
 * In an upload's child, just forked from the server: every fd the server holds for the other uploads goes, the
 * running ones' answer sockets and pidfds and the queued ones' keys, CA and artifacts. The child is the process
 * that talks to its store (TLS, a store's answers parsed): one taken over through them must find its own upload's
 * files alone, not another store's keys nor another requester's dump. (The fds are CLOEXEC, but there is no exec.)
 */
static void close_others_files(void) {
        for (size_t i = 0; i < n_uploads; i++) {
                close(uploads[i].answer_fd);
                close(uploads[i].pidfd);
        }
        for (size_t i = 0; i < n_queued; i++)
                close_files(&queue[i].files);
}

/* Fork the upload's child. Return: 0 (it runs, or its failure to start was answered), -1: the agent is gone. */
static int start_upload(const EgressRequest *q, const RequestFiles *f) {
        EgressReply a = { .version = EGRESS_PROTOCOL_VERSION, .id = q->id };
        int answer[2], pidfd;
        pid_t pid, parent;

        /* both ways: the parent's word to go (once it holds a pidfd of the child), then the child's answer */
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, answer) < 0) {
                a.result = -errno;
                snprintf(a.message, sizeof(a.message), "cannot make the upload's socket: %s", strerror(errno));
                return send_reply(&a);
        }
        parent = getpid();
        pid = fork();
        if (pid < 0) {
                a.result = -errno;
                snprintf(a.message, sizeof(a.message), "cannot start the upload: %s", strerror(errno));
                close(answer[0]);
                close(answer[1]);
                return send_reply(&a);
        }
        if (pid == 0) {
                /* the child answers its parent only, and dies with it */
                uint64_t started = now_usec();
                char go;

                close(answer[0]);
                close(EGRESS_FD);
                close_others_files();

                /* a parent gone before the prctl() took effect is not waited for; nor one that could not take a
                 * pidfd of this child (it could not hold it to its deadline), which says so by closing its end */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent || read(answer[1], &go, 1) != 1)
                        _exit(1);
                run_upload(q, f, &a);
                a.usec = now_usec() - started;
                _exit(write(answer[1], &a, sizeof(a)) == sizeof(a) ? 0 : 1);
        }
        close(answer[1]);
        /* the child is not reaped before this, so the pid is still its own */
        pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0 || write(answer[0], "g", 1) != 1) {
                /* no go: the child ends by itself, and is reaped as any upload's */
                a.result = -errno;
                snprintf(a.message, sizeof(a.message), "cannot hold the upload to its deadline: %s", strerror(errno));
                if (pidfd >= 0)
                        close(pidfd);
                close(answer[0]);
                (void)waitpid(pid, NULL, 0);
                return send_reply(&a);
        }
        uploads[n_uploads++] = (Upload){ .pid = pid, .pidfd = pidfd, .answer_fd = answer[0], .id = q->id,
                                         .started_usec = now_usec(),
                                         .deadline_usec = now_usec() + q->timeout_usec };
        return 0;
}

/* Upload @i's child has answered or is gone: its answer, or why there is none, goes to the agent. */
static int finish_upload(size_t i) {
        Upload *u = &uploads[i];
        EgressReply a = {};
        ssize_t n;
        int status = 0;

        n = read(u->answer_fd, &a, sizeof(a));
        close(u->answer_fd);
        (void)waitpid(u->pid, &status, 0);
        close(u->pidfd);
        if (n != sizeof(a) || a.version != EGRESS_PROTOCOL_VERSION || a.id != u->id) {
                a = (EgressReply){ .version = EGRESS_PROTOCOL_VERSION, .id = u->id,
                                   .usec = now_usec() - u->started_usec };
                if (u->killed) {
                        a.result = EGRESS_E_TIMEOUT;
                        snprintf(a.message, sizeof(a.message), "the upload did not end by its deadline");
                } else {
                        a.result = -EPIPE;
                        snprintf(a.message, sizeof(a.message), "the upload's process ended without an answer "
                                 "(status %d)", status);
                }
        }
        a.message[sizeof(a.message) - 1] = '\0';
        uploads[i] = uploads[--n_uploads];
        return send_reply(&a);
}

/* The files that came with @q, in the order egress-protocol.h gives, from @fds (@n of them). */
static RequestFiles files_of(const EgressRequest *q, const int *fds, size_t n) {
        RequestFiles f = { -1, -1, -1 };
        size_t i = 0;

        if (n != files_expected(q))
                return f;
        if (q->credentials_error == 0)
                f.credentials = fds[i++];
        if (q->ca_file[0] && q->ca_error == 0)
                f.ca = fds[i++];
        if (q->type == EGRESS_REQUEST_UPLOAD)
                f.artifact = fds[i++];
        return f;
}

/* The server took upload @id: it is its to answer now, or its death's (egress-protocol.h). */
static int send_taken(uint64_t id) {
        EgressReply a = { .version = EGRESS_PROTOCOL_VERSION, .kind = EGRESS_REPLY_TAKEN, .id = id };

        return send_reply(&a);
}

static void close_files(const RequestFiles *f) {
        if (f->credentials >= 0)
                close(f->credentials);
        if (f->ca >= 0)
                close(f->ca);
        if (f->artifact >= 0)
                close(f->artifact);
}

/* An upload that finds every slot taken waits in the queue, or is answered busy when that is full too. Takes
 * @q and the files in @f. Return: 0, or -1 when the agent is gone. */
static int queue_upload(EgressRequest *q, const RequestFiles *f) {
        EgressReply a = { .version = EGRESS_PROTOCOL_VERSION, .id = q->id, .result = EGRESS_E_BUSY };

        if (n_queued < EGRESS_QUEUE_MAX) {
                queue[n_queued++] = (Queued){ .request = q, .files = *f };
                return send_taken(q->id);
        }
        snprintf(a.message, sizeof(a.message), "the egress process is far behind: %d uploads run and %d wait",
                 EGRESS_UPLOADS_MAX, EGRESS_QUEUE_MAX);
        close_files(f);
        free(q);
        return send_reply(&a);
}

/* A slot freed: the oldest waiting upload takes it. Return: 0, or -1 when the agent is gone. */
static int start_queued(void) {
        Queued next;
        int r;

        if (n_queued == 0 || n_uploads >= EGRESS_UPLOADS_MAX)
                return 0;
        next = queue[0];
        memmove(queue, queue + 1, (--n_queued) * sizeof(queue[0]));
        r = start_upload(next.request, &next.files);
        close_files(&next.files);
        free(next.request);
        return r;
}

/* One request from the agent. Return: 0, or -1 when the agent is gone (its end closed). */
static int take_request(void) {
        EgressRequest *q = malloc(sizeof(EgressRequest));
        EgressReply a = { .version = EGRESS_PROTOCOL_VERSION };
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(3 * sizeof(int))];
        } control = {};
        struct iovec iov = { .iov_base = q, .iov_len = sizeof(*q) };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                              .msg_controllen = sizeof(control) };
        const char *problem;
        RequestFiles f;
        int fds[3];
        size_t n_fds = 0;
        ssize_t n;
        int r = 0;

        if (!q)
                return -1;
        n = recvmsg(EGRESS_FD, &msg, MSG_CMSG_CLOEXEC);
        if (n <= 0) {
                free(q);
                return n < 0 && errno == EINTR ? 0 : -1;
        }
        if (n == sizeof(*q) && server_last_read)
                *server_last_read = q->id;
#if DSAGENT_TEST_HOOKS
        /* test builds only: a server stopped between reading a request and saying it taken, to be killed there */
        (void)test_hook_pause("egress-server-read");
#endif
        /* every fd that came is taken, to be closed, whatever else is wrong */
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
                                int fd;

                                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                                if (n_fds < ELEMENTSOF(fds))
                                        fds[n_fds++] = fd;
                                else
                                        close(fd);
                        }
        f = n == sizeof(*q) ? files_of(q, fds, n_fds) : (RequestFiles){ -1, -1, -1 };
        problem = n != sizeof(*q) || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? "a request of the wrong size"
                                                                                 : request_problem(q, n_fds, &f);
        if (problem) {
                a.result = -EBADMSG;
                a.id = n == sizeof(*q) ? q->id : 0;
                snprintf(a.message, sizeof(a.message), "malformed egress request: %s", problem);
                r = send_reply(&a);
        } else if (q->type == EGRESS_REQUEST_CHECK) {
                answer_check(q, &f, &a);
                r = send_reply(&a);
        } else if (q->type == EGRESS_REQUEST_PRESIGN) {
                a.id = q->id;
                answer_presign(q, &f, &a);
                r = send_reply(&a);
        } else if (n_uploads >= EGRESS_UPLOADS_MAX) {
                return queue_upload(q, &f); /* q and its files are the queue's now, or closed and freed */
        } else {
                r = send_taken(q->id);
                if (r == 0)
                        r = start_upload(q, &f);
        }
        for (size_t i = 0; i < n_fds; i++)
                close(fds[i]);
        free(q);
        return r;
}

/* Kills what is past its deadline; how long poll() may wait for the next one (-1: none runs). */
static int kill_overdue(void) {
        uint64_t now = now_usec(), next = UINT64_MAX;

        for (size_t i = 0; i < n_uploads; i++) {
                if (!uploads[i].killed && now >= uploads[i].deadline_usec) {
                        (void)syscall(SYS_pidfd_send_signal, uploads[i].pidfd, SIGKILL, NULL, 0); /* its socket then reads EOF */
                        uploads[i].killed = true;
                }
                if (!uploads[i].killed && uploads[i].deadline_usec < next)
                        next = uploads[i].deadline_usec;
        }
        /* a deadline past INT_MAX ms (about 24.8 days; the policy allows 30) is woken for early, never overflowed */
        if (next == UINT64_MAX)
                return -1;
        return (next - now + 999) / 1000 > INT_MAX ? INT_MAX : (int)((next - now + 999) / 1000);
}

static int serve(void) {
        for (;;) {
                struct pollfd p[1 + EGRESS_UPLOADS_MAX];
                size_t n = 0;
                int timeout = kill_overdue(), r;

                /* every request is read as it comes: a URL or a check never waits behind running uploads */
                p[n++] = (struct pollfd){ .fd = EGRESS_FD, .events = POLLIN };
                for (size_t i = 0; i < n_uploads; i++)
                        p[n++] = (struct pollfd){ .fd = uploads[i].answer_fd, .events = POLLIN };
                r = poll(p, n, timeout);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -1;
                /* backwards: finish_upload() moves the last upload into the slot it frees */
                for (size_t i = n; i-- > 1;)
                        if (p[i].revents && (finish_upload(i - 1) < 0 || start_queued() < 0))
                                return -1;
                if (p[0].revents & POLLIN) {
                        if (take_request() < 0)
                                return 0;
                } else if (p[0].revents & (POLLHUP | POLLERR))
                        return 0; /* the agent closed its end */
        }
}

#if DSAGENT_TEST_HOOKS
/*
 * Test builds only: from inside the sandbox, the system call DSAGENT_TEST_EGRESS_SYSCALL names. An AF_INET
 * socket is the egress process's to make, and a file opened to read (open-read:PATH) its user's to be refused
 * or not: each is said on stderr, and it goes on serving; the others kill it, and surviving one is said and is
 * a failure of SANDBOX_EGRESS.
 */
static void test_hook_system_call(void) {
        const char *name = getenv("DSAGENT_TEST_EGRESS_SYSCALL");
        int fd = -1;

        if (!name)
                return;
        if (strncmp(name, "open-read:", 10) == 0) {
                /* open-read:PATH, a file of root's its user may not read: refused by the file's mode (EACCES),
                 * where the filter would allow it (it opens for reading) and uid 0 would have read it */
                fd = open(name + 10, O_RDONLY | O_CLOEXEC);
                fprintf(stderr, "dsagent-egress: opening %s to read: %s\n", name + 10, fd >= 0 ? "opened" : strerror(errno));
                if (fd >= 0)
                        close(fd);
                return;
        }
        if (strcmp(name, "inet-socket") == 0) {
                fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                fprintf(stderr, "dsagent-egress: an AF_INET socket: %s\n", fd >= 0 ? "made" : strerror(errno));
                if (fd >= 0)
                        close(fd);
                return;
        }
        if (strcmp(name, "packet-socket") == 0)
                fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
        else if (strcmp(name, "execve") == 0)
                (void)execl("/bin/true", "true", (char *)NULL);
        else if (strcmp(name, "open-write") == 0)
                fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        else if (strcmp(name, "ptrace") == 0)
                (void)ptrace(PTRACE_TRACEME, 0, NULL, NULL);
        else if (strcmp(name, "unshare") == 0)
                (void)unshare(CLONE_NEWUSER);
        else if (strncmp(name, "kill:", 5) == 0) /* kill:PID, a process of root's not its own */
                fd = kill((pid_t)strtol(name + 5, NULL, 10), SIGKILL);
        fprintf(stderr, "dsagent-egress: survived the forbidden system call %s (%d)\n", name, fd);
        exit(99);
}
#endif

/* The signal fd 3 raises when it can be read or its other end has gone (O_ASYNC, F_SETSIG): a real-time one, so
 * that a hangup queues behind a request's signal instead of being merged into it. */
#define AGENT_SOCKET_SIGNAL (SIGRTMIN + 4)

/* Any of fd 3's signals (or SIGIO, which the kernel sends when the real-time queue is full): its other end gone
 * is the agent gone, and the egress process ends at once, whatever it is waiting for (a check in libcurl); its
 * uploads' children die with it (their death signal comes from it, of their own uid). */
static void on_agent_socket_signal(int sig, siginfo_t *si, void *ctx) {
        struct pollfd p = { .fd = EGRESS_FD };

        (void)sig, (void)si, (void)ctx;
        if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)))
                _exit(EXIT_SUCCESS);
}

/*
 * Dies with the agent that started it (@arg: "--agent=PID", its pid). Not by a death signal: the agent, root
 * without CAP_KILL, may not signal a process of dsagent-egress, and the kernel checks the exiting parent's right
 * to send it (under SELinux that is an AVC denial of dsagent_t's kill as well). The agent's end of fd 3 closes
 * when it dies, however it dies: fd 3 then signals this process (O_ASYNC, owned by it), which ends. An agent
 * that died before the watch was set is caught by its pid no longer being the parent.
 * Return: 0, -ESRCH (the agent is gone), or a negative errno.
 */
static int die_with_agent(const char *arg) {
        const char *p = arg && strncmp(arg, "--agent=", 8) == 0 ? arg + 8 : NULL;
        struct sigaction sa = { .sa_sigaction = on_agent_socket_signal, .sa_flags = SA_SIGINFO | SA_RESTART };
        char *end = NULL;
        long agent;
        int flags;

        if (!p)
                return -EINVAL;
        errno = 0;
        agent = strtol(p, &end, 10);
        if (errno != 0 || end == p || *end != '\0' || agent <= 0 || agent > INT_MAX)
                return -EINVAL;
        sigemptyset(&sa.sa_mask);
        flags = fcntl(EGRESS_FD, F_GETFL);
        if (sigaction(AGENT_SOCKET_SIGNAL, &sa, NULL) < 0 || sigaction(SIGIO, &sa, NULL) < 0 || flags < 0 ||
            fcntl(EGRESS_FD, F_SETSIG, AGENT_SOCKET_SIGNAL) < 0 || fcntl(EGRESS_FD, F_SETOWN, getpid()) < 0 ||
            fcntl(EGRESS_FD, F_SETFL, flags | O_ASYNC) < 0)
                return -errno;
        /* its end closed before the watch is served by serve(), which sees the hangup */
        return getppid() == (pid_t)agent ? 0 : -ESRCH;
}

/* In the server: dies with the supervisor, and serves until the agent closes its end. */
static int run_server(pid_t supervisor) {
        int r;

        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != supervisor)
                return EXIT_FAILURE;
#if DSAGENT_TEST_HOOKS
        /* test builds only: a server that dies as soon as it starts, every time (its restarts must back off) */
        if (getenv("DSAGENT_TEST_EGRESS_SERVER_DIES"))
                return 3;
#endif
        r = serve();
        for (size_t i = 0; i < n_uploads; i++)
                (void)syscall(SYS_pidfd_send_signal, uploads[i].pidfd, SIGKILL, NULL, 0);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Has the agent closed its end? Waits up to @timeout_ms for it (0: a look). Each request the agent sends
 * interrupts the wait (fd 3's O_ASYNC signal): it goes on for what is left of @timeout_ms, never for all of it
 * again, or requests coming faster than the backoff would keep the next server from ever starting. */
static bool agent_gone(int timeout_ms) {
        uint64_t deadline = now_usec() + (uint64_t)timeout_ms * 1000;
        struct pollfd p = { .fd = EGRESS_FD, .events = 0 };
        int r;

        for (;;) {
                uint64_t now = now_usec();
                int left = now >= deadline ? 0 : (int)((deadline - now + 999) / 1000);

                r = poll(&p, 1, left);
                if (r >= 0 || errno != EINTR)
                        break;
        }
        return r > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

#define SERVER_BACKOFF_FIRST_MS 1000
#define SERVER_BACKOFF_MAX_MS 60000
#define SERVER_STABLE_USEC (60 * 1000000ULL) /* a server that lived this long: the next starts after the first delay */

/*
 * The supervisor: starts the server and starts it again each time it dies, until the agent closes its end. Each
 * death is told to the agent (EGRESS_REPLY_DIED) before anything more is started, so that it hands over again
 * what the dead server had taken; the next start waits 1 s, doubling up to a minute while servers keep dying
 * young. It reads no request and holds no upload: there is nothing in it to die of but a kill.
 */
static int supervise(void) {
        unsigned starts = 0;
        int backoff_ms = SERVER_BACKOFF_FIRST_MS;
        void *page = mmap(NULL, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

        /* without it, a request a server died holding before it said it taken waits for the agent's next start */
        server_last_read = page == MAP_FAILED ? NULL : page;
        for (;;) {
                EgressReply a = { .version = EGRESS_PROTOCOL_VERSION, .kind = EGRESS_REPLY_DIED,
                                  .result = EGRESS_E_LOST };
                pid_t supervisor = getpid(), pid;
                uint64_t started = now_usec();
                int status = 0;

                if (server_last_read)
                        *server_last_read = 0;
                pid = fork();
                if (pid == 0)
                        _exit(run_server(supervisor));
                starts++;
                if (pid > 0)
                        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                                ;
                if (agent_gone(0))
                        return EXIT_SUCCESS; /* the agent stops: the server ended with it */
                if (now_usec() - started >= SERVER_STABLE_USEC)
                        backoff_ms = SERVER_BACKOFF_FIRST_MS;
                if (pid < 0)
                        snprintf(a.message, sizeof(a.message), "the egress process could not start its server "
                                 "(%s); it tries again in %d s", strerror(errno), backoff_ms / 1000);
                else if (WIFSIGNALED(status))
                        snprintf(a.message, sizeof(a.message), "the egress process's server died (signal %d, "
                                 "start %u); its uploads are handed over again, and it starts again in %d s",
                                 WTERMSIG(status), starts, backoff_ms / 1000);
                else
                        snprintf(a.message, sizeof(a.message), "the egress process's server died (status %d, "
                                 "start %u); its uploads are handed over again, and it starts again in %d s",
                                 WEXITSTATUS(status), starts, backoff_ms / 1000);
                a.id = server_last_read ? *server_last_read : 0;
                if (send_reply(&a) < 0 || agent_gone(backoff_ms))
                        return EXIT_SUCCESS;
                backoff_ms = backoff_ms >= SERVER_BACKOFF_MAX_MS / 2 ? SERVER_BACKOFF_MAX_MS : backoff_ms * 2;
        }
}

int main(int argc, char *argv[]) {
        struct stat st;
        int r;

        r = argc == 2 && fstat(EGRESS_FD, &st) == 0 && S_ISSOCK(st.st_mode) ? die_with_agent(argv[1]) : -EINVAL;
        if (r == -EINVAL) {
                fprintf(stderr, "dsagent-egress: started by dsagent only, with its socket as fd %d\n", EGRESS_FD);
                return EXIT_FAILURE;
        }
        if (r < 0)
                return EXIT_FAILURE; /* the agent is gone already: nobody would read an answer */
        /* it holds the keys: no core of it, no ptrace by its own uid's other processes; then libcurl and
         * OpenSSL load what they load, and the sandbox closes behind them, before the first request */
        if (prctl(PR_SET_DUMPABLE, 0) < 0 || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return EXIT_FAILURE;
        r = sandbox_enter(SANDBOX_EGRESS);
        if (r < 0) {
                fprintf(stderr, "dsagent-egress: cannot enter its sandbox: %s\n", strerror(-r));
                return EXIT_FAILURE;
        }
#if DSAGENT_TEST_HOOKS
        test_hook_system_call();
#endif
        return supervise();
}
