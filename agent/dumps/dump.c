/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The dump command (dump.h): stages, asks the runtime, writes and publishes a core dump for exactly
 * its readers; commands.c and proxy.c start it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "agent/dumps/acl.h"
#include "agent/loop/broker-state.h"
#include "common/cleanup.h"
#include "agent/runtime/command-steps.h"
#include "agent/loop/connection.h"
#include "agent/decide/decision.h"
#include "common/dotnet-ipc.h"
#include "agent/dumps/dump-publish.h"
#include "agent/egress/egress-upload.h"
#include "agent/dumps/dump-stage.h"
#include "agent/dumps/dump-take.h"
#include "agent/dumps/dump-writer.h"
#include "agent/dumps/dump.h"
#include "agent/ports/ports.h"
#include "agent/workers/jobs.h"
#include "agent/runtime/runtime-call.h"
#include "agent/ports/startup.h"
#include "agent/support/test-hooks.h"
#include "common/text.h"
#include "common/unaligned.h"

#define USEC_PER_SEC 1000000ULL
/* After the runtime's deadline, the time to check, label, publish and hand over a dump. */
#define DUMP_HAND_OVER_USEC (30 * USEC_PER_SEC)

/*
 * A dump for a client, step by step: decided; counted (admission.h); the
 * runtime's socket found (a worker); a runtime suspended at startup refused,
 * but for a full dump (startup.h); then taken into an unnamed file of
 * dump_dir (dump-take.h: staged, streamed by a worker, paced). When it is
 * whole, it is labelled for the requester and the rule's readers, named, and
 * handed over. The client's hang-up cancels it all.
 */
typedef struct DumpWork {
        Request *request;
        DumpTake *take;
        uint64_t started_usec;
        DumpDelivery delivery;
        bool claimed;           /* holds one of the dump slots (admission.h) */
        AdmissionKey key;
        int dir_fd;             /* dump_dir, once the dump is taken (the take's) */
        int file_fd;            /* the dump, once taken (the take's): handed over unnamed for DUMP_DELIVER_FD_ONLY */
        bool stored;            /* it has a name in dump_dir */
} DumpWork;

static void dump_work_free(void *p) {
        DumpWork *work = p;

        if (!work)
                return;
        dump_take_free(work->take);
        if (work->claimed)
                admission_end(work->request->broker->admission, ADMISSION_DUMP, &work->key);
        free(work);
}

static uint64_t monotonic_usec(const Request *req) {
        uint64_t now = 0;

        (void)sd_event_now(req->broker->event, CLOCK_MONOTONIC, &now);
        return now;
}

/* The name is the agent's: nothing of it is taken from a client, and the target's part is sanitized.
 * @kind.NAME.PID.@detail.TIME.REQUESTID@suffix: "dump" and its type, or a session's copy and "" (its kind). */
static void request_file_name(const Request *req, const char *kind, const char *detail, const char *suffix, char *buf,
                              size_t size) {
        char name[DUMP_NAME_PART_SIZE], stamp[32];
        struct tm tm;
        time_t now = time(NULL);

        dump_name_part(req->target->name, name, sizeof(name));
        gmtime_r(&now, &tm);
        strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
        snprintf(buf, size, "%s.%s.%d.%s%s%s.%016" PRIx64 "%s", kind, name, (int)req->target->pid, detail,
                 detail[0] ? "." : "", stamp, req->id, suffix);
}

static void dump_file_name(const Request *req, char *buf, size_t size) {
        request_file_name(req, "dump", policy_dump_type_to_string(req->ask.dump_type), "", buf, size);
}

/* Who may read it: the requester and the rule's readers, unless the process's memory is root's alone. */
static void dump_readers(const Request *req, bool readable, uid_t *users, size_t *n_users, AclGrant *g) {
        const PolicyRule *rule = req->verdict.rule;

        *n_users = 0;
        *g = (AclGrant){};
        if (!readable)
                return;
        if (req->peer->uid != 0)
                users[(*n_users)++] = req->peer->uid;
        g->users = users;
        g->n_users = *n_users;
        if (rule) {
                for (size_t i = 0; i < rule->reader_users.n && *n_users < 64; i++)
                        if (rule->reader_users.ids[i] != req->peer->uid && rule->reader_users.ids[i] != 0)
                                users[(*n_users)++] = rule->reader_users.ids[i];
                g->n_users = *n_users;
                g->groups = rule->reader_groups.ids;
                g->n_groups = rule->reader_groups.n;
        }
}

static int open_published(int dir_fd, const char *name) {
        return openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
}

/* A read-only description of the unnamed dump in @fd: the one the take wrote is read-write. */
static int open_unnamed(int fd) {
        char path[32];

        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        return open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
}

