/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The crashes and crash requests (crashes.h): the journal's crashes read by a worker and decided one
 * by one in the loop; a crash's core checked and decompressed by a worker, published in dump_dir for
 * its readers and handed over.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent/loop/admission.h"
#include "agent/loop/broker-state.h"
#include "common/cleanup.h"
#include "agent/runtime/command-steps.h"
#include "agent/loop/connection.h"
#include "agent/crashes/crash-core.h"
#include "agent/crashes/crash-entry.h"
#include "agent/crashes/crashes.h"
#include "agent/decide/decision.h"
#include "agent/dumps/dump-publish.h"
#include "agent/workers/jobs.h"
#include "agent/decide/pam-check.h"
#include "agent/support/test-hooks.h"

#define USEC_PER_SEC 1000000ULL
/* A listing stops producing past this much queued until its client reads (as ps does) */
#define CRASHES_QUEUE_HIGH (64 * 1024)
/* After the copy's deadline, the time to label, publish and hand the core over */
#define CRASH_HAND_OVER_USEC (30 * USEC_PER_SEC)

typedef struct CrashesWork {
        Request *request;
        CrashQuery query;
        unsigned count;         /* crashes listed */
        unsigned untrusted;     /* entries claiming to be systemd-coredump's that were not */
        /* crash: the one asked for, once found, and its copy */
        CrashEntry *entry;
        bool want_fd;
        bool claimed;           /* counts as a dump (admission.h) */
        AdmissionKey key;
        int dir_fd, file_fd, control_fd;
        bool slot_claimed;
        unsigned slot;
        sd_event_source *control_source;
        JobCall job;
        uint64_t started_usec;
} CrashesWork;

static void crashes_work_free(void *p) {
        CrashesWork *work = p;

        if (!work)
                return;
        if (work->job.job)
                worker_job_cancel(work->job.job);
        work->control_source = sd_event_source_disable_unref(work->control_source);
        safe_close(work->control_fd);
        safe_close(work->file_fd);
        safe_close(work->dir_fd);
        if (work->slot_claimed)
                dump_slots_release(work->request->broker->dump_slots, work->slot);
        if (work->claimed)
                admission_end(work->request->broker->admission, ADMISSION_DUMP, &work->key);
        free(work->entry);
        free(work);
}

/* The request's work, a crashes command's decision to come; NULL when there is no memory, the client told. */
static CrashesWork *crashes_work_new(Request *req) {
        CrashesWork *work = calloc(1, sizeof(*work));
        uint64_t now = 0;

        req->ask = (PolicyRequest){ .command = POLICY_COMMAND_CRASHES };
        if (!work) {
                request_reply_oom(req);
                return NULL;
        }
        (void)sd_event_now(req->broker->event, CLOCK_MONOTONIC, &now);
        *work = (CrashesWork){ .request = req, .dir_fd = -EBADF, .file_fd = -EBADF, .control_fd = -EBADF,
                               .started_usec = now };
        req->work = work;
        req->work_free = crashes_work_free;
        return work;
}

/* One CRASH frame: what systemd-coredump recorded, each fact of the process's own as untrusted text. */
static void crash_frame(WireWriter *w, const CrashEntry *e) {
        wire_writer_begin(w, WIRE_REPLY_CRASH);
        wire_writer_put_string(w, WIRE_TAG_CRASH_ID, e->id);
        wire_writer_put_u64(w, WIRE_TAG_TIME, e->time_usec);
        wire_writer_put_u32(w, WIRE_TAG_PID, e->pid);
        wire_writer_put_u32(w, WIRE_TAG_UID, e->uid);
        if (e->unit[0] && wire_unit_name_is_valid(e->unit, strlen(e->unit)))
                wire_writer_put_string(w, WIRE_TAG_UNIT, e->unit);
        commands_put_untrusted_string(w, WIRE_TAG_NAME, e->name[0] ? e->name : NULL);
        commands_put_untrusted_string(w, WIRE_TAG_EXE, e->exe[0] ? e->exe : NULL);
        commands_put_untrusted_string(w, WIRE_TAG_CGROUP, e->cgroup[0] ? e->cgroup : NULL);
        if (e->container_id[0])
                wire_writer_put_string(w, e->cgroup_vouched ? WIRE_TAG_CONTAINER : WIRE_TAG_UNVERIFIED_CONTAINER,
                                       e->container_id);
        wire_writer_put_u32(w, WIRE_TAG_SIGNAL, e->signal);
        wire_writer_put_u32(w, WIRE_TAG_STORED, e->stored);
        if (e->stored)
                wire_writer_put_u64(w, WIRE_TAG_SIZE, e->stored_size);
        if (e->dotnet != CRASH_DOTNET_UNKNOWN)
                wire_writer_put_u32(w, WIRE_TAG_DOTNET, e->dotnet == CRASH_DOTNET_YES);
        if (e->truncated)
                wire_writer_put_u32(w, WIRE_TAG_TRUNCATED, 1);
}

