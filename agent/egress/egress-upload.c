/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An artifact of dump_dir to its store (egress-upload.h). Everything here runs in the loop and waits on nothing:
 * opening a file of dump_dir (root's, the agent's own names), one fsetxattr, one record, one sendmsg.
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/utsname.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "agent/egress/egress-check.h"
#include "agent/egress/egress-client.h"
#include "agent/egress/egress-name.h"
#include "agent/egress/egress-upload.h"
#include "agent/dumps/dump-publish.h"
#include "agent/egress/s3-upload.h"
#include "common/cleanup.h"
#include "agent/support/test-hooks.h"

/*
 * The most uploads that wait for their next hand-over at once. Each holds two of the agent's fds (dump_dir's and
 * the file's) for as long as it waits, two hours and more with the default retries, so a long store outage with
 * many dumps would spend the agent's fds: past this many, a transient failure leaves its file pending for the
 * agent's next start instead, said in its record.
 */
#define EGRESS_WAITING_MAX 256

/* One upload, from its first hand-over to the egress process to its outcome: between two hand-overs it waits on
 * its timer, in the broker's list of waiting uploads. */
typedef struct EgressUpload {
        Broker *broker;
        char *target, *key, *path, *name, *rule;
        int dir_fd, fd;
        bool keep_local;
        uint64_t request_id, size, started_usec;
        EgressRequest *request;   /* as handed over, again at each retry: the same key, so that a retry of an
                                   * upload a dead server had finished stores the same bytes under the same key */
        unsigned handover;        /* hand-overs made so far */
        unsigned retries;         /* the store's retries, and its first delay (policy.h) */
        uint64_t retry_delay_usec;
        sd_event_source *timer;   /* while it waits for its next hand-over */
        struct EgressUpload *next_waiting;
} EgressUpload;

/* @u, waiting on its timer, into the broker's list of waiting uploads, or out of it. */
static void waiting_add(EgressUpload *u) {
        u->next_waiting = u->broker->egress_waiting;
        u->broker->egress_waiting = u;
        u->broker->n_egress_waiting++;
}

static void waiting_remove(EgressUpload *u) {
        for (EgressUpload **w = &u->broker->egress_waiting; *w; w = &(*w)->next_waiting)
                if (*w == u) {
                        *w = u->next_waiting;
                        u->broker->n_egress_waiting--;
                        return;
                }
}

static void egress_upload_free(EgressUpload *u) {
        if (!u)
                return;
        if (u->timer) {
                waiting_remove(u);
                sd_event_source_disable_unref(u->timer);
        }
        free(u->request);
        safe_close(u->dir_fd);
        safe_close(u->fd);
        free(u->target);
        free(u->key);
        free(u->path);
        free(u->name);
        free(u->rule);
        free(u);
}