/* The client's end of the socket is closed (or shut for writing, which dsctl never does during a dump). */
static bool client_gone(const Request *req) {
        struct pollfd p = { .fd = req->connection->fd, .events = POLLRDHUP };

        return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/*
 * Sends the DUMP frame now, with its fd when the requester asked and may
 * read it. A client that is reading gets it at once; one that is not reading
 * just now gets it queued; one that is gone makes this fail.
 *
 * Return: 0, -EPIPE, -ECONNRESET or -ENOTCONN when the client is gone, or
 * another negative errno.
 */
static int dump_hand_over(DumpWork *work, WireWriter *w, const char *name, bool readable) {
        Connection *c = work->request->connection;
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (work->delivery != DUMP_DELIVER_STORED && readable) {
                fd = work->stored ? open_published(work->dir_fd, name) : open_unnamed(work->file_fd);
                if (fd < 0)
                        return -errno;
        }
        r = connection_send_frame_now(c, w, fd); /* -EAGAIN: not now, behind what is queued or for room */
        if (r != -EAGAIN)
                return r;
        return fd >= 0 ? connection_queue_frame_with_fd(c, w, TAKE_FD(fd)) : connection_queue_frame(c, w);
}

static void dump_reply_frame(WireWriter *w, const Request *req, const char *path, uint64_t size, bool readable) {
        struct timespec now;

        (void)clock_gettime(CLOCK_REALTIME, &now);
        wire_writer_begin(w, WIRE_REPLY_DUMP);
        if (path) /* none: handed over unnamed, not stored */
                wire_writer_put_string(w, WIRE_TAG_PATH, path);
        wire_writer_put_u64(w, WIRE_TAG_SIZE, size);
        wire_writer_put_string(w, WIRE_TAG_DUMP_TYPE, policy_dump_type_to_string(req->ask.dump_type));
        wire_writer_put_u32(w, WIRE_TAG_READABLE, readable);
        wire_writer_put_u32(w, WIRE_TAG_PID, (uint32_t)req->target->pid);
        wire_writer_put_u32(w, WIRE_TAG_UID, target_euid(req->target));
        wire_writer_put_string(w, WIRE_TAG_UNIT, req->target->unit);
        commands_put_untrusted_string(w, WIRE_TAG_NAME, req->target->name);
        wire_writer_put_u64(w, WIRE_TAG_TIME, (uint64_t)now.tv_sec * USEC_PER_SEC + (uint64_t)now.tv_nsec / 1000);
}

/* The rule names a store: the published dump goes there too (egress-upload.h), its requester answered already. */
static void dump_egress(DumpWork *work, const char *name, bool readable) {
        Request *req = work->request;
        const PolicyRule *rule = req->verdict.rule;

        /* a dump only root may read (the process changed credentials) is not sent where the bucket's readers
         * would read it */
        if (!rule || !rule->egress || !readable)
                return;
        egress_upload_artifact(req->broker, rule->egress, req->policy->agent.dump_dir, work->dir_fd, name,
                               &(EgressArtifact){ .type = "dump", .extension = "dmp", .process = req->target->name,
                                                  .pid = req->target->pid, .unit = req->target->unit,
                                                  .container = req->target->container_id,
                                                  .request_id = req->id, .requester = req->peer->uid,
                                                  .rule = req->verdict.rule_name });
}

int dump_publish_session_copy(Request *req, int dir_fd, int file_fd, const char *kind, const char *suffix,
                              uint64_t size, char *ret_path, size_t path_size) {
        const PolicyRule *rule = req->verdict.rule;
        uid_t users[64];
        size_t n_users;
        AclGrant readers;
        char name[128], path[PATH_MAX];
        int r;

        dump_readers(req, true, users, &n_users, &readers);
        request_file_name(req, kind, "", suffix, name, sizeof(name));
        r = dump_publish_fd(dir_fd, file_fd, &readers,
                            &(DumpAttributes){ .requester = req->peer->uid, .charged = req->peer->charged_uid,
                                               .target_pid = req->target->pid, .target_uid = target_euid(req->target),
                                               .target_unit = req->target->unit, .target_exe = req->target->exe,
                                               .target_name = req->target->name, .dump_type = kind,
                                               .request_id = req->id },
                            name);
        if (r != 0)
                return r;
        snprintf(path, sizeof(path), "%s/%s", req->policy->agent.dump_dir, name);
        /* no copy without its record: a copy whose record cannot be written goes again */
        r = audit_log_artifact(req->broker->config.audit_sink, req->policy->agent.audit_failure_allow, dir_fd, name,
                               &(AuditDumpEvent){
                .request_id = req->id, .requester = req->peer->uid, .target_pid = req->target->pid,
                .target_uid = target_euid(req->target), .target_unit = req->target->unit, .target_exe = req->target->exe,
                .target_container_id = req->target->container_id, .target_pod_uid = req->target->pod_uid,
                .target_cgroup = req->target->cgroup, .target_cgroup_vouched = req->target->cgroup_vouched,
                .rule = req->verdict.rule_name, .path = path, .size = size, .dump_type = kind, .readable = true,
                .reservation = &req->audit_room });
        if (r < 0)
                return r;
        if (rule && rule->egress)
                egress_upload_artifact(req->broker, rule->egress, req->policy->agent.dump_dir, dir_fd, name,
                                       &(EgressArtifact){ .type = kind, .extension = suffix[0] == '.' ? suffix + 1 : suffix,
                                                          .process = req->target->name, .pid = req->target->pid,
                                                          .unit = req->target->unit,
                                                          .container = req->target->container_id,
                                                          .request_id = req->id, .requester = req->peer->uid,
                                                          .rule = req->verdict.rule_name });
        snprintf(ret_path, path_size, "%s", path);
        return 0;
}

static void dump_reply(DumpWork *work, const char *name, uint64_t size, bool readable) {
        Request *req = work->request;
        _cleanup_free_ WireWriter *w = NULL;
        _cleanup_free_ char *path = NULL;
        const PolicyAgentSettings *a = &req->policy->agent;
        const char *type = policy_dump_type_to_string(req->ask.dump_type);
        AuditDumpEvent e;
        int r;

        w = malloc(sizeof(*w));
        if (!w || (work->stored && asprintf(&path, "%s/%s", a->dump_dir, name) < 0)) {
                request_reply_oom(req);
                return;
        }
        e = (AuditDumpEvent){
                .request_id = req->id, .requester = req->peer->uid, .target_pid = req->target->pid,
                .target_uid = target_euid(req->target), .target_unit = req->target->unit, .target_exe = req->target->exe,
                .target_container_id = req->target->container_id, .target_pod_uid = req->target->pod_uid,
                .target_cgroup = req->target->cgroup, .target_cgroup_vouched = req->target->cgroup_vouched,
                .rule = req->verdict.rule_name, .path = path, .size = size, .dump_type = type, .readable = readable,
                .duration_usec = monotonic_usec(req) - work->started_usec, .reservation = &req->audit_room,
        };
        r = audit_log_dump(req->broker->config.audit_sink, &e);
        if (r < 0 && !a->audit_failure_allow) {
                if (work->stored)
                        (void)unlinkat(work->dir_fd, name, 0);
                request_reply_errno(req, r, "the dump's audit record could not be written; the dump was removed");
                return;
        }

        test_hook_pause("before-dump-reply");
        dump_reply_frame(w, req, path, size, readable);
        r = dump_hand_over(work, w, name, readable);
        if (r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN) {
                /* nobody will be told where it is: a dump nobody knows of only takes space */
                if (work->stored)
                        (void)unlinkat(work->dir_fd, name, 0);
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL,
                                    "the client went away before the dump was handed over; the dump was removed");
                return;
        }
        if (r < 0) {
                request_reply_errno(req, r, "cannot send the dump's reply");
                return;
        }
        if (work->stored)
                dump_egress(work, name, readable);
        request_reply_done(req, req->verdict.rule_name,
                           !readable       ? "dump taken; only root may read it: the process changed credentials"
                           : work->stored ? "dump taken"
                                          : "dump taken and handed to the requester; dump_dir keeps no copy");
}