/* The crash a request is about, in its record, as a process's facts are. */
static void audit_crash_target(Request *req, const CrashEntry *e) {
        req->audit.have_target = true;
        req->audit.target_pid = (pid_t)e->pid;
        req->audit.target_uid = e->uid;
        req->audit.target_unit = e->unit[0] ? e->unit : NULL;
        req->audit.target_exe = e->exe[0] ? e->exe : NULL;
        req->audit.target_cgroup = e->cgroup[0] ? e->cgroup : NULL;
        req->audit.target_container_id = e->container_id[0] ? e->container_id : NULL;
        req->audit.target_cgroup_vouched = e->cgroup_vouched;
}

/* A worker's journal read failed: the client is told so, never told "none". */
static void crashes_read_failed(Request *req, int r) {
        if (r == JOBS_E_TIMEOUT)
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BUSY,
                                    "reading the journal took longer than the reply's deadline");
        else if (r == JOBS_E_WORKER)
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BUSY, "no worker could read the journal");
        else if (r == -ENODATA)
                request_reply_errno(req, r, "cannot read the journal: not one of its files could be opened");
        else
                request_reply_errno(req, r < 0 ? r : -EIO, "cannot read the journal");
}

/* ---- crashes ---- */

static void crashes_read(Request *req);

static void crashes_on_room(Request *req, uint32_t revents) {
        (void)connection_watch_client(req->connection, 0, NULL);
        if (revents & (EPOLLHUP | EPOLLERR)) {
                request_reply_errno(req, -ECONNRESET, "the client went away during the listing");
                return;
        }
        crashes_read(req);
}

static void crashes_listed(Request *req) {
        CrashesWork *work = req->work;
        char reason[160];

        req->audit.have_result_count = true;
        req->audit.result_count = work->count;
        if (work->untrusted > 0)
                snprintf(reason, sizeof(reason),
                         "listed the crashes the requester may see; %u entries that claim to be systemd-coredump's "
                         "are not, and were left out", work->untrusted);
        else
                snprintf(reason, sizeof(reason), "listed the crashes the requester may see");
        request_reply_done(req, NULL, reason);
}

static void crashes_read_done(Request *req, int r, const JobCrashesResult *res) {
        CrashesWork *work = req->work;
        PolicyRequester who = requester_of(req);
        _cleanup_free_ WireWriter *w = NULL;
        size_t at = 0;

        if (r != 0) {
                crashes_read_failed(req, r);
                return;
        }
        w = malloc(sizeof(*w));
        if (!w) {
                request_reply_oom(req);
                return;
        }
        for (unsigned i = 0; i < res->n; i++) {
                CrashEntry e;
                PolicyTarget pt;
                PolicyVerdict v;
                size_t used;

                if (crash_entry_unpack(res->packed + at, res->size - at, &e, &used) < 0) {
                        request_reply_errno(req, -EBADMSG, "cannot read the worker's answer");
                        return;
                }
                at += used;
                pt = crash_entry_policy_target(&e);
                policy_crash_check(req->policy, &who, &pt, &v);
                if (!v.allowed)
                        continue; /* as if it never was */
                crash_frame(w, &e);
                r = connection_queue_frame(req->connection, w);
                if (r < 0) {
                        request_reply_errno(req, r, "cannot queue the listing");
                        return;
                }
                work->count++;
        }
        work->untrusted += res->untrusted;
        if (!res->more) {
                crashes_listed(req);
                return;
        }
        snprintf(work->query.after, sizeof(work->query.after), "%s", res->cursor);
        if (connection_flush(req->connection) > CRASHES_QUEUE_HIGH) {
                r = connection_watch_client(req->connection, EPOLLOUT, crashes_on_room);
                if (r < 0)
                        request_reply_errno(req, r, "cannot wait for the client");
                return;
        }
        crashes_read(req);
}