static uint64_t monotonic_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* The label says where the file stands: pending:STORE, uploaded:STORE:KEY, failed:STORE:RESULT (neither a
 * store's name nor a key holds a ':'). A file system without user xattrs loses it, not the upload. */
static void set_label(int fd, const char *state, const char *what, const char *result) {
        char value[EGRESS_KEY_FIELD + 96];

        if (result)
                snprintf(value, sizeof(value), "%s:%s:%s", state, what, result);
        else
                snprintf(value, sizeof(value), "%s:%s", state, what);
        (void)fsetxattr(fd, EGRESS_LABEL, value, strlen(value), 0);
}

static const char *result_name(int result) {
        switch (result) {
        case 0:
                return "uploaded";
        case S3_E_REFUSED:
                return "refused";
        case S3_E_UNAVAILABLE:
                return "unavailable";
        case S3_E_GARBAGE:
                return "garbage";
        case S3_E_MISMATCH:
                return "mismatch";
        case S3_E_CHANGED:
                return "changed";
        case S3_E_UNTRUSTED:
                return "untrusted";
        case EGRESS_E_TIMEOUT:
                return "timeout";
        case EGRESS_E_CREDENTIALS:
                return "credentials";
        case EGRESS_E_BUSY:
                return "busy";
        case EGRESS_E_LOST:
                return "lost";
        default:
                return "failed";
        }
}

/* An upload that did not happen, or did not end well: recorded, labelled failed, the local copy kept. */
static void record_failure(EgressUpload *u, const char *result, const char *error, const EgressReply *a) {
        AuditEgressEvent e = {
                .event = "outcome", .target = u->target, .key = u->key, .path = u->path,
                .request_id = u->request_id, .rule = u->rule, .size = a ? a->size : u->size,
                .sha256 = a ? a->sha256 : NULL, .parts = a ? a->parts : 0, .attempts = a ? a->attempts : 0,
                .usec = monotonic_usec() - u->started_usec, .result = result,
                .http_status = a ? a->http_status : 0, .s3_code = a ? a->s3_code : NULL, .error = error,
                .handover = u->handover,
        };

        (void)audit_log_egress(u->broker->config.audit_sink, &e);
}

/* Is @name of dir_fd still the file that was uploaded? Only then is it the one to remove. */
static bool still_named(const EgressUpload *u) {
        struct stat a, b;

        return fstat(u->fd, &a) == 0 && fstatat(u->dir_fd, u->name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
               a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/*
 * What another hand-over may cure: the store down or too slow (unavailable, timeout: s3-upload.c retried each
 * request already), the egress process too busy to take it, its server or the upload's own process dying. Not
 * what would fail the same way again: refused (keys, bucket, quota), untrusted, credentials, garbage, mismatch,
 * changed, a malformed request.
 */
static bool result_is_transient(int result) {
        return result == S3_E_UNAVAILABLE || result == EGRESS_E_TIMEOUT || result == EGRESS_E_BUSY ||
               result == EGRESS_E_LOST || result == -EPIPE;
}

/* The delay before hand-over @n + 1: the store's retry_delay, doubled at each, an hour at most. */
static uint64_t retry_delay(const EgressUpload *u) {
        uint64_t delay = u->retry_delay_usec;

        for (unsigned i = 1; i < u->handover && delay < POLICY_EGRESS_RETRY_DELAY_MAX_USEC; i++)
                delay *= 2;
        return delay < POLICY_EGRESS_RETRY_DELAY_MAX_USEC ? delay : POLICY_EGRESS_RETRY_DELAY_MAX_USEC;
}

static void hand_over(EgressUpload *u);
static int refresh_target(EgressUpload *u, const PolicyEgress *e);

static int egress_upload_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        EgressUpload *u = userdata;
        const PolicyEgress *e;

        (void)s;
        (void)usec;
        waiting_remove(u);
        u->timer = sd_event_source_disable_unref(u->timer);
        /* retention (or anyone) removed it meanwhile: nothing is left to upload, and nothing is said uploaded */
        if (!still_named(u)) {
                record_failure(u, "failed", "the local copy was removed before it could be handed over again", NULL);
                egress_upload_free(u);
                return 0;
        }
        /* a reload took the store away meanwhile: its keys and endpoint are no longer the operator's word */
        e = policy_egress_find(u->broker->policy, u->target);
        if (!e) {
                set_label(u->fd, "failed", u->target, "no-such-store");
                record_failure(u, "failed", "the store is no longer in the policy", NULL);
                egress_upload_free(u);
                return 0;
        }
        /* nor are the ones it had before a reload changed them: the file goes where the policy says now */
        if (refresh_target(u, e) < 0) {
                set_label(u->fd, "failed", u->target, "credentials");
                record_failure(u, "failed", "the store's fields, as a reload left them, do not fit the request", NULL);
                egress_upload_free(u);
                return 0;
        }
        hand_over(u);
        return 0;
}

/*
 * A transient failure of hand-over u->handover: recorded "retry" and handed over again after its delay, the label
 * still pending:STORE; past the store's retries, the outcome, failed:STORE:RESULT. Frees @u, or keeps it waiting.
 */
static void upload_failed(EgressUpload *u, int result, const char *error, const EgressReply *a) {
        AuditEgressEvent e;
        uint64_t delay;
        int r = -ENOMEM;

        if (!result_is_transient(result) || u->handover > u->retries || !u->broker->egress) {
                set_label(u->fd, "failed", u->target, result_name(result));
                record_failure(u, result_name(result), error, a);
                egress_upload_free(u);
                return;
        }
        if (u->broker->n_egress_waiting >= test_hook_egress_waiting_max(EGRESS_WAITING_MAX)) {
                /* the label stays pending:STORE, so that the agent's next start hands the file over again */
                char why[sizeof(((EgressReply *)NULL)->message) + 128];

                snprintf(why, sizeof(why), "%s; %u uploads wait for a retry already, the most that may: this one "
                         "waits, pending, for the agent's next start", error ? error : result_name(result),
                         u->broker->n_egress_waiting);
                record_failure(u, result_name(result), why, a);
                egress_upload_free(u);
                return;
        }
        delay = retry_delay(u);
        e = (AuditEgressEvent){
                .event = "retry", .target = u->target, .key = u->key, .path = u->path,
                .request_id = u->request_id, .rule = u->rule, .size = a ? a->size : u->size,
                .sha256 = a ? a->sha256 : NULL, .parts = a ? a->parts : 0, .attempts = a ? a->attempts : 0,
                .usec = monotonic_usec() - u->started_usec, .result = result_name(result),
                .http_status = a ? a->http_status : 0, .s3_code = a ? a->s3_code : NULL, .error = error,
                .handover = u->handover, .retry_usec = delay,
        };
        /* record before act: a retry nobody could read of is not made, and the file stays pending for the next
         * start */
        if (audit_log_egress(u->broker->config.audit_sink, &e) == 0)
                r = sd_event_add_time_relative(u->broker->event, &u->timer, CLOCK_MONOTONIC, delay, 0,
                                               egress_upload_on_timer, u);
        if (r < 0) {
                egress_upload_free(u);
                return;
        }
        waiting_add(u);
}

static void egress_upload_done(const EgressReply *a, void *userdata) {
        EgressUpload *u = userdata;
        AuditEgressEvent e;
        bool remove_local;

        if (!a) {
                /* the egress process ended (the agent stops, or it died): the label stays pending, so that the
                 * agent's next start hands the file over again */
                record_failure(u, "failed", "the egress process ended before it answered", NULL);
                egress_upload_free(u);
                return;
        }
        if (a->result != 0) {
                upload_failed(u, a->result, a->message, a);
                return;
        }
        remove_local = !u->keep_local && still_named(u);
        e = (AuditEgressEvent){
                .event = "outcome", .target = u->target, .key = u->key, .path = u->path,
                .request_id = u->request_id, .rule = u->rule, .size = a->size, .sha256 = a->sha256,
                .parts = a->parts, .attempts = a->attempts, .usec = monotonic_usec() - u->started_usec,
                .result = "uploaded", .http_status = a->http_status, .local_removed = remove_local,
                .handover = u->handover,
        };
        set_label(u->fd, "uploaded", u->target, u->key);
        /* the removal is said before it is made: a record that cannot be written keeps the file */
        if (audit_log_egress(u->broker->config.audit_sink, &e) == 0 && remove_local)
                (void)unlinkat(u->dir_fd, u->name, 0);
        egress_upload_free(u);
}

/* Only A-Z a-z 0-9 . _ - / : of @src, the rest '_': the object's metadata is printable ASCII, and plain. */
static void metadata_put(EgressRequest *q, size_t *n, const char *name, const char *value) {
        EgressMetadata *m;
        size_t i;

        if (!value || !value[0] || *n >= EGRESS_METADATA_MAX)
                return;
        m = &q->metadata[(*n)++];
        snprintf(m->name, sizeof(m->name), "%s", name);
        for (i = 0; value[i] && i < sizeof(m->value) - 1; i++) {
                char c = value[i];
                bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                             c == '.' || c == '_' || c == '-' || c == '/' || c == ':';
                m->value[i] = plain ? c : '_';
        }
        m->value[i] = '\0';
}

static int copy_field(char *field, size_t size, const char *s) {
        return (size_t)snprintf(field, size, "%s", s ? s : "") >= size ? -ENAMETOOLONG : 0;
}

/* The store's non-secret fields and where its keys are (egress-check.c), into @q. */
static int build_target(const PolicyEgress *e, EgressRequest *q) {
        return egress_request_fill(q, e, getenv("CREDENTIALS_DIRECTORY"));
}

/*
 * Before a hand-over after the first: the store's fields (endpoint, bucket, region, CA, keys, deadline, tries) and
 * its retries as the policy names them now (a reload may have moved the store away from an endpoint or keys the
 * operator no longer trusts), the key and the object's metadata as they were. Return: 0 or a negative errno.
 */
static int refresh_target(EgressUpload *u, const PolicyEgress *e) {
        _cleanup_free_ EgressRequest *q = calloc(1, sizeof(EgressRequest));
        int r;

        if (!q)
                return -ENOMEM;
        r = build_target(e, q);
        if (r < 0)
                return r;
        q->type = EGRESS_REQUEST_UPLOAD;
        memcpy(q->key, u->request->key, sizeof(q->key));
        memcpy(q->metadata, u->request->metadata, sizeof(q->metadata));
        free(u->request);
        u->request = TAKE_PTR(q);
        u->keep_local = e->keep_local;
        u->retries = e->retries;
        u->retry_delay_usec = e->retry_delay_usec;
        return 0;
}

/* The request for the egress process: the store, the key, the object's metadata. */
static int build_request(const PolicyEgress *e, const char *key, const EgressArtifact *a, const char *host,
                         const char *created, EgressRequest *q) {
        char number[32];
        size_t n = 0;
        int r;

        r = build_target(e, q);
        if (r < 0)
                return r;
        q->type = EGRESS_REQUEST_UPLOAD;
        r = copy_field(q->key, sizeof(q->key), key);
        if (r < 0)
                return r;
        if (a->requester != (uid_t)-1) {
                snprintf(number, sizeof(number), "%u", (unsigned)a->requester);
                metadata_put(q, &n, "requester-uid", number);
                /* not "requester": Debian 12's curl 7.88 sorts the headers it signs as "name:value", which puts
                 * requester-uid before requester, and the store's signature differs (SignatureDoesNotMatch) */
                metadata_put(q, &n, "requester-name", audit_user_name(a->requester));
        }
        metadata_put(q, &n, "rule", a->rule);
        snprintf(number, sizeof(number), "%016" PRIx64, a->request_id);
        metadata_put(q, &n, "request-id", number);
        snprintf(number, sizeof(number), "%d", (int)a->pid);
        metadata_put(q, &n, "pid", number);
        metadata_put(q, &n, "process", a->process);
        metadata_put(q, &n, a->unit && a->unit[0] ? "unit" : "container", a->unit && a->unit[0] ? a->unit : a->container);
        metadata_put(q, &n, "type", a->type);
        metadata_put(q, &n, "created", created);
        metadata_put(q, &n, "host", host);
        metadata_put(q, &n, "agent-version", DSAGENT_VERSION);
        return 0;
}

void egress_upload_artifact(Broker *b, const PolicyEgress *e, const char *dump_dir, int dir_fd, const char *name,
                            const EgressArtifact *a) {
        _cleanup_free_ EgressRequest *q = calloc(1, sizeof(EgressRequest));
        EgressUpload *u = calloc(1, sizeof(EgressUpload));
        struct utsname uts;
        struct timespec now;
        struct stat st;
        struct tm tm;
        char request_id[32], created[32];
        int r;

        if (!q || !u) {
                free(u);
                return; /* no memory: the artifact stays, unlabelled, as any other */
        }
        u->dir_fd = u->fd = -EBADF;
        if (!(u->target = strdup(e->name)) || !(u->name = strdup(name)) || (a->rule && !(u->rule = strdup(a->rule))) ||
            asprintf(&u->path, "%s/%s", dump_dir, name) < 0) {
                u->path = NULL;
                egress_upload_free(u);
                return;
        }
        u->broker = b;
        u->keep_local = e->keep_local;
        u->request_id = a->request_id;
        u->started_usec = monotonic_usec();
        u->fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        if (u->fd < 0 || fstat(u->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                record_failure(u, "failed", "the artifact could not be opened again for its upload", NULL);
                egress_upload_free(u);
                return;
        }
        u->size = (uint64_t)st.st_size;
        u->dir_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        (void)clock_gettime(CLOCK_REALTIME, &now);
        /* a table's artifact has no request: a random id keeps its key apart from every other's */
        if (u->request_id == 0 && getrandom(&u->request_id, sizeof(u->request_id), 0) != sizeof(u->request_id))
                u->request_id = (uint64_t)now.tv_nsec ^ ((uint64_t)now.tv_sec << 30);
        snprintf(request_id, sizeof(request_id), "%016" PRIx64, u->request_id);
        gmtime_r(&now.tv_sec, &tm);
        strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", &tm);
        if (uname(&uts) < 0)
                snprintf(uts.nodename, sizeof(uts.nodename), "localhost");
        r = egress_object_key(&(EgressNameParts){ .prefix = e->prefix ? e->prefix : "", .host = uts.nodename,
                                                  .unit = a->unit, .container = a->container, .type = a->type,
                                                  .process = a->process, .pid = (uint32_t)a->pid,
                                                  .time_usec = (uint64_t)now.tv_sec * 1000000 +
                                                               (uint64_t)now.tv_nsec / 1000,
                                                  .request_id = request_id, .extension = a->extension },
                              &u->key);
        if (r < 0) {
                set_label(u->fd, "failed", u->target, "key");
                record_failure(u, "failed", "no object key could be made for it", NULL);
                egress_upload_free(u);
                return;
        }
        set_label(u->fd, "pending", u->target, NULL);
        if (!b->egress) {
                set_label(u->fd, "failed", u->target, b->egress_missing ? "no-egress-user" : "no-egress-process");
                record_failure(u, "failed",
                               b->egress_missing ? b->egress_missing
                                                 : "no egress process runs: the policy the agent started with had no "
                                                   "[egress.NAME] store (restart the agent)",
                               NULL);
                egress_upload_free(u);
                return;
        }
        r = build_request(e, u->key, a, uts.nodename, created, q);
        if (r < 0) {
                set_label(u->fd, "failed", u->target, "credentials");
                record_failure(u, "failed", r == -ENOENT ? "systemd credentials, but no $CREDENTIALS_DIRECTORY"
                                                         : "the store's fields do not fit the request",
                               NULL);
                egress_upload_free(u);
                return;
        }
        /* record before act: no upload without its "queued" record */
        r = audit_log_egress(b->config.audit_sink,
                             &(AuditEgressEvent){ .event = "queued", .target = u->target, .key = u->key,
                                                  .path = u->path, .request_id = u->request_id, .rule = u->rule,
                                                  .size = u->size });
        if (r < 0) {
                set_label(u->fd, "failed", u->target, "not-recorded");
                egress_upload_free(u);
                return;
        }
        u->request = TAKE_PTR(q);
        u->retries = e->retries;
        u->retry_delay_usec = e->retry_delay_usec;
        hand_over(u);
}

/* Hand-over u->handover + 1 of @u to the egress process; its answer comes to egress_upload_done(). */
static void hand_over(EgressUpload *u) {
        uint64_t id;
        int r;

        u->handover++;
        u->started_usec = monotonic_usec();
        r = u->broker->egress ? egress_client_submit(u->broker->egress, u->request, u->fd, egress_upload_done, u, &id)
                              : -ECONNRESET;
        if (r == -EAGAIN)
                upload_failed(u, EGRESS_E_BUSY, "the egress process is far behind: its queue is full", NULL);
        else if (r == -ECONNRESET) {
                /* the egress process is gone for good (killed, the OOM killer): the agent, no longer allowed to
                 * change uid, cannot start another. As for an upload it had taken (egress_upload_done()), the label
                 * stays pending, so that the agent's next start hands the file over again: labelled failed, it
                 * would never be uploaded */
                record_failure(u, "failed", "the egress process is gone: the file stays pending, and the agent's "
                                            "next start hands it over again", NULL);
                egress_upload_free(u);
        } else if (r < 0)
                upload_failed(u, r, strerror(-r), NULL);
}

static void egress_process_died(const char *message, void *userdata) {
        Broker *b = userdata;

        (void)audit_log_egress(b->config.audit_sink, &(AuditEgressEvent){ .event = "restarted", .error = message });
}

void egress_upload_watch(Broker *b) {
        if (b->egress)
                egress_client_on_died(b->egress, egress_process_died, b);
}

void egress_upload_forget_waiting(Broker *b) {
        while (b->egress_waiting)
                egress_upload_free(b->egress_waiting);
}

int egress_presign(Broker *b, const PolicyEgress *e, const char *key, EgressUploadDone done, void *userdata,
                   uint64_t *ret_id) {
        _cleanup_free_ EgressRequest *q = calloc(1, sizeof(EgressRequest));
        int r;

        if (!q)
                return -ENOMEM;
        if (!b->egress)
                return -ECONNRESET;
        r = build_target(e, q);
        if (r == 0)
                r = copy_field(q->key, sizeof(q->key), key);
        if (r < 0)
                return r;
        q->type = EGRESS_REQUEST_PRESIGN;
        q->url_seconds = e->url_max_age_usec / 1000000;
        if (q->url_seconds < 1)
                q->url_seconds = 1;
        return egress_client_submit(b->egress, q, -1, done, userdata, ret_id);
}

/* A label of the artifact's (dump-publish.c), or "" when it has none. */
static void read_label(int fd, const char *key, char *buf, size_t size) {
        ssize_t n = fgetxattr(fd, key, buf, size - 1);

        buf[n > 0 ? (size_t)n : 0] = '\0';
}

/* The key's type and extension of an artifact labelled @type, named @name. */
static void type_of(const char *type, const char *name, const char **ret_type, const char **ret_extension) {
        static const char *const suffixes[] = { "nettrace", "txt", "csv", "gcdump", "svg" };
        const char *dot = strrchr(name, '.');

        if (policy_dump_type_from_string(type) != _POLICY_DUMP_INVALID) {
                *ret_type = "dump";
                *ret_extension = "dmp";
                return;
        }
        *ret_type = type[0] ? type : "artifact";
        *ret_extension = "bin";
        for (size_t i = 0; dot && i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
                if (strcmp(dot + 1, suffixes[i]) == 0)
                        *ret_extension = suffixes[i];
}

/* One file of dump_dir: handed over again when its label says its upload never ended. */
static void resubmit_one(Broker *b, const char *dump_dir, int dir_fd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        char label[256], type[64], pid[16], process[128], unit[256], id[24], requester[16], origin[32], table[128];
        const char *key_type, *extension;
        const PolicyEgress *e;
        unsigned long long n;
        struct stat st;

        fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return;
        read_label(fd, EGRESS_LABEL, label, sizeof(label));
        if (strncmp(label, "pending:", 8) != 0)
                return;
        e = policy_egress_find(b->policy, label + 8);
        if (!e) {
                set_label(fd, "failed", label + 8, "no-such-store");
                return;
        }
        read_label(fd, "user.dsagent.dump_type", type, sizeof(type));
        read_label(fd, "user.dsagent.target_pid", pid, sizeof(pid));
        read_label(fd, "user.dsagent.target_name", process, sizeof(process));
        read_label(fd, "user.dsagent.target_unit", unit, sizeof(unit));
        read_label(fd, "user.dsagent.request_id", id, sizeof(id));
        read_label(fd, "user.dsagent.requester_uid", requester, sizeof(requester));
        read_label(fd, "user.dsagent.origin", origin, sizeof(origin));
        read_label(fd, "user.dsagent.table", table, sizeof(table));
        type_of(type, name, &key_type, &extension);
        egress_upload_artifact(b, e, dump_dir, dir_fd, name,
                               &(EgressArtifact){ .type = key_type, .extension = extension,
                                                  .process = process[0] ? process : "process",
                                                  .pid = (pid_t)strtol(pid, NULL, 10), .unit = unit,
                                                  .request_id = strtoull(id, NULL, 16),
                                                  .requester = origin[0] || !requester[0]
                                                                       ? (uid_t)-1
                                                                       : (n = strtoull(requester, NULL, 10),
                                                                          n < UINT32_MAX ? (uid_t)n : (uid_t)-1),
                                                  .rule = table[0] ? table : NULL });
}

void egress_resubmit_pending(Broker *b) {
        _cleanup_close_ int dir_fd = -EBADF;
        const char *dump_dir = b->policy->agent.dump_dir, *why = NULL;
        struct dirent *de;
        DIR *d;
        int walk_fd;

        if (!b->egress || b->policy->n_egress == 0 || dump_dir_open(dump_dir, &dir_fd, &why) != 0)
                return;
        walk_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        if (walk_fd < 0 || !(d = fdopendir(walk_fd))) {
                safe_close(walk_fd);
                return;
        }
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        resubmit_one(b, dump_dir, dir_fd, de->d_name);
        closedir(d);
}
