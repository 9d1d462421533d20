/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "acl.h"
#include "broker.h"
#include "cleanup.h"
#include "connection.h"
#include "decision.h"
#include "dotnet-ipc.h"
#include "dump-publish.h"
#include "dump-stage.h"
#include "dump-writer.h"
#include "dump.h"
#include "runtime-call.h"
#include "commands.h"
#include "text.h"
#include "unaligned.h"

#define USEC_PER_SEC 1000000ULL

/* How much of the FIFO one wake-up of the loop moves, so a fast dump does not starve other clients. */
#define DUMP_PUMP_BUDGET (16ULL << 20)

typedef struct DumpWork {
        Request *request;
        RuntimeCall *call;
        DumpStage *stage;
        DumpWriter *writer;
        sd_event_source *fifo_source;
        int dir_fd;             /* dump_dir */
        DotnetIpcCommand command;
        uint64_t started_usec;
        bool want_fd;
        bool claimed;           /* holds one of the dump slots (admission.h) */
        AdmissionKey key;
} DumpWork;

static void dump_work_free(void *p) {
        DumpWork *work = p;

        if (!work)
                return;
        runtime_call_free(work->call);
        sd_event_source_disable_unref(work->fifo_source);
        dump_writer_free(work->writer);
        dump_stage_free(work->stage);
        safe_close(work->dir_fd);
        if (work->claimed)
                admission_end(work->request->broker->admission, ADMISSION_DUMP, &work->key);
        free(work);
}

static uint64_t monotonic_usec(const Request *req) {
        uint64_t now = 0;

        (void)sd_event_now(req->broker->event, CLOCK_MONOTONIC, &now);
        return now;
}

/* createdump's dump types, by the runtime's numbers */
static uint32_t runtime_dump_type(PolicyDumpType t) {
        switch (t) {
        case POLICY_DUMP_MINI: return 1;
        case POLICY_DUMP_HEAP: return 2;
        case POLICY_DUMP_TRIAGE: return 3;
        case POLICY_DUMP_FULL: return 4;
        default: return 0;
        }
}

/* Older runtimes answer newer GenerateCoreDump versions with "unknown command". */
static DotnetIpcCommand dump_fallback(DotnetIpcCommand command) {
        switch (command) {
        case DOTNET_IPC_GENERATE_CORE_DUMP3: return DOTNET_IPC_GENERATE_CORE_DUMP2;
        case DOTNET_IPC_GENERATE_CORE_DUMP2: return DOTNET_IPC_GENERATE_CORE_DUMP;
        default: return 0;
        }
}

/* The name is the agent's: nothing of it is taken from a client, and the target's part is sanitized. */
static void dump_file_name(const Request *req, char *buf, size_t size) {
        char name[33] = "process", stamp[32];
        const char *src = req->target->name;
        struct tm tm;
        time_t now = time(NULL);
        size_t n = 0;

        for (; src && *src && n < sizeof(name) - 1; src++)
                if ((*src >= 'a' && *src <= 'z') || (*src >= 'A' && *src <= 'Z') || (*src >= '0' && *src <= '9') ||
                    *src == '-' || *src == '_' || (*src == '.' && n > 0))
                        name[n++] = *src;
        if (n > 0)
                name[n] = '\0';
        gmtime_r(&now, &tm);
        strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
        snprintf(buf, size, "dump.%s.%d.%s.%s.%016" PRIx64, name, (int)req->target->pid,
                 policy_dump_type_to_string(req->ask.dump_type), stamp, req->id);
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

static void dump_reply(DumpWork *work, const char *name, uint64_t size, bool readable) {
        Request *req = work->request;
        _cleanup_free_ WireWriter *w = NULL;
        _cleanup_free_ char *path = NULL;
        const PolicyAgentSettings *a = &req->policy->agent;
        const char *type = policy_dump_type_to_string(req->ask.dump_type);
        AuditDumpEvent e;
        int r;

        w = malloc(sizeof(*w));
        if (!w || asprintf(&path, "%s/%s", a->dump_dir, name) < 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "out of memory");
                return;
        }
        e = (AuditDumpEvent){
                .request_id = req->id, .requester = req->peer->uid, .target_pid = req->target->pid,
                .target_uid = target_euid(req->target), .target_unit = req->target->unit, .target_exe = req->target->exe,
                .rule = req->verdict.rule_name, .path = path, .size = size, .dump_type = type, .readable = readable,
                .duration_usec = monotonic_usec(req) - work->started_usec,
        };
        r = audit_log_dump(req->broker->config.audit_sink, &e);
        if (r < 0 && !a->audit_failure_allow) {
                (void)unlinkat(work->dir_fd, name, 0);
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL,
                                       "the dump's audit record could not be written; the dump was removed");
                return;
        }

        wire_writer_begin(w, WIRE_REPLY_DUMP);
        wire_writer_put_string(w, WIRE_TAG_PATH, path);
        wire_writer_put_u64(w, WIRE_TAG_SIZE, size);
        wire_writer_put_string(w, WIRE_TAG_DUMP_TYPE, type);
        wire_writer_put_u32(w, WIRE_TAG_READABLE, readable);
        wire_writer_put_u32(w, WIRE_TAG_PID, (uint32_t)req->target->pid);
        /* the fd is read-only, and only for who may read the file anyway */
        if (work->want_fd && readable) {
                int fd = open_published(work->dir_fd, name);
                r = fd < 0 ? -errno : connection_queue_frame_with_fd(req->connection, w, fd);
        } else
                r = connection_queue_frame(req->connection, w);
        if (r < 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "cannot send the dump's reply");
                return;
        }
        request_reply_done(req, req->verdict.rule_name,
                              readable ? "dump taken" : "dump taken; only root may read it: the process changed credentials");
}