static void crashes_read(Request *req) {
        CrashesWork *work = req->work;
        int r;

        r = jobs_read_crashes(req, &work->query, true, crashes_read_done);
        if (r != 0)
                crashes_read_failed(req, r);
}

static void crashes_after_pam(int result, const char *message, void *userdata) {
        Request *req = userdata;

        req->pam_query = NULL;
        if (result != 0) {
                request_reply_error(req, AUDIT_DECISION_DENIED, WIRE_ERROR_DENIED,
                                    message && *message ? message : "the PAM account check could not be made");
                return;
        }
        crashes_read(req);
}

void crashes_list(Request *req, const WireMessage *m) {
        const char *service = req->policy->agent.pam_service;
        CrashesWork *work;
        uint64_t since = 0;
        int r;

        work = crashes_work_new(req);
        if (!work)
                return;
        (void)wire_message_get_u64(m, WIRE_TAG_TIME, &since);
        work->query.since_usec = since;
        r = commands_set_deadline(req, req->broker->config.reply_timeout_usec, "the listing's deadline (30 s)");
        if (r < 0) {
                request_reply_errno(req, r, "cannot set the listing's deadline");
                return;
        }
        if (!service || req->peer->uid == 0) {
                crashes_read(req);
                return;
        }
        r = req->broker->pam ? pam_checker_query(req->broker->pam, service, req->peer->uid, crashes_after_pam, req,
                                                 &req->pam_query)
                             : PAM_CHECK_E_UNAVAILABLE;
        if (r != 0)
                crashes_after_pam(PAM_CHECK_E_UNAVAILABLE, NULL, req);
}

/* ---- crash ID: its core ---- */

static void copy_fail(Request *req, WireError error, const char *why) {
        request_reply_error(req, AUDIT_DECISION_FAILED, error, why);
}

/* No room in dump_dir for the copy: @why (which limit, the numbers), and what the requester can do. */
static void copy_fail_no_space(Request *req, const char *why) {
        _cleanup_free_ char *text = dump_no_space_answer(req->policy, why);

        copy_fail(req, WIRE_ERROR_NO_SPACE, text ? text : why);
}

/* Who may read the copy: the requester and the rule's readers, unless the process's memory was root's alone. */
static void copy_readers(const Request *req, bool readable, uid_t *users, size_t max, AclGrant *g) {
        const PolicyRule *rule = req->verdict.rule;
        size_t n = 0;

        *g = (AclGrant){};
        if (!readable)
                return;
        if (req->peer->uid != 0)
                users[n++] = req->peer->uid;
        for (size_t i = 0; rule && i < rule->reader_users.n && n < max; i++)
                if (rule->reader_users.ids[i] != req->peer->uid && rule->reader_users.ids[i] != 0)
                        users[n++] = rule->reader_users.ids[i];
        *g = (AclGrant){ .users = users, .n_users = n, .groups = rule ? rule->reader_groups.ids : NULL,
                         .n_groups = rule ? rule->reader_groups.n : 0 };
}

static void copy_name(const Request *req, const CrashEntry *e, char *buf, size_t size) {
        char name[DUMP_NAME_PART_SIZE], stamp[32];
        time_t when = (time_t)(e->time_usec / USEC_PER_SEC);
        struct tm tm;

        dump_name_part(e->name[0] ? e->name : NULL, name, sizeof(name));
        gmtime_r(&when, &tm);
        strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
        snprintf(buf, size, "crash.%s.%" PRIu32 ".%s.%016" PRIx64, name, e->pid, stamp, req->id);
}