/* Stops the taking, if it still runs: the runtime's createdump then fails on its next write. */
static void dump_stop(DumpWork *work) {
        work->take = dump_take_free(work->take);
}

static void dump_fail(DumpWork *work, WireError error, const char *why) {
        dump_stop(work);
        request_reply_error(work->request, AUDIT_DECISION_FAILED, error, why);
}

/*
 * No room in dump_dir, once the take has ended: @why says which limit and the numbers
 * (dump-publish.h); what the requester can do about it, and whom to ask for the rest, goes with it.
 */
static void dump_fail_no_space(DumpWork *work, const char *why) {
        _cleanup_free_ char *text = dump_no_space_answer(work->request->policy, why);

        /* the take has ended already; @why may be its own, which lasts until the reply frees it */
        request_reply_error(work->request, AUDIT_DECISION_FAILED, WIRE_ERROR_NO_SPACE, text ? text : why);
}

/* The agent's own failure, @r a negative errno (anything else reads as EIO): the errno goes with it. */
static void dump_fail_errno(DumpWork *work, int r, const char *what) {
        dump_stop(work);
        request_reply_errno(work->request, r < 0 ? r : -EIO, what);
}

/* @error as a module's code mapped it; an internal one keeps @r's errno. */
static void dump_fail_mapped(DumpWork *work, WireError error, int r, const char *why) {
        if (error == WIRE_ERROR_INTERNAL)
                dump_fail_errno(work, r, why);
        else
                dump_fail(work, error, why);
}

/* The dump is whole and the process's credentials known: label it for its readers, name it, hand it over. */
static void dump_publish(DumpWork *work, const DumpTakeResult *res) {
        Request *req = work->request;
        uid_t users[64];
        size_t n_users;
        AclGrant readers;
        DumpAttributes attrs;
        char name[128];
        int r;

        if (client_gone(req)) {
                /* its hang-up is still on its way to dump_on_client(): publish nothing for nobody */
                dump_fail(work, WIRE_ERROR_INTERNAL, "the client went away; the dump was cancelled");
                return;
        }
        dump_readers(req, !res->changed, users, &n_users, &readers);
        dump_file_name(req, name, sizeof(name));
        work->dir_fd = res->dir_fd;
        work->file_fd = res->file_fd;
        /* the requester gets the unnamed file itself: nothing is left in dump_dir */
        if (work->delivery == DUMP_DELIVER_FD_ONLY && !res->changed) {
                dump_reply(work, name, res->bytes, true);
                return;
        }
        attrs = (DumpAttributes){
                .requester = req->peer->uid, .charged = req->peer->charged_uid, .target_pid = req->target->pid,
                .target_uid = target_euid(req->target), .target_unit = req->target->unit,
                .target_exe = req->target->exe, .target_name = req->target->name,
                .dump_type = policy_dump_type_to_string(req->ask.dump_type), .request_id = req->id,
        };
        r = dump_publish_fd(res->dir_fd, res->file_fd, &readers, &attrs, name);
        if (r == DUMP_PUBLISH_E_NO_SPACE) {
                const PolicyAgentSettings *a = &req->policy->agent;
                char why[DUMP_SPACE_WHY_MAX];

                dump_fail_no_space(work, dump_space_full_why(res->dir_fd, &a->max_use, &a->keep_free,
                                                             dump_slots_total(req->broker->dump_slots),
                                                             "the dump does not fit: the dump directory's file "
                                                             "system filled up as it was named",
                                                             why, sizeof(why)));
                return;
        }
        if (r != 0) {
                dump_fail_errno(work, r, "cannot publish the dump");
                return;
        }
        work->stored = true;
        dump_reply(work, name, res->bytes, !res->changed);
}

/*
 * The taking's end: published, or the client told why not. Everything of it has stopped already; the
 * reply frees it (and @res->why, which may be its own), so nothing is freed before the reply.
 */