/* Before any reply: when the client hears back, the target's /tmp holds nothing of ours. */
static void dump_unstage(DumpWork *work) {
        work->fifo_source = sd_event_source_disable_unref(work->fifo_source);
        if (work->writer)
                dump_writer_close_source(work->writer);
        work->stage = dump_stage_free(work->stage);
}

static void dump_fail(DumpWork *work, WireError error, const char *why) {
        dump_unstage(work);
        request_reply_error(work->request, AUDIT_DECISION_FAILED, error, why);
}

static WireError writer_error(int r) {
        switch (r) {
        case DUMP_WRITER_E_NO_SPACE: return WIRE_ERROR_NO_SPACE;
        case DUMP_WRITER_E_EMPTY:
        case DUMP_WRITER_E_NOT_CORE: return WIRE_ERROR_RUNTIME_FAILED;
        default: return WIRE_ERROR_INTERNAL;
        }
}

/* The runtime said the dump is written: take the rest, check it, label it, name it. */
static void dump_finish(DumpWork *work) {
        Request *req = work->request;
        const char *why = NULL;
        uid_t users[64];
        size_t n_users;
        AclGrant readers;
        DumpAttributes attrs;
        char name[128];
        uint64_t size = 0;
        bool changed = true;
        int r;

        work->fifo_source = sd_event_source_disable_unref(work->fifo_source);
        r = dump_writer_finish(work->writer, &size, &why);
        dump_unstage(work);
        if (r != 0) {
                dump_fail(work, writer_error(r), why ? why : "cannot write the dump");
                return;
        }
        r = target_changed_credentials(req->target, &changed);
        if (r != 0) {
                dump_fail(work, r == TARGET_E_GONE ? WIRE_ERROR_NO_SUCH_PROCESS : WIRE_ERROR_INTERNAL,
                          r == TARGET_E_GONE ? "the process exited during the dump" : "cannot publish the dump");
                return;
        }

        dump_readers(req, !changed, users, &n_users, &readers);
        dump_file_name(req, name, sizeof(name));
        attrs = (DumpAttributes){
                .requester = req->peer->uid, .target_pid = req->target->pid, .target_uid = target_euid(req->target),
                .target_unit = req->target->unit, .target_exe = req->target->exe,
                .dump_type = policy_dump_type_to_string(req->ask.dump_type), .request_id = req->id,
        };
        r = dump_publish_fd(work->dir_fd, work->writer->file_fd, &readers, &attrs, name);
        if (r != 0) {
                dump_fail(work, r == DUMP_PUBLISH_E_NO_SPACE ? WIRE_ERROR_NO_SPACE : WIRE_ERROR_INTERNAL,
                          r == DUMP_PUBLISH_E_NO_SPACE ? "the dump does not fit: the dump directory's file system is full"
                                                       : "cannot publish the dump");
                return;
        }
        dump_reply(work, name, size, !changed);
}

/* Bytes in the FIFO: into the unnamed file, a bounded amount per wake-up. */
static int dump_on_fifo(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        DumpWork *work = userdata;
        const char *why = NULL;
        int r;

        r = dump_writer_pump(work->writer, DUMP_PUMP_BUDGET, &why);
        if (r == 0)
                return 0;
        if (r == DUMP_WRITER_E_ENDED) {
                /* createdump is done writing; its runtime's answer says whether it succeeded */
                work->fifo_source = sd_event_source_disable_unref(work->fifo_source);
                return 0;
        }
        /* closing the FIFO makes createdump fail on its next write, which frees the runtime */
        work->call = runtime_call_free(work->call);
        dump_fail(work, writer_error(r), why ? why : "cannot write the dump");
        return 0;
}