/* The CRASH frame, then the DUMP frame with the copy's fd when the requester may read it. */
static int copy_hand_over(Request *req, const char *name, const char *path, uint64_t size, bool readable) {
        CrashesWork *work = req->work;
        _cleanup_free_ WireWriter *w = malloc(sizeof(*w));
        _cleanup_close_ int fd = -EBADF;
        struct timespec now;
        int r;

        if (!w)
                return -ENOMEM;
        crash_frame(w, work->entry);
        r = connection_queue_frame(req->connection, w);
        if (r < 0)
                return r;
        (void)clock_gettime(CLOCK_REALTIME, &now);
        wire_writer_begin(w, WIRE_REPLY_DUMP);
        wire_writer_put_string(w, WIRE_TAG_PATH, path);
        wire_writer_put_u64(w, WIRE_TAG_SIZE, size);
        wire_writer_put_string(w, WIRE_TAG_DUMP_TYPE, "crash");
        wire_writer_put_u32(w, WIRE_TAG_READABLE, readable);
        wire_writer_put_u32(w, WIRE_TAG_PID, work->entry->pid);
        wire_writer_put_u32(w, WIRE_TAG_UID, work->entry->uid);
        if (work->entry->unit[0] && wire_unit_name_is_valid(work->entry->unit, strlen(work->entry->unit)))
                wire_writer_put_string(w, WIRE_TAG_UNIT, work->entry->unit);
        commands_put_untrusted_string(w, WIRE_TAG_NAME, work->entry->name[0] ? work->entry->name : NULL);
        wire_writer_put_u64(w, WIRE_TAG_TIME, (uint64_t)now.tv_sec * USEC_PER_SEC + (uint64_t)now.tv_nsec / 1000);
        if (work->want_fd && readable) {
                fd = openat(work->dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
                if (fd < 0)
                        return -errno;
        }
        r = connection_send_frame_now(req->connection, w, fd);
        if (r != -EAGAIN)
                return r;
        return fd >= 0 ? connection_queue_frame_with_fd(req->connection, w, TAKE_FD(fd))
                       : connection_queue_frame(req->connection, w);
}

/* The copy is whole: labelled, named, recorded, handed over. */
static void copy_publish(Request *req, uint64_t bytes) {
        CrashesWork *work = req->work;
        const CrashEntry *e = work->entry;
        const PolicyAgentSettings *a = &req->policy->agent;
        bool readable = !e->changed_credentials;
        _cleanup_free_ char *path = NULL;
        uid_t users[64];
        AclGrant readers;
        DumpAttributes attrs;
        char name[128];
        uint64_t now = 0;
        int r;

        copy_readers(req, readable, users, ELEMENTSOF(users), &readers);
        copy_name(req, e, name, sizeof(name));
        attrs = (DumpAttributes){ .requester = req->peer->uid, .charged = req->peer->charged_uid,
                                  .target_pid = (pid_t)e->pid, .target_uid = e->uid,
                                  .target_unit = e->unit[0] ? e->unit : NULL, .target_exe = e->exe[0] ? e->exe : NULL,
                                  .target_name = e->name[0] ? e->name : NULL, .dump_type = "crash",
                                  .request_id = req->id };
        r = dump_publish_fd(work->dir_fd, work->file_fd, &readers, &attrs, name);
        if (r == DUMP_PUBLISH_E_NO_SPACE) {
                char why[DUMP_SPACE_WHY_MAX];

                copy_fail_no_space(req, dump_space_full_why(work->dir_fd, &a->max_use, &a->keep_free,
                                                            dump_slots_total(req->broker->dump_slots),
                                                            "the core does not fit: the dump directory's file system "
                                                            "filled up as it was named",
                                                            why, sizeof(why)));
                return;
        }
        if (r != 0 || asprintf(&path, "%s/%s", a->dump_dir, name) < 0) {
                request_reply_errno(req, r < 0 ? r : -ENOMEM, "cannot publish the core");
                return;
        }
        (void)sd_event_now(req->broker->event, CLOCK_MONOTONIC, &now);
        r = audit_log_dump(req->broker->config.audit_sink,
                           &(AuditDumpEvent){ .request_id = req->id, .requester = req->peer->uid,
                                              .target_pid = (pid_t)e->pid, .target_uid = e->uid,
                                              .target_unit = req->audit.target_unit, .target_exe = req->audit.target_exe,
                                              .target_container_id = req->audit.target_container_id,
                                              .target_cgroup = req->audit.target_cgroup,
                                              .target_cgroup_vouched = e->cgroup_vouched,
                                              .rule = req->verdict.rule_name, .path = path, .size = bytes,
                                              .dump_type = "crash", .readable = readable,
                                              .duration_usec = now - work->started_usec,
                                              .reservation = &req->audit_room });
        if (r < 0 && !a->audit_failure_allow) {
                (void)unlinkat(work->dir_fd, name, 0);
                request_reply_errno(req, r, "the copy's audit record could not be written; the copy was removed");
                return;
        }
        r = copy_hand_over(req, name, path, bytes, readable);
        if (r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN) {
                (void)unlinkat(work->dir_fd, name, 0);
                copy_fail(req, WIRE_ERROR_INTERNAL, "the client went away before the core was handed over; it was removed");
                return;
        }
        if (r < 0) {
                request_reply_errno(req, r, "cannot send the core's reply");
                return;
        }
        request_reply_done(req, req->verdict.rule_name,
                           readable ? "crash core copied"
                                    : "crash core copied; only root may read it: the process changed credentials");
}

static void copy_done(void *userdata, int r, uint64_t bytes, const char *why) {
        Request *req = userdata;
        CrashesWork *work = req->work;

        work->control_source = sd_event_source_disable_unref(work->control_source);
        if (work->slot_claimed) {
                dump_slots_release(req->broker->dump_slots, work->slot);
                work->slot_claimed = false;
        }
        /* the copy is over: the crash is free for the caller's next copy by the time she is answered, not once
         * the request is freed after the answer (her next request could come first and be refused busy) */
        if (work->claimed) {
                admission_end(req->broker->admission, ADMISSION_DUMP, &work->key);
                work->claimed = false;
        }
        switch (r) {
        case 0:
                copy_publish(req, bytes);
                return;
        case JOBS_E_CRASH_GONE:
                request_reply_error_as(req, AUDIT_DECISION_FAILED, WIRE_ERROR_NO_SUCH_CRASH,
                                       "no core is stored for this crash any more",
                                       "no core is stored for this crash (systemd-coredump removed it, or kept none)");
                return;
        case JOBS_E_CRASH_UNTRUSTED:
        case JOBS_E_CRASH_CORRUPT:
        case JOBS_E_CRASH_TOO_LARGE:
        case JOBS_E_NOT_CORE:
                copy_fail(req, WIRE_ERROR_CORE_UNUSABLE, why ? why : "the stored core cannot be used");
                return;
        case JOBS_E_NO_SPACE:
                copy_fail_no_space(req, why ? why : "the core does not fit in the dump directory");
                return;
        case JOBS_E_TIMEOUT:
                copy_fail(req, WIRE_ERROR_BUSY, "the core was not decompressed within --dump-timeout");
                return;
        case JOBS_E_WORKER:
                copy_fail(req, WIRE_ERROR_BUSY, "no worker could copy the core");
                return;
        default:
                request_reply_errno(req, r < 0 ? r : -EIO, why ? why : "cannot copy the core");
                return;
        }
}

static int copy_on_control(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Request *req = userdata;
        DumpProgress p;
        uint64_t bytes = 0;
        bool news = false;

        while (recv(fd, &p, sizeof(p), MSG_DONTWAIT) == sizeof(p)) {
                bytes = p.bytes;
                news = true;
        }
        if (news)
                commands_report_progress(req, bytes);
        return 0;
}

static void copy_on_client(Request *req, uint32_t revents) {
        copy_fail(req, WIRE_ERROR_INTERNAL, "the client went away; the copy was cancelled");
}

/* dump_dir, the unnamed file, a slot for its bytes, the progress socket; then the worker copies. */
static void copy_start(Request *req) {
        CrashesWork *work = req->work;
        const PolicyAgentSettings *a = &req->policy->agent;
        DumpLimits limits = { .max_use = a->max_use, .keep_free = a->keep_free };
        _cleanup_close_ int control_theirs = -EBADF;
        const char *why = NULL;
        char what[96];
        int sv[2], r;

        snprintf(what, sizeof(what), "the copy's deadline (--dump-timeout, %llu s, and 30 s)",
                 (unsigned long long)(req->broker->config.dump_timeout_usec / USEC_PER_SEC));
        r = commands_set_deadline(req, req->broker->config.dump_timeout_usec + CRASH_HAND_OVER_USEC, what);
        if (r >= 0)
                r = connection_watch_client(req->connection, EPOLLRDHUP, copy_on_client);
        if (r >= 0) {
                r = dump_dir_open(a->dump_dir, &work->dir_fd, &why);
                if (r > 0) {
                        copy_fail(req, WIRE_ERROR_INTERNAL, why);
                        return;
                }
        }
        if (r >= 0 && (work->file_fd = openat(work->dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) < 0)
                r = -errno;
        if (r >= 0 && (r = dump_slots_claim(req->broker->dump_slots, &work->slot)) == 0)
                work->slot_claimed = true;
        if (r >= 0 && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                r = -errno;
        if (r >= 0) {
                work->control_fd = sv[0];
                control_theirs = sv[1];
                r = sd_event_add_io(req->broker->event, &work->control_source, work->control_fd, EPOLLIN,
                                    copy_on_control, req);
        }
        if (r >= 0)
                r = jobs_copy_crash(req->broker,
                                    &(JobDumpFile){ .owner = req->peer->charged_uid, .file_fd = work->file_fd,
                                                    .dir_fd = work->dir_fd, .control_fd = control_theirs,
                                                    .limits = limits, .slot = work->slot },
                                    work->entry, CRASH_CORE_SIZE_MAX_DEFAULT, copy_done, req, &work->job);
        if (r == JOBS_E_WORKER)
                copy_fail(req, WIRE_ERROR_BUSY, "no worker could copy the core");
        else if (r != 0)
                request_reply_errno(req, r < 0 ? r : -EIO, why ? why : "cannot prepare the copy");
}

static void copy_decided(Request *req) {
        CrashesWork *work = req->work;
        const char *why = NULL;
        int r;

        req->audit.rule = req->verdict.rule_name;
        if (!req->verdict.allowed) {
                /* the record says why; the requester hears what a crash that never was gets */
                request_reply_error_as(req, AUDIT_DECISION_DENIED, WIRE_ERROR_NO_SUCH_CRASH, req->verdict.reason,
                                       CRASHES_NO_SUCH_CRASH);
                return;
        }
        /* whether its core is still stored, and is the one systemd-coredump stored, the copy's worker says */
        work->key = (AdmissionKey){ .pid = (pid_t)work->entry->pid, .start_time = work->entry->time_usec,
                                    .requester = req->peer->charged_uid };
        r = admission_begin(req->broker->admission, ADMISSION_DUMP, &work->key,
                            &(AdmissionLimits){ .per_target = 1, .per_requester = req->policy->agent.max_dumps_per_user,
                                                .in_all = req->policy->agent.max_concurrent_dumps },
                            &why);
        if (r == ADMISSION_E_BUSY) {
                copy_fail(req, WIRE_ERROR_BUSY, why);
                return;
        }
        if (r != 0) {
                request_reply_errno(req, r, "cannot count the copy");
                return;
        }
        work->claimed = true;
        /* the copy's record and the request's, before anything is written */
        if (!request_hold_audit(req))
                return;
        copy_start(req);
}

static void copy_found(Request *req, int r, const JobCrashesResult *res) {
        CrashesWork *work = req->work;
        PolicyTarget pt;
        size_t used;

        if (r != 0) {
                crashes_read_failed(req, r);
                return;
        }
        if (res->n == 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_NO_SUCH_CRASH, CRASHES_NO_SUCH_CRASH);
                return;
        }
        work->entry = malloc(sizeof(*work->entry));
        if (!work->entry) {
                request_reply_oom(req);
                return;
        }
        if (crash_entry_unpack(res->packed, res->size, work->entry, &used) < 0) {
                request_reply_errno(req, -EBADMSG, "cannot read the worker's answer");
                return;
        }
        audit_crash_target(req, work->entry);
        pt = crash_entry_policy_target(work->entry);
        decide_crash(req, &pt, true, copy_decided);
}

void crash_copy_start(Request *req, const WireMessage *m) {
        _cleanup_free_ char *id = NULL;
        CrashesWork *work;
        uint32_t want_fd = 0;
        int r;

        work = crashes_work_new(req);
        if (!work)
                return;
        if (wire_message_get_string(m, WIRE_TAG_CRASH_ID, &id) != 0 ||
            crash_id_parse(id, &work->query.id_seconds, &work->query.id_pid) < 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                    "which crash? a CRASH_ID as dsctl crashes lists it (SECONDS-PID) is needed");
                return;
        }
        (void)wire_message_get_u32(m, WIRE_TAG_WANT_FD, &want_fd);
        work->want_fd = want_fd == 1;
        req->audit_records = 2; /* the copy's record, then the request's */
        r = jobs_read_crashes(req, &work->query, true, copy_found);
        if (r != 0)
                crashes_read_failed(req, r);
}