static void dump_taken(void *userdata, const DumpTakeResult *res) {
        DumpWork *work = userdata;
        Request *req = work->request;

        switch (res->failure) {
        case DUMP_TAKE_OK:
                dump_publish(work, res);
                break;
        case DUMP_TAKE_FAILED:
                if (res->error == WIRE_ERROR_NO_SPACE)
                        dump_fail_no_space(work, res->why);
                else
                        request_reply_error(req, AUDIT_DECISION_FAILED, res->error, res->why);
                break;
        case DUMP_TAKE_ERRNO:
                request_reply_errno(req, res->r, res->why);
                break;
        case DUMP_TAKE_RUNTIME:
                request_reply_runtime_error(req, res->hresult, res->why);
                break;
        case DUMP_TAKE_TARGET:
                commands_reply_connect_error(req, res->r, res->why);
                break;
        }
}

static void dump_progress(void *userdata, uint64_t bytes) {
        DumpWork *work = userdata;

        commands_report_progress(work->request, bytes);
}

/* The client hung up: nobody will read the dump; cancel it rather than keep a slot and the target frozen. */
static void dump_on_client(Request *req, uint32_t revents) {
        DumpWork *work = req->work;

        dump_fail(work, WIRE_ERROR_INTERNAL, "the client went away; the dump was cancelled");
}

/* The dump's own deadline: the runtime's time to write it, and 30 s to check, label and hand it over. */
static int dump_set_deadline(Request *req) {
        uint64_t usec = req->broker->config.dump_timeout_usec;
        char what[96];

        snprintf(what, sizeof(what), "the dump's deadline (--dump-timeout, %llu s, and 30 s)",
                 (unsigned long long)(usec / USEC_PER_SEC));
        return commands_set_deadline(req, usec + DUMP_HAND_OVER_USEC, what);
}

static void dump_stage(Request *req) {
        static const DumpTakeOps ops = { .progress = dump_progress, .done = dump_taken };
        DumpWork *work = req->work;
        int r;

        r = dump_set_deadline(req);
        if (r >= 0)
                r = connection_watch_client(req->connection, EPOLLRDHUP, dump_on_client);
        if (r < 0) {
                dump_fail_errno(work, r, "cannot set the dump's deadlines");
                return;
        }
        r = dump_take_start(&(DumpTakeParams){ .broker = req->broker, .policy = req->policy, .target = req->target,
                                               .type = req->ask.dump_type, .owner = req->peer->charged_uid,
                                               .job_timeout_usec = req->job_timeout_usec > 0
                                                                           ? req->job_timeout_usec
                                                                           : req->broker->config.runtime_timeout_usec,
                                               /* a user's explicit request: tables that yield make room */
                                               .make_room = true, .request_id = req->id,
                                               .requester = req->peer->uid },
                            &ops, work, &work->take);
        if (r != 0)
                dump_fail_mapped(work, dump_take_job_error(r), r, "cannot prepare the dump");
}

/*
 * createdump dies on a runtime suspended at startup for every type but full,
 * and the runtime reports success: such a dump is refused before anything
 * is staged or asked.
 */
static void dump_probed(Request *req, StartupState state) {
        char what[32];

        if (state != STARTUP_STARTED) {
                snprintf(what, sizeof(what), "a %s dump", policy_dump_type_to_string(req->ask.dump_type));
                startup_reply_suspended(req, state, what);
                return;
        }
        dump_stage(req);
}

static void dump_socket_found(Request *req, int r, const char *why) {
        DumpWork *work = req->work;

        if (r != 0 && !commands_port_serves(req, r)) {
                if (r == JOBS_E_TIMEOUT || r == JOBS_E_WORKER)
                        dump_fail(work, r == JOBS_E_TIMEOUT ? WIRE_ERROR_RUNTIME_UNREACHABLE : WIRE_ERROR_BUSY,
                                  "looking at the process did not finish in time");
                else
                        commands_reply_job_error(req, r, why);
                return;
        }
        if (req->ask.dump_type == POLICY_DUMP_FULL)
                dump_stage(req);
        else
                startup_probe(req, dump_probed);
}

/*
 * A user's dump of its own process, whether owner_access or a rule allows it:
 * the user controls that "runtime", which may write as slowly as it likes, so
 * such dumps take slots of their own (max_concurrent_own_dumps, and each
 * user's max_dumps_per_user) and never the host's max_concurrent_dumps, which
 * root's dumps and the rules' of other users' processes are left to.
 */
static bool dump_is_own(const Request *req) {
        return req->peer->uid != 0 && target_euid(req->target) == req->peer->uid;
}

static void dump_decided(Request *req) {
        DumpWork *work = req->work;
        const char *why = NULL;
        int r;

        req->audit.rule = req->verdict.rule_name;
        if (!req->verdict.allowed) {
                request_reply_error(req, AUDIT_DECISION_DENIED, WIRE_ERROR_DENIED, req->verdict.reason);
                return;
        }
        work->key = (AdmissionKey){ .pid = req->target->pid, .start_time = req->target->start_time,
                                    .requester = req->peer->charged_uid, .own = dump_is_own(req) };
        r = admission_begin(req->broker->admission, ADMISSION_DUMP, &work->key,
                            &(AdmissionLimits){ .per_target = 1, .per_requester = req->policy->agent.max_dumps_per_user,
                                                .in_all = work->key.own ? req->policy->agent.max_concurrent_own_dumps
                                                                        : req->policy->agent.max_concurrent_dumps },
                            &why);
        if (r == ADMISSION_E_BUSY) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BUSY, why);
                return;
        }
        if (r != 0) {
                request_reply_errno(req, r, "cannot count the dump");
                return;
        }
        work->claimed = true;
        test_hook_pause("after-decision");
        /* the dump's record and the request's, before the runtime is asked anything */
        if (!request_hold_audit(req))
                return;
        r = jobs_find_socket(req, dump_socket_found);
        if (r != 0)
                dump_fail_mapped(work, dump_take_job_error(r), r, "cannot look for the process's socket");
}