static void dump_call(DumpWork *work);

static void dump_call_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        DumpWork *work = userdata;
        Request *req = work->request;
        _cleanup_free_ char *message = NULL, *reason = NULL;
        DotnetIpcCommand older;
        size_t used;

        if (error != 0) {
                dump_fail(work, WIRE_ERROR_RUNTIME_UNREACHABLE,
                          error == RUNTIME_CALL_E_TIMEOUT     ? "the runtime did not finish the dump in time"
                          : error == RUNTIME_CALL_E_MALFORMED ? "the runtime sent a malformed reply"
                                                              : "the runtime closed the connection");
                return;
        }
        older = dump_fallback(work->command);
        if (!reply->ok && reply->hresult == DOTNET_IPC_HR_UNKNOWN_COMMAND && older != 0) {
                work->call = runtime_call_free(work->call);
                work->command = older;
                dump_call(work);
                return;
        }
        if (!reply->ok) {
                dump_unstage(work);
                /* GenerateCoreDump3 says why in createdump's words */
                if (work->command == DOTNET_IPC_GENERATE_CORE_DUMP3 && reply->payload_size > 0)
                        (void)dotnet_ipc_string_decode(reply->payload, reply->payload_size, &message, &used);
                if (asprintf(&reason, "the runtime could not write the dump%s%s", message ? ": " : "",
                             message ? message : "") < 0)
                        reason = NULL;
                request_reply_runtime_error(req, reply->hresult, reason ? reason : "the runtime could not write the dump");
                return;
        }
        dump_finish(work);
}

static void dump_call(DumpWork *work) {
        Request *req = work->request;
        uint8_t payload[512], request[600];
        const char *why = NULL;
        size_t n = 0, size;
        uint8_t fields[8];
        int fd, r;

        r = target_connect(req->target, &fd, &why);
        if (r != 0) {
                dump_unstage(work);
                request_reply_target_error(req, r, why);
                return;
        }
        unaligned_write_le32(fields, runtime_dump_type(req->ask.dump_type));
        unaligned_write_le32(fields + 4, 0); /* flags: no diagnostics, no crash report */
        r = dotnet_ipc_string_encode(work->stage->target_path, payload, sizeof(payload) - sizeof(fields), &n);
        if (r == 0) {
                memcpy(payload + n, fields, sizeof(fields));
                r = dotnet_ipc_request_encode(work->command, payload, n + sizeof(fields), request, sizeof(request),
                                              &size);
        }
        if (r == 0)
                r = runtime_call_start(req->broker->event, fd, request, size, req->broker->config.dump_timeout_usec,
                                       dump_call_done, work, &work->call);
        else
                close(fd);
        if (r != 0)
                dump_fail(work, WIRE_ERROR_INTERNAL, "cannot start the dump");
}

/* What the staging module's codes mean to the client. */
static WireError stage_error(int r) {
        switch (r) {
        case DUMP_STAGE_E_UNSAFE_FS: return WIRE_ERROR_UNSAFE_FS;
        case DUMP_STAGE_E_UNUSABLE: return WIRE_ERROR_NO_STAGING;
        case DUMP_STAGE_E_GONE: return WIRE_ERROR_NO_SUCH_PROCESS;
        default: return WIRE_ERROR_INTERNAL;
        }
}

/* dump_dir, the FIFO in the target's /tmp and the unnamed file its bytes go to; replies on failure. */
static bool dump_prepare(DumpWork *work) {
        Request *req = work->request;
        const char *why = NULL;
        int r;

        r = dump_dir_open(req->policy->agent.dump_dir, &work->dir_fd, &why);
        if (r != 0) {
                dump_fail(work, WIRE_ERROR_INTERNAL, why ? why : "cannot open the dump directory");
                return false;
        }
        r = dump_stage_create(req->target, req->broker->config.runtime_dir, &work->stage, &why);
        if (r != 0) {
                dump_fail(work, stage_error(r),
                          why ? why : r == DUMP_STAGE_E_GONE ? "no such process" : "cannot prepare the dump");
                return false;
        }
        r = dump_writer_new(work->dir_fd, dump_stage_take_fifo(work->stage), &req->policy->agent,
                            &req->broker->dump_bytes_in_flight, &work->writer, &why);
        if (r == 0)
                r = sd_event_add_io(req->broker->event, &work->fifo_source, work->writer->source_fd, EPOLLIN,
                                    dump_on_fifo, work);
        if (r != 0) {
                dump_fail(work, r == DUMP_WRITER_E_NO_SPACE ? WIRE_ERROR_NO_SPACE : WIRE_ERROR_INTERNAL,
                          why ? why : "cannot prepare the dump");
                return false;
        }
        return true;
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
                                    .requester = req->peer->uid };
        r = admission_begin(req->broker->admission, ADMISSION_DUMP, &work->key,
                            &(AdmissionLimits){ .per_target = 1, .per_requester = req->policy->agent.max_dumps_per_user,
                                                .in_all = req->policy->agent.max_concurrent_dumps },
                            &why);
        if (r != 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, r == ADMISSION_E_BUSY ? WIRE_ERROR_BUSY : WIRE_ERROR_INTERNAL,
                                    r == ADMISSION_E_BUSY ? why : "out of memory");
                return;
        }
        work->claimed = true;
        if (!dump_prepare(work))
                return;
        if (connection_set_deadline(req->connection, req->broker->config.dump_timeout_usec + 30 * USEC_PER_SEC) < 0) {
                dump_fail(work, WIRE_ERROR_INTERNAL, "timer failure");
                return;
        }
        dump_call(work);
}

/**
 * dump_start() - decide and take a dump of @t for the requester
 *
 * DUMP_TYPE names the type (mini when absent: the least memory leaves the
 * process); WANT_FD asks for a read-only fd of the result, which dsctl -o
 * copies as the caller.
 */
void dump_start(Request *req, const WireMessage *m, Target *t) {
        _cleanup_free_ char *type = NULL;
        DumpWork *work;
        uint32_t want_fd = 0;

        req->ask = (PolicyRequest){ .command = POLICY_COMMAND_DUMP, .dump_type = POLICY_DUMP_MINI };
        if (wire_message_get_string(m, WIRE_TAG_DUMP_TYPE, &type) == 0 &&
            (req->ask.dump_type = policy_dump_type_from_string(type)) == _POLICY_DUMP_INVALID) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                       "unknown dump type (mini, heap, triage, full)");
                return;
        }
        (void)wire_message_get_u32(m, WIRE_TAG_WANT_FD, &want_fd);

        work = calloc(1, sizeof(*work));
        if (!work) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "out of memory");
                return;
        }
        *work = (DumpWork){ .request = req, .command = DOTNET_IPC_GENERATE_CORE_DUMP3, .want_fd = want_fd == 1,
                            .started_usec = monotonic_usec(req), .dir_fd = -EBADF };
        req->work = work;
        req->work_free = dump_work_free;
        decide(req, t, true, dump_decided);
}

static char *get_attribute(int fd, const char *key) {
        char buf[256];
        ssize_t n = fgetxattr(fd, key, buf, sizeof(buf) - 1);

        if (n < 0)
                return NULL;
        buf[n] = '\0';
        return strdup(buf);
}

static int dumps_list_one(Request *req, WireWriter *w, int dir_fd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *path = NULL, *type = NULL, *pid = NULL;
        struct stat st;
        bool readable = req->peer->uid == 0;
        pid_t target_pid;

        fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return 0;
        if (!readable && (acl_fd_allows_read(fd, req->peer->uid, req->peer->groups, req->peer->n_groups, &readable) < 0 ||
                          !readable))
                return 0;
        if (asprintf(&path, "%s/%s", req->policy->agent.dump_dir, name) < 0)
                return -ENOMEM;
        type = get_attribute(fd, "user.dsagent.dump_type");
        pid = get_attribute(fd, "user.dsagent.target_pid");

        wire_writer_begin(w, WIRE_REPLY_DUMP);
        wire_writer_put_string(w, WIRE_TAG_PATH, path);
        wire_writer_put_u64(w, WIRE_TAG_SIZE, (uint64_t)st.st_size);
        wire_writer_put_u64(w, WIRE_TAG_TIME,
                            (uint64_t)st.st_mtim.tv_sec * USEC_PER_SEC + (uint64_t)st.st_mtim.tv_nsec / 1000);
        wire_writer_put_u32(w, WIRE_TAG_READABLE, 1);
        if (type && policy_dump_type_from_string(type) != _POLICY_DUMP_INVALID)
                wire_writer_put_string(w, WIRE_TAG_DUMP_TYPE, type);
        if (pid && parse_pid(pid, &target_pid) == 0)
                wire_writer_put_u32(w, WIRE_TAG_PID, (uint32_t)target_pid);
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
        if (!w || dump_dir_open(req->policy->agent.dump_dir, &dir_fd, &why) != 0 ||
            (walk_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3)) < 0 || !(d = fdopendir(walk_fd))) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, why ? why : "cannot list dumps");
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
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "listing too large");
                return;
        }
        req->audit.have_result_count = true;
        req->audit.result_count = count;
        request_reply_done(req, NULL, "listed the dumps the requester can read");
}