static void dump_opened(Request *req) {
        PolicyDumpType type = req->ask.dump_type;

        req->ask = (PolicyRequest){ .command = POLICY_COMMAND_DUMP, .dump_type = type };
        decide(req, req->target, true, dump_decided);
}

/**
 * dump_start() - decide and take a dump of the process @m names, for the requester
 *
 * DUMP_TYPE names the type (mini when absent: the least memory leaves the
 * process); WANT_FD asks for a read-only fd of the result, which dsctl -o
 * copies as the caller.
 */
void dump_start_as(Request *req, const WireMessage *m, PolicyDumpType type, DumpDelivery delivery) {
        DumpWork *work;

        req->ask = (PolicyRequest){ .command = POLICY_COMMAND_DUMP, .dump_type = type };
        work = calloc(1, sizeof(*work));
        if (!work) {
                request_reply_oom(req);
                return;
        }
        *work = (DumpWork){ .request = req, .delivery = delivery, .started_usec = monotonic_usec(req),
                            .dir_fd = -EBADF, .file_fd = -EBADF };
        req->audit_records = 2; /* the dump's record, then the request's */
        req->work = work;
        req->work_free = dump_work_free;
        commands_open_target(req, m, dump_opened);
}

void dump_start(Request *req, const WireMessage *m) {
        _cleanup_free_ char *type = NULL;
        PolicyDumpType dump_type = POLICY_DUMP_MINI;
        uint32_t want_fd = 0;

        if (wire_message_get_string(m, WIRE_TAG_DUMP_TYPE, &type) == 0 &&
            (dump_type = policy_dump_type_from_string(type)) == _POLICY_DUMP_INVALID) {
                req->ask = (PolicyRequest){ .command = POLICY_COMMAND_DUMP };
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                    "unknown dump type (mini, heap, triage, full)");
                return;
        }
        (void)wire_message_get_u32(m, WIRE_TAG_WANT_FD, &want_fd);
        dump_start_as(req, m, dump_type, want_fd == 1 ? DUMP_DELIVER_STORED_AND_FD : DUMP_DELIVER_STORED);
}

static char *get_attribute(int fd, const char *key) {
        char buf[PATH_MAX];
        ssize_t n = fgetxattr(fd, key, buf, sizeof(buf) - 1);

        if (n < 0)
                return NULL;
        buf[n] = '\0';
        return strdup(buf);
}

static int parse_uid(const char *s, uint32_t *ret) {
        uint64_t v;
        int r;

        r = parse_u64(s, &v);
        if (r < 0)
                return r;
        if (v >= UINT32_MAX) /* (uid_t) -1 is no uid */
                return -ERANGE;
        *ret = (uint32_t)v;
        return 0;
}

/* What a dump's xattrs say of it (dump-publish.c); each NULL when absent. */
typedef struct DumpLabels {
        char *type, *pid, *uid, *unit, *exe, *name, *requester;
        char *origin, *table;   /* a policy table's artifact (dump-publish.h) */
        char *egress;           /* its upload (egress-upload.h) */
} DumpLabels;

static void dump_labels_done(DumpLabels *l) {
        free(l->type);
        free(l->pid);
        free(l->uid);
        free(l->unit);
        free(l->exe);
        free(l->name);
        free(l->requester);
        free(l->origin);
        free(l->table);
        free(l->egress);
}

static void dump_labels_read(int fd, DumpLabels *l) {
        l->type = get_attribute(fd, "user.dsagent.dump_type");
        l->pid = get_attribute(fd, "user.dsagent.target_pid");
        l->uid = get_attribute(fd, "user.dsagent.target_uid");
        l->unit = get_attribute(fd, "user.dsagent.target_unit");
        l->exe = get_attribute(fd, "user.dsagent.target_exe");
        l->name = get_attribute(fd, "user.dsagent.target_name");
        l->requester = get_attribute(fd, "user.dsagent.requester_uid");
        l->origin = get_attribute(fd, "user.dsagent.origin");
        l->table = get_attribute(fd, "user.dsagent.table");
        l->egress = get_attribute(fd, EGRESS_LABEL);
}

/* An upload's label as the agent writes it: one of its three states, then the store's name and a key or a result
 * of the keys' alphabet and '/' */
static bool egress_label_is_valid(const char *s) {
        if (!s || (strncmp(s, "pending:", 8) != 0 && strncmp(s, "uploaded:", 9) != 0 && strncmp(s, "failed:", 7) != 0))
                return false;
        for (; *s; s++)
                if (!policy_egress_key_char(*s) && *s != '/' && *s != ':')
                        return false;
        return true;
}

/* The labels as fields, each checked: they are the agent's own, but a file system may hold anything. */
static void put_labels(WireWriter *w, const DumpLabels *l) {
        pid_t pid;
        uint32_t uid;

        /* a dump's type, "trace" for an [[on_start]] or [[collect]] trace, "stacks" and "exceptions" for a [[collect]]
         * table's text, "counters" for its CSV, "gcdump" for its heap dump, "flame" for its trace's flame graph,
         * "crash" for a core systemd-coredump stored */
        if (l->type && (policy_dump_type_from_string(l->type) != _POLICY_DUMP_INVALID || strcmp(l->type, "trace") == 0 ||
                        strcmp(l->type, "stacks") == 0 || strcmp(l->type, "counters") == 0 ||
                        strcmp(l->type, "gcdump") == 0 || strcmp(l->type, "crash") == 0 ||
                        strcmp(l->type, "exceptions") == 0 || strcmp(l->type, "flame") == 0))
                wire_writer_put_string(w, WIRE_TAG_DUMP_TYPE, l->type);
        if (l->pid && parse_pid(l->pid, &pid) == 0)
                wire_writer_put_u32(w, WIRE_TAG_PID, (uint32_t)pid);
        if (l->uid && parse_uid(l->uid, &uid) == 0)
                wire_writer_put_u32(w, WIRE_TAG_UID, uid);
        if (l->unit && wire_unit_name_is_valid(l->unit, strlen(l->unit)))
                wire_writer_put_string(w, WIRE_TAG_UNIT, l->unit);
        commands_put_untrusted_string(w, WIRE_TAG_EXE, l->exe);
        commands_put_untrusted_string(w, WIRE_TAG_NAME, l->name);
        if (egress_label_is_valid(l->egress))
                wire_writer_put_string(w, WIRE_TAG_EGRESS, l->egress);
}

static int dumps_list_one(Request *req, WireWriter *w, int dir_fd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *path = NULL;
        _cleanup_(dump_labels_done) DumpLabels labels = {};
        struct stat st;
        bool readable = req->peer->uid == 0;

        fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return 0;
        if (!readable && (acl_fd_allows_read(fd, req->peer->uid, req->peer->groups, req->peer->n_groups, &readable) < 0 ||
                          !readable))
                return 0;
        if (asprintf(&path, "%s/%s", req->policy->agent.dump_dir, name) < 0)
                return -ENOMEM;
        dump_labels_read(fd, &labels);

        wire_writer_begin(w, WIRE_REPLY_DUMP);
        wire_writer_put_string(w, WIRE_TAG_PATH, path);
        wire_writer_put_u64(w, WIRE_TAG_SIZE, (uint64_t)st.st_size);
        wire_writer_put_u64(w, WIRE_TAG_TIME,
                            (uint64_t)st.st_mtim.tv_sec * USEC_PER_SEC + (uint64_t)st.st_mtim.tv_nsec / 1000);
        wire_writer_put_u32(w, WIRE_TAG_READABLE, 1);
        put_labels(w, &labels);
        return connection_queue_frame(req->connection, w);
}

/**
 * dumps_list() - the published dumps the caller can read, like coredumpctl list
 *
 * Decided by each file's ACL, the same check the kernel makes when the
 * caller opens it; root sees all.
 */
void dumps_list(Request *req) {
        _cleanup_free_ WireWriter *w = NULL;
        _cleanup_close_ int dir_fd = -EBADF, walk_fd = -EBADF;
        const char *why = NULL;
        unsigned count = 0;
        struct dirent *de;
        DIR *d;
        int r = 0;

        w = malloc(sizeof(*w));
        r = !w ? -ENOMEM : dump_dir_open(req->policy->agent.dump_dir, &dir_fd, &why);
        if (r == 0 && ((walk_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3)) < 0 || !(d = fdopendir(walk_fd))))
                r = -errno;
        if (r > 0) { /* DUMP_PUBLISH_E_DIRECTORY: the dump directory is unfit, and @why says how */
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, why);
                return;
        }
        if (r < 0) {
                request_reply_errno(req, r, why ? why : "cannot list the dumps");
                return;
        }
        walk_fd = -EBADF;
        while (r >= 0 && (de = readdir(d))) {
                size_t before = req->connection->out_size;
                if (de->d_name[0] == '.')
                        continue;
                r = dumps_list_one(req, w, dir_fd, de->d_name);
                count += req->connection->out_size > before;
        }
        closedir(d);
        if (r < 0) {
                request_reply_errno(req, r, why ? why : "cannot list the dumps");
                return;
        }
        req->audit.have_result_count = true;
        req->audit.result_count = count;
        request_reply_done(req, NULL, "listed the dumps the requester can read");
}

/* What a refused removal reads, whatever the reason: nobody learns what dump_dir holds. */
#define DUMPS_NOT_YOURS "no dump of that name that you asked for"

/* The name PATH gives in dump_dir, or NULL: a bare name, or dump_dir, a slash and a name. */
static const char *dump_name_in(const char *dump_dir, const char *path) {
        const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
        size_t dir_len = strlen(dump_dir);

        while (dir_len > 1 && dump_dir[dir_len - 1] == '/')
                dir_len--;
        if (slash && ((size_t)(slash - path) != dir_len || strncmp(path, dump_dir, dir_len) != 0))
                return NULL;
        /* no ".", "..", hidden or over-long names: only what the agent publishes */
        if (name[0] == '\0' || name[0] == '.' || strlen(name) > NAME_MAX)
                return NULL;
        return name;
}

/*
 * Whether @req's caller may remove the dump in @fd: root; the requester it records; or, for a
 * table's artifact, one of its readers (the file's ACL lets them read it, as the kernel decides),
 * when the table in force says readers_may_remove. *@ret_reader: the caller may read it.
 */
static bool may_remove(const Request *req, int fd, const DumpLabels *l, bool *ret_reader) {
        const PolicyTableArtifacts *table = policy_table_artifacts(req->policy, l->origin, l->table, NULL);
        const PeerCreds *peer = req->peer;
        uint32_t requester;
        bool reader = false;

        *ret_reader = false;
        if (peer->uid == 0)
                return true;
        if (l->requester && parse_uid(l->requester, &requester) == 0 && requester == peer->uid)
                return true;
        if (acl_fd_allows_read(fd, peer->uid, peer->groups, peer->n_groups, &reader) < 0)
                reader = false;
        *ret_reader = reader;
        return reader && table && table->readers_may_remove;
}

/* The record names the dump's process, as the dump's own record did. */
static void audit_dump_target(Request *req, const DumpLabels *l) {
        pid_t pid;
        uint32_t uid;

        if (!l->pid || parse_pid(l->pid, &pid) != 0)
                return;
        req->audit.have_target = true;
        req->audit.target_pid = pid;
        req->audit.target_uid = l->uid && parse_uid(l->uid, &uid) == 0 ? uid : (uid_t)-1;
        req->audit.target_unit = l->unit;
        req->audit.target_exe = l->exe;
}

/* What remove_named() returns when the removal's record could have no room: the client was told so. */
#define REMOVE_NOT_RECORDABLE 2

/*
 * Removes the dump, if the caller may, once room for the removal's record is held (a removal is an act:
 * it is never made unless its record will be written). Return: 0 (removed), 1 (refused: @reason says
 * why), REMOVE_NOT_RECORDABLE (nothing removed, the client answered), or a negative errno.
 */
static int remove_named(Request *req, int dir_fd, const char *name, const char *path, DumpLabels *labels,
                        AuditDecision *ret_decision, bool *ret_reader, char *reason, size_t size) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                snprintf(reason, size, "no dump %s: %s", path, fd < 0 ? strerror(errno) : "not a file");
                *ret_decision = AUDIT_DECISION_FAILED;
                return 1;
        }
        dump_labels_read(fd, labels);
        audit_dump_target(req, labels);
        if (!may_remove(req, fd, labels, ret_reader)) {
                if (*ret_reader && labels->origin && labels->table)
                        snprintf(reason, size, "the %s %s is [[%s]] %s's, whose readers may not remove it "
                                 "(readers_may_remove is not set); root may",
                                 labels->type ? labels->type : "file", path, labels->origin, labels->table);
                else
                        snprintf(reason, size, "the dump %s was asked for by %s%s", path,
                                 labels->requester ? "uid " : "",
                                 labels->requester ? labels->requester : "nobody it records");
                *ret_decision = AUDIT_DECISION_DENIED;
                return 1;
        }
        if (!request_hold_audit(req))
                return REMOVE_NOT_RECORDABLE;
        /* dump_dir is root's alone: the name still means the file just checked */
        return unlinkat(dir_fd, name, 0) < 0 ? -errno : 0;
}

static void dumps_remove_named(Request *req, int dir_fd, const char *name, const char *path) {
        _cleanup_(dump_labels_done) DumpLabels labels = {};
        AuditDecision decision = AUDIT_DECISION_FAILED;
        char reason[PATH_MAX + 192];
        bool reader = false;
        int r;

        r = remove_named(req, dir_fd, name, path, &labels, &decision, &reader, reason, sizeof(reason));
        /* the uniform words tell nobody what dump_dir holds; a reader of the file knows it is there already */
        if (r == REMOVE_NOT_RECORDABLE)
                ; /* answered "audit unavailable", recorded if that record fitted */
        else if (r > 0)
                request_reply_error_as(req, decision, WIRE_ERROR_DENIED, reason, reader ? reason : DUMPS_NOT_YOURS);
        else if (r < 0)
                request_reply_errno(req, r, "cannot remove the dump");
        else {
                if (reader && labels.origin && labels.table)
                        snprintf(reason, sizeof(reason), "removed the dump %s, as a reader of [[%s]] %s (readers_may_remove)",
                                 path, labels.origin, labels.table);
                else
                        snprintf(reason, sizeof(reason), "removed the dump %s", path);
                request_reply_done(req, NULL, reason);
        }
        /* the record is written: its strings go with the labels */
        req->audit.target_unit = req->audit.target_exe = NULL;
}

/*
 * The dump of dump_dir that @m's PATH names (by path or by name alone): 0 with dump_dir open, the name in it
 * (pointing into *@ret_asked) and its whole path; or -1, the client answered (@what says what a PATH outside
 * dump_dir cannot be: "can be removed").
 */
static int dumps_find_named(Request *req, const WireMessage *m, const char *what, int *ret_dir_fd, char **ret_asked,
                            const char **ret_name, char **ret_path) {
        _cleanup_free_ char *asked = NULL, *path = NULL, *refusal = NULL;
        const char *dump_dir = req->policy->agent.dump_dir, *name, *why = NULL;
        int r;

        if (wire_message_get_string(m, WIRE_TAG_PATH, &asked) != 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "which dump? a PATH is needed");
                return -1;
        }
        name = dump_name_in(dump_dir, asked);
        if (!name) {
                if (asprintf(&refusal, "only a dump of the dump directory, by its name, %s", what) < 0)
                        refusal = NULL;
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                    refusal ? refusal : "only a dump of the dump directory, by its name");
                return -1;
        }
        if (asprintf(&path, "%s/%s", dump_dir, name) < 0) {
                path = NULL;
                request_reply_oom(req);
                return -1;
        }
        r = dump_dir_open(dump_dir, ret_dir_fd, &why);
        if (r > 0)
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, why);
        else if (r < 0)
                request_reply_errno(req, r, why);
        if (r != 0)
                return -1;
        *ret_name = name;
        *ret_asked = TAKE_PTR(asked);
        *ret_path = TAKE_PTR(path);
        return 0;
}

void dumps_remove(Request *req, const WireMessage *m) {
        _cleanup_free_ char *asked = NULL, *path = NULL;
        _cleanup_close_ int dir_fd = -EBADF;
        const char *name;

        if (dumps_find_named(req, m, "can be removed", &dir_fd, &asked, &name, &path) == 0)
                dumps_remove_named(req, dir_fd, name, path);
}

/* What a dump's presigned URL waits for: the egress process's answer. */
typedef struct DumpUrlWork {
        Request *request;
        char *path, *key;
        uint64_t id, seconds;
        bool pending;
} DumpUrlWork;

static void dump_url_work_free(void *p) {
        DumpUrlWork *work = p;

        if (!work)
                return;
        if (work->pending && work->request->broker->egress)
                egress_client_cancel(work->request->broker->egress, work->id);
        free(work->path);
        free(work->key);
        free(work);
}

static void dump_url_signed(const EgressReply *a, void *userdata) {
        DumpUrlWork *work = userdata;
        Request *req = work->request;
        _cleanup_free_ WireWriter *w = NULL;
        _cleanup_free_ char *reason = NULL;
        struct timespec now;

        work->pending = false;
        if (!a || a->result != 0) {
                /* the record says why; the reader is told no more than that the keys failed: the egress process's
                 * words can name where the keys are, which no requester is shown (commands_put_egress()) */
                request_reply_error_as(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL,
                                       a ? a->message : "the egress process ended before it signed the URL",
                                       !a ? "the egress process ended before it signed the URL"
                                       : a->result == EGRESS_E_CREDENTIALS
                                               ? "the store's keys cannot be used to sign a URL: the agent's record "
                                                 "says why"
                                       : a->result == EGRESS_E_LOST
                                               ? "the egress process was started again before it signed the URL: ask "
                                                 "again"
                                               : "the egress process could not sign the URL: the agent's record says why");
                return;
        }
        w = malloc(sizeof(*w));
        if (!w || asprintf(&reason, "presigned URL of %s (object %s), for %" PRIu64 " seconds", work->path, work->key,
                           work->seconds) < 0) {
                request_reply_oom(req);
                return;
        }
        (void)clock_gettime(CLOCK_REALTIME, &now);
        wire_writer_begin(w, WIRE_REPLY_URL);
        wire_writer_put_string(w, WIRE_TAG_PATH, work->path);
        wire_writer_put_string(w, WIRE_TAG_EGRESS, work->key);
        wire_writer_put_string(w, WIRE_TAG_URL, a->url);
        wire_writer_put_u64(w, WIRE_TAG_TIME, ((uint64_t)now.tv_sec + work->seconds) * USEC_PER_SEC);
        if (connection_queue_frame(req->connection, w) < 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "cannot send the URL");
                return;
        }
        /* the record names the object and how long, never the URL: it lets whoever holds it read the object */
        request_reply_done(req, NULL, reason);
}

/* What anyone who may not read the file, and anyone asking for a name that is not there, is told. */
#define DUMPS_NOT_READABLE "no dump of that name that you may read"

void dumps_url(Request *req, const WireMessage *m) {
        _cleanup_free_ char *asked = NULL, *path = NULL, *label = NULL, *why_text = NULL;
        _cleanup_close_ int dir_fd = -EBADF, fd = -EBADF;
        const char *name, *store, *key;
        const PolicyEgress *e;
        DumpUrlWork *work;
        bool readable = req->peer->uid == 0;
        struct stat st;
        char store_name[80];
        int r;

        if (dumps_find_named(req, m, "has a URL", &dir_fd, &asked, &name, &path) < 0)
                return;
        /* the same check as the listing's: who may read the file may have its URL; nobody else learns it is there */
        fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                (void)asprintf(&why_text, "no dump %s", path);
                request_reply_error_as(req, AUDIT_DECISION_FAILED, WIRE_ERROR_DENIED, why_text ? why_text : path,
                                       DUMPS_NOT_READABLE);
                return;
        }
        if (!readable && acl_fd_allows_read(fd, req->peer->uid, req->peer->groups, req->peer->n_groups, &readable) < 0)
                readable = false;
        if (!readable) {
                (void)asprintf(&why_text, "the dump %s is not readable by the caller", path);
                request_reply_error_as(req, AUDIT_DECISION_DENIED, WIRE_ERROR_DENIED, why_text ? why_text : path,
                                       DUMPS_NOT_READABLE);
                return;
        }
        /* a reader knows it is there: why there is no URL is said */
        label = get_attribute(fd, EGRESS_LABEL);
        if (!egress_label_is_valid(label) || strncmp(label, "uploaded:", 9) != 0 || !strchr(label + 9, ':') ||
            (size_t)(strchr(label + 9, ':') - (label + 9)) >= sizeof(store_name)) {
                (void)asprintf(&why_text, "the dump %s has no uploaded object (%s)", path,
                               egress_label_is_valid(label) ? label : "no upload");
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, why_text ? why_text : path);
                return;
        }
        store = label + 9;
        key = strchr(store, ':') + 1;
        snprintf(store_name, sizeof(store_name), "%.*s", (int)(key - 1 - store), store);
        e = policy_egress_find(req->policy, store_name);
        if (!e) {
                (void)asprintf(&why_text, "the store [egress.%s] of %s is not in the policy now", store_name, path);
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, why_text ? why_text : path);
                return;
        }
        work = calloc(1, sizeof(*work));
        if (!work || !(work->path = strdup(path)) || !(work->key = strdup(key))) {
                dump_url_work_free(work);
                request_reply_oom(req);
                return;
        }
        work->request = req;
        work->seconds = e->url_max_age_usec / USEC_PER_SEC;
        req->work = work;
        req->work_free = dump_url_work_free;
        /* a URL is a grant: its record's room is held before it is asked for */
        if (!request_hold_audit(req))
                return;
        r = egress_presign(req->broker, e, key, dump_url_signed, work, &work->id);
        if (r < 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL,
                                    r == -ECONNRESET ? "no egress process runs: the agent started without an "
                                                       "[egress.NAME] store in its policy"
                                    : r == -EAGAIN   ? "the egress process is far behind; try again"
                                                     : "cannot ask the egress process for a URL");
                return;
        }
        work->pending = true;
}
