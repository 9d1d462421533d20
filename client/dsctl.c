/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl: ask dsagent for diagnostics of .NET processes */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/agent-client.h"
#include "common/cleanup.h"
#include "client/cli.h"
#include "client/client-test-hooks.h"
#include "client/counter-sink.h"
#include "client/exit-status.h"
#include "common/io.h"
#include "client/out-file.h"
#include "client/port.h"
#include "client/output.h"
#include "client/progress.h"
#include "client/session-client.h"
#include "eventpipe/trace-convert.h"
#include "common/text.h"
#include "common/wire.h"

#define DSCTL_DEFAULT_SOCKET "/run/dsagent.sock"
/* The group the packages' socket admits (units/dsagent.sysusers), when the socket does not say. */
#define DSCTL_GROUP "dsagent"
/* Connecting, and the wait for the agent's first frame, which tells how long the rest may take. */
#define DSCTL_TIMEOUT_SEC 60

static int exit_code_of(uint32_t error) {
        switch (error) {
        case WIRE_ERROR_DENIED: return EXIT_DENIED;
        case WIRE_ERROR_NO_SUCH_PROCESS: return EXIT_NO_SUCH_PROCESS;
        case WIRE_ERROR_NOT_DOTNET: return EXIT_NOT_DOTNET;
        case WIRE_ERROR_RUNTIME_UNREACHABLE: return EXIT_RUNTIME_UNREACHABLE;
        case WIRE_ERROR_RUNTIME_FAILED: return EXIT_RUNTIME_FAILED;
        case WIRE_ERROR_SOCKET_UNTRUSTED: return EXIT_SOCKET_UNTRUSTED;
        case WIRE_ERROR_BUSY: return EXIT_AGENT_BUSY;
        case WIRE_ERROR_NO_SPACE: return EXIT_NO_SPACE;
        case WIRE_ERROR_UNSAFE_FS: return EXIT_UNSAFE_FS;
        case WIRE_ERROR_NO_STAGING: return EXIT_NO_STAGING;
        case WIRE_ERROR_POLICY_BROKEN: return EXIT_POLICY_BROKEN;
        case WIRE_ERROR_SUSPENDED: return EXIT_SUSPENDED;
        case WIRE_ERROR_AUDIT_UNAVAILABLE: return EXIT_AUDIT_UNAVAILABLE;
        case WIRE_ERROR_NO_SUCH_CRASH: return EXIT_NO_SUCH_CRASH;
        case WIRE_ERROR_CORE_UNUSABLE: return EXIT_CORE_UNUSABLE;
        default: return EXIT_ERROR;
        }
}

static int report_error(const Args *a, const WireMessage *m) {
        _cleanup_free_ char *message = NULL, *escaped = NULL;
        uint32_t error = 0, hresult = 0;
        uint64_t request_id = 0;
        int status;

        (void)wire_message_get_u32(m, WIRE_TAG_ERROR, &error);
        (void)wire_message_get_u32(m, WIRE_TAG_HRESULT, &hresult);
        (void)wire_message_get_u64(m, WIRE_TAG_REQUEST_ID, &request_id);
        (void)wire_message_get_string(m, WIRE_TAG_MESSAGE, &message);
        status = exit_code_of(error);

        if (a->json) {
                output_json_error(stdout, status, error, wire_error_to_string(error), message, hresult, request_id);
        } else {
                escaped = message ? text_escape(message, strlen(message)) : NULL;
                fprintf(stderr, "dsctl: %s: %s%s%s (request %016llx)\n", verb_to_string(a->verb),
                        wire_error_to_string(error), escaped ? ": " : "", escaped ? escaped : "",
                        (unsigned long long)request_id);
        }
        return status;
}

static int report_session_error(const WireMessage *m, void *userdata) {
        return report_error(userdata, m);
}

/* The group that may connect, as the socket itself says, for the hint on EACCES. */
static void socket_group(const char *path, char *buf, size_t size) {
        struct group *g;
        struct stat st;

        if (stat(path, &st) == 0 && (g = getgrgid(st.st_gid)) && st.st_gid != 0)
                snprintf(buf, size, "%s", g->gr_name);
        else
                snprintf(buf, size, "%s", DSCTL_GROUP);
}

static int report_connect_error(const Args *a, const char *path, int r) {
        char group[64];

        if (r != -EACCES && r != -EPERM)
                return output_fail(a->json, EXIT_AGENT_UNREACHABLE, "cannot reach dsagent at %s: %s", path, strerror(-r));
        socket_group(path, group, sizeof(group));
        return output_fail(a->json, EXIT_AGENT_UNREACHABLE,
                    "cannot reach dsagent at %s: %s; you may need to be in the group '%s' (then log in again)", path,
                    strerror(-r), group);
}

static int report_transport_error(const Args *a, const AgentClient *client, int r) {
        if (r == -ETIMEDOUT)
                return output_fail(a->json, EXIT_AGENT_UNREACHABLE, "%s: the agent did not answer within %s, and %llu s more; "
                            "giving up", verb_to_string(a->verb), client->deadline_what,
                            AGENT_CLIENT_GRACE_USEC / 1000000ULL);
        return output_fail(a->json, EXIT_ERROR, "%s: lost the agent's reply: %s", verb_to_string(a->verb),
                    r == -EBADMSG ? "malformed reply" : strerror(-r));
}

/* ---- the request ---- */

static void put_target(WireWriter *w, const Args *a) {
        if (a->unit)
                wire_writer_put_string(w, WIRE_TAG_UNIT, a->unit);
        else
                wire_writer_put_u32(w, WIRE_TAG_PID, (uint32_t)a->pid);
}

static void put_session_request(WireWriter *w, const Args *a) {
        if (a->verb == VERB_TRACE || a->verb == VERB_FLAME) {
                wire_writer_put_string(w, WIRE_TAG_TRACE_PROFILE, a->providers ? NULL : a->trace_profile);
                wire_writer_put_string(w, WIRE_TAG_PROVIDERS, a->providers);
                if (a->buffer_mb)
                        wire_writer_put_u32(w, WIRE_TAG_BUFFER_MB, a->buffer_mb);
        } else {
                wire_writer_put_string(w, WIRE_TAG_PROVIDERS, a->counter_providers);
                if (a->interval_sec)
                        wire_writer_put_u32(w, WIRE_TAG_INTERVAL, a->interval_sec);
        }
        if (a->have_duration)
                wire_writer_put_u64(w, WIRE_TAG_DURATION, a->duration_sec);
}

static const WireType request_types[_VERB_MAX] = {
        [VERB_PS] = WIRE_REQUEST_PS,         [VERB_INFO] = WIRE_REQUEST_INFO,
        [VERB_ENV] = WIRE_REQUEST_ENV,
        [VERB_EXPLAIN] = WIRE_REQUEST_EXPLAIN, [VERB_DUMP] = WIRE_REQUEST_DUMP,
        [VERB_DUMPS] = WIRE_REQUEST_DUMPS,   [VERB_TRACE] = WIRE_REQUEST_TRACE,
        [VERB_FLAME] = WIRE_REQUEST_TRACE, /* a trace, decided and recorded as one; dsctl draws it */
        [VERB_COLLECT] = WIRE_REQUEST_COLLECT,
        [VERB_CRASHES] = WIRE_REQUEST_CRASHES,   [VERB_CRASH] = WIRE_REQUEST_CRASH,
        [VERB_COUNTERS] = WIRE_REQUEST_COUNTERS, [VERB_STACKS] = WIRE_REQUEST_STACKS,
        [VERB_GCDUMP] = WIRE_REQUEST_GCDUMP,
        [VERB_EXCEPTIONS] = WIRE_REQUEST_EXCEPTIONS, [VERB_LOGS] = WIRE_REQUEST_LOGS,
        [VERB_RESUME] = WIRE_REQUEST_RESUME,
};

static void put_request(WireWriter *w, const Args *a) {
        wire_writer_begin(w, a->verb == VERB_DUMPS && a->remove ? WIRE_REQUEST_REMOVE_DUMP
                             : a->verb == VERB_DUMPS && a->url ? WIRE_REQUEST_DUMP_URL
                                                               : request_types[a->verb]);
        /* the agent's deadline, and a dump's progress, come as PROGRESS frames */
        wire_writer_put_u32(w, WIRE_TAG_PROGRESS, 1);
        switch (a->verb) {
        case VERB_INFO:
        case VERB_ENV:
        case VERB_RESUME:
                put_target(w, a);
                break;
        case VERB_EXPLAIN:
                put_target(w, a);
                wire_writer_put_string(w, WIRE_TAG_COMMAND, a->command);
                wire_writer_put_string(w, WIRE_TAG_DUMP_TYPE, a->dump_type);
                wire_writer_put_string(w, WIRE_TAG_TRACE_PROFILE, a->trace_profile);
                wire_writer_put_string(w, WIRE_TAG_PROVIDERS, a->providers);
                if (a->have_duration)
                        wire_writer_put_u64(w, WIRE_TAG_DURATION, a->duration_sec);
                break;
        case VERB_DUMP:
                put_target(w, a);
                wire_writer_put_string(w, WIRE_TAG_DUMP_TYPE, a->dump_type);
                if (a->output)
                        wire_writer_put_u32(w, WIRE_TAG_WANT_FD, 1);
                break;
        case VERB_DUMPS:
                wire_writer_put_string(w, WIRE_TAG_PATH, a->remove ? a->remove : a->url);
                break;
        case VERB_CRASHES:
                if (a->since_usec)
                        wire_writer_put_u64(w, WIRE_TAG_TIME, a->since_usec);
                break;
        case VERB_CRASH:
                wire_writer_put_string(w, WIRE_TAG_CRASH_ID, a->crash_id);
                if (a->output)
                        wire_writer_put_u32(w, WIRE_TAG_WANT_FD, 1);
                break;
        case VERB_TRACE:
        case VERB_FLAME:
        case VERB_COUNTERS:
                put_target(w, a);
                put_session_request(w, a);
                break;
        case VERB_STACKS:
        case VERB_GCDUMP:
        case VERB_EXCEPTIONS:
        case VERB_LOGS: /* the agent chooses the providers */
                put_target(w, a);
                wire_writer_put_string(w, WIRE_TAG_LOG_LEVEL, a->log_level);
                wire_writer_put_string(w, WIRE_TAG_LOG_CATEGORY, a->log_category);
                if (a->have_duration)
                        wire_writer_put_u64(w, WIRE_TAG_DURATION, a->duration_sec);
                break;
        default:
                break;
        }
}

static int send_request(const Args *a, AgentClient *client) {
        _cleanup_free_ WireWriter *w = malloc(sizeof(*w));
        int r;

        if (!w)
                return -ENOMEM;
        put_request(w, a);
        r = agent_client_send(client, w);
        /* an agent that refuses at once (busy) may hang up before the request is written;
         * its answer is still waiting to be read */
        return r == -EPIPE || r == -ECONNRESET ? 0 : r;
}

/* ---- what dsctl writes for the caller: made before anything is asked ---- */

typedef struct Outputs {
        OutFile file;           /* dump -o, trace, gcdump --nettrace, trace --format --nettrace; counters --format
                                 * prometheus -o: its directory, pinned */
        OutFile converted;      /* trace --format, flame, convert: the converted file */
        OutFile gcdump;         /* gcdump -o */
        FILE *rows;             /* counters: standard output, or -o */
        bool rows_made;         /* dsctl created the rows file */
} Outputs;

static void outputs_done(Outputs *o) {
        out_file_done(&o->file);
        out_file_done(&o->converted);
        out_file_done(&o->gcdump);
        if (o->rows && o->rows != stdout)
                fclose(o->rows);
}

static int open_rows(const char *path, FILE **ret) {
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);

        if (fd < 0)
                return -errno;
        *ret = fdopen(fd, "w");
        if (!*ret) {
                safe_close(fd);
                return -ENOMEM;
        }
        return 0;
}

/*
 * -o is checked by making the file, as the caller, before the request is
 * sent: a path that cannot be written costs no dump, trace or rate limit.
 */
static int prepare_outputs(const Args *a, Outputs *o) {
        const char *path = a->verb == VERB_TRACE || a->verb == VERB_FLAME || a->verb == VERB_GCDUMP ? a->session.output
                                                                                                   : a->output;
        int r = 0;

        if (a->session.format != TRACE_FORMAT_NETTRACE &&
            (r = out_file_open(&o->converted, a->session.converted_output)) < 0)
                return output_fail(a->json, EXIT_ERROR, "cannot create %s: %s%s; nothing was asked of the agent",
                                   a->session.converted_output, strerror(-r),
                                   r == -EEXIST ? " (dsctl does not overwrite files)" : "");

        if (a->verb == VERB_COUNTERS && !a->output) {
                o->rows = stdout;
                return 0;
        }
        /* prometheus: FILE is replaced each interval; what is checked is that it can be */
        if (a->verb == VERB_COUNTERS && a->session.kind == SESSION_OUTPUT_PROMETHEUS) {
                r = counter_sink_check_file(&o->file, a->output);
                if (r < 0)
                        return output_fail(a->json, EXIT_ERROR, "cannot replace %s: %s; nothing was asked of the agent",
                                           a->output, strerror(-r));
                return 0;
        }
        if (a->verb == VERB_GCDUMP && a->output && (r = out_file_open(&o->gcdump, a->output)) < 0)
                return output_fail(a->json, EXIT_ERROR, "cannot create %s: %s%s; nothing was asked of the agent",
                                   a->output, strerror(-r), r == -EEXIST ? " (dsctl does not overwrite files)" : "");
        if (!path || (a->verb != VERB_DUMP && a->verb != VERB_CRASH && a->verb != VERB_TRACE && a->verb != VERB_FLAME &&
                      a->verb != VERB_GCDUMP && a->verb != VERB_COUNTERS))
                return 0;
        if (a->verb == VERB_COUNTERS) {
                r = open_rows(path, &o->rows);
                o->rows_made = r == 0;
        } else
                r = out_file_open(&o->file, path);
        if (r < 0)
                return output_fail(a->json, EXIT_ERROR, "cannot create %s: %s%s; nothing was asked of the agent", path,
                            strerror(-r), r == -EEXIST ? " (dsctl does not overwrite files)" : "");
        return 0;
}

/* ---- replies ---- */

/* -o FILE: the agent handed over a read-only fd of the dump; it is copied as the caller, into the file made before. */
static int save_dump(const Args *a, AgentClient *client, OutFile *file) {
        _cleanup_close_ int in = TAKE_FD(client->received_fd);
        struct stat st;
        int r;

        if (in < 0)
                return output_fail(a->json, EXIT_DENIED, "%s: the agent sent no copy: you may not read this dump",
                                   verb_to_string(a->verb));
        if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode))
                return output_fail(a->json, EXIT_ERROR, "%s: the agent sent something other than a dump",
                                   verb_to_string(a->verb));
        r = fd_copy_all(in, file->fd, (uint64_t)st.st_size);
        if (r == 0)
                r = out_file_commit(file, a->output);
        if (r < 0)
                return output_fail(a->json, EXIT_ERROR, "cannot write %s: %s%s", a->output, strerror(-r),
                            r == -EEXIST ? " (it appeared meanwhile; dsctl does not overwrite files)" : "");
        return EXIT_OK;
}

static void tick(void *userdata) {
        progress_draw(userdata, false);
}

static void show_progress(Progress *p, const WireMessage *m) {
        uint64_t bytes;

        if (wire_message_get_u64(m, WIRE_TAG_SIZE, &bytes) == 0)
                progress_set_bytes(p, bytes);
        progress_draw(p, false);
}

static int run_replies(const Args *a, AgentClient *client, Outputs *outputs) {
        _cleanup_(output_done) Output out = { .json = a->json, .verb = verb_to_string(a->verb), .stream = stdout,
                                              .removing = a->remove != NULL || a->url != NULL };
        Progress progress;
        WireMessage m;
        int explain_status = EXIT_OK, r;

        progress_start(&progress, verb_to_string(a->verb),
                       (a->verb == VERB_DUMP || a->verb == VERB_CRASH) && progress_wanted(a->quiet),
                       a->verb == VERB_CRASH ? "decompressing the stored core" : "waiting for the runtime's first byte");
        for (;;) {
                r = agent_client_next(client, &m, progress.enabled ? tick : NULL, &progress);
                if (r < 0 || m.type != WIRE_REPLY_PROGRESS)
                        progress_clear(&progress);
                if (r < 0)
                        return report_transport_error(a, client, r);
                switch (m.type) {
                case WIRE_REPLY_PROGRESS:
                        show_progress(&progress, &m);
                        break;
                case WIRE_REPLY_PROCESS:
                        output_process(&out, &m);
                        break;
                case WIRE_REPLY_VERDICT:
                        explain_status = output_verdict(&out, &m) ? EXIT_OK : EXIT_DENIED;
                        break;
                case WIRE_REPLY_ENV:
                        output_env(&out, &m);
                        break;
                case WIRE_REPLY_COLLECT:
                        output_collect(&out, &m);
                        break;
                case WIRE_REPLY_CRASH:
                        output_crash(&out, &m);
                        break;
                case WIRE_REPLY_URL:
                        output_url(&out, &m);
                        break;
                case WIRE_REPLY_DUMP:
                        if ((a->verb == VERB_DUMP || a->verb == VERB_CRASH) && a->output &&
                            (r = save_dump(a, client, &outputs->file)) != EXIT_OK)
                                return r;
                        if (output_dump(&out, &m, a->verb == VERB_DUMP || a->verb == VERB_CRASH ? a->output : NULL) < 0)
                                return output_fail(a->json, EXIT_ERROR, "out of memory");
                        break;
                case WIRE_REPLY_DONE:
                        if (a->remove)
                                output_removed(&out, a->remove);
                        output_end(&out);
                        return explain_status;
                case WIRE_REPLY_ERROR:
                        return report_error(a, &m);
                default:
                        return report_transport_error(a, client, -EBADMSG);
                }
        }
}

static int run_session(Args *a, AgentClient *client, Outputs *outputs) {
        char title[WIRE_UNIT_MAX + 96];
        bool started;
        int status;

        a->session.trace_file = ((a->verb == VERB_TRACE || a->verb == VERB_FLAME) && a->session.output) ||
                                                (a->verb == VERB_GCDUMP && a->nettrace)
                                        ? &outputs->file
                                        : NULL;
        a->session.converted_file = a->session.format != TRACE_FORMAT_NETTRACE ? &outputs->converted : NULL;
        a->session.rows = outputs->rows;
        a->session.gcdump_file = a->verb == VERB_GCDUMP && a->output ? &outputs->gcdump : NULL;
        a->session.prometheus_file = outputs->file.dir_fd >= 0 && a->verb == VERB_COUNTERS ? &outputs->file : NULL;
        a->session.target_pid = a->pid;
        a->session.progress = progress_wanted(a->quiet);
        a->session.json = a->json;
        /* --watch redraws a terminal; anywhere else the rows are what is useful */
        a->session.watch = a->session.watch && a->session.kind == SESSION_OUTPUT_CSV && isatty(STDOUT_FILENO);
        if (a->unit)
                snprintf(title, sizeof(title), "dsctl: counters of %s, every %u s; Ctrl-C ends", a->unit,
                         a->interval_sec ? a->interval_sec : 1);
        else
                snprintf(title, sizeof(title), "dsctl: counters of %d, every %u s; Ctrl-C ends", (int)a->pid,
                         a->interval_sec ? a->interval_sec : 1);
        a->session.title = title;
        status = session_client_run(client, &a->session, report_session_error, a, &started);
        /* rows made for a session that never started would only mislead */
        if (!started && outputs->rows_made)
                (void)unlink(a->output);
        return status;
}

static const char *agent_socket_of(const Args *a) {
        const char *path = a->socket_path;

        if (!path || !*path)
                path = getenv("DSAGENT_SOCKET");
        if (!path || !*path)
                path = DSCTL_DEFAULT_SOCKET;
        return path;
}

/*
 * dsctl exec UNIT: the agent names the unit's one .NET process (RESOLVE), as it would for any
 * request about the unit; the port then asks for that pid with the unit beside it, so that it is
 * served only while it runs there. Return: EXIT_OK and the pid in *@ret_pid, or the exit status
 * of the failure, said on standard error.
 */
static int resolve_unit(const Args *a, pid_t *ret_pid) {
        _cleanup_(agent_client_freep) AgentClient *client = NULL;
        _cleanup_free_ WireWriter *w = malloc(sizeof(*w));
        const char *socket_path = agent_socket_of(a);
        uint32_t pid = 0;
        WireMessage m;
        int r;

        if (!w)
                return output_fail(a->json, EXIT_ERROR, "out of memory");
        r = agent_client_connect(socket_path, DSCTL_TIMEOUT_SEC, &client);
        if (r < 0)
                return report_connect_error(a, socket_path, r);
        wire_writer_begin(w, WIRE_REQUEST_RESOLVE);
        wire_writer_put_u32(w, WIRE_TAG_PROGRESS, 1);
        wire_writer_put_string(w, WIRE_TAG_UNIT, a->unit);
        r = agent_client_send(client, w);
        if (r < 0 && r != -EPIPE && r != -ECONNRESET)
                return output_fail(a->json, EXIT_AGENT_UNREACHABLE, "cannot send the request to dsagent at %s: %s",
                                   socket_path, strerror(-r));
        for (;;) {
                r = agent_client_next(client, &m, NULL, NULL);
                if (r < 0)
                        return report_transport_error(a, client, r);
                switch (m.type) {
                case WIRE_REPLY_PROGRESS:
                        break;
                case WIRE_REPLY_PROCESS:
                        (void)wire_message_get_u32(&m, WIRE_TAG_PID, &pid);
                        break;
                case WIRE_REPLY_DONE:
                        if (pid == 0 || pid > INT32_MAX)
                                return report_transport_error(a, client, -EBADMSG);
                        *ret_pid = (pid_t)pid;
                        return EXIT_OK;
                case WIRE_REPLY_ERROR:
                        return report_error(a, &m);
                default:
                        return report_transport_error(a, client, -EBADMSG);
                }
        }
}

static int run_port(Args *a) {
        PortOptions o;

        if (a->verb == VERB_EXEC && a->unit) {
                int status = resolve_unit(a, &a->pid);

                if (status != EXIT_OK)
                        return status;
                if (!a->quiet)
                        fprintf(stderr, "dsctl: exec: %s is process %d ({pid}, $DSCTL_PID); serving it while it runs "
                                "there\n", a->unit, (int)a->pid);
        }
        o = (PortOptions){ .agent_socket = agent_socket_of(a), .pid = a->pid, .unit = a->unit,
                           .path = a->port_socket, .once = a->once, .quiet = a->quiet,
                           .exec_argv = a->verb == VERB_EXEC ? a->exec_argv : NULL };
        return port_run(&o);
}

static int convert_summary(const Args *a, const char *path, uint64_t samples, uint64_t left_out, bool complete) {
        if (a->json) {
                printf("{\"path\":");
                output_json_string(stdout, path);
                printf(",\"format\":\"%s\",\"samples\":%llu,\"left_out\":%llu,\"complete\":%s}\n",
                       trace_format_to_string(a->trace_format), (unsigned long long)samples,
                       (unsigned long long)left_out, complete ? "true" : "false");
                fflush(stdout);
        } else if (!a->quiet)
                fprintf(stderr, "dsctl: convert: wrote %s: %llu thread samples%s%s\n", path, (unsigned long long)samples,
                        left_out > 0 ? ", some left out: past dsctl's limits" : "",
                        complete ? "" : "; the trace stops early, and was converted as far as it goes");
        return complete ? EXIT_OK : EXIT_RUNTIME_FAILED;
}

/* dsctl convert: no agent; the caller's own file, read as the caller, into a new file of theirs. A trace
 * cut short is converted as far as it goes, under FILE.partial. */
static int run_convert(const Args *a) {
        _cleanup_(out_file_done) OutFile out = OUT_FILE_NULL;
        _cleanup_free_ char *partial = NULL;
        _cleanup_close_ int in = -EBADF;
        uint64_t samples = 0, left_out = 0;
        const char *path = a->output;
        bool converted;
        int r, k;

        in = open(a->input, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (in < 0)
                return output_fail(a->json, EXIT_ERROR, "cannot read %s: %s", a->input, strerror(errno));
        r = out_file_open(&out, a->output);
        if (r < 0)
                return output_fail(a->json, EXIT_ERROR, "cannot create %s: %s%s", a->output, strerror(-r),
                                   r == -EEXIST ? " (dsctl does not overwrite files)" : "");
        r = trace_convert_file(in, a->trace_format, a->output, out.fd, &samples, &left_out, &converted);
        if (r < 0)
                return output_fail(a->json, EXIT_ERROR, "convert: %s: %s", a->input, strerror(-r));
        if (!converted)
                return output_fail(a->json, EXIT_RUNTIME_FAILED, "convert: %s is no nettrace stream dsctl reads (%s)",
                                   a->input, r == NETTRACE_E_UNSUPPORTED ? "a format it does not take" : "malformed");
        if (r > 0) {
                if (asprintf(&partial, "%s.partial", a->output) < 0)
                        return output_fail(a->json, EXIT_ERROR, "out of memory");
                path = partial;
        }
        k = out_file_commit(&out, path);
        if (k < 0)
                return output_fail(a->json, EXIT_ERROR, "cannot write %s: %s%s", path, strerror(-k),
                                   k == -EEXIST ? " (it appeared meanwhile; dsctl does not overwrite files)" : "");
        return convert_summary(a, path, samples, left_out, r == 0);
}

static int run(Args *a) {
        _cleanup_(agent_client_freep) AgentClient *client = NULL;
        _cleanup_(outputs_done) Outputs outputs = { .file = OUT_FILE_NULL, .gcdump = OUT_FILE_NULL };
        const char *socket_path = agent_socket_of(a);
        int r;

        if (a->verb == VERB_PORT || a->verb == VERB_EXEC)
                return run_port(a);
        if (a->verb == VERB_CONVERT)
                return run_convert(a);
        r = prepare_outputs(a, &outputs);
        if (r != 0)
                return r;
        r = agent_client_connect(socket_path, client_test_hook_agent_wait(DSCTL_TIMEOUT_SEC), &client);
        if (r < 0)
                return report_connect_error(a, socket_path, r);
        r = send_request(a, client);
        if (r < 0)
                return output_fail(a->json, EXIT_AGENT_UNREACHABLE, "cannot send the request to dsagent at %s: %s", socket_path,
                            strerror(-r));
        if (a->verb == VERB_TRACE || a->verb == VERB_FLAME || a->verb == VERB_COUNTERS || a->verb == VERB_STACKS ||
            a->verb == VERB_EXCEPTIONS || a->verb == VERB_LOGS || a->verb == VERB_GCDUMP)
                return run_session(a, client, &outputs);
        return run_replies(a, client, &outputs);
}

int main(int argc, char **argv) {
        _cleanup_(args_done) Args a = ARGS_NULL;
        _cleanup_free_ char *error = NULL;
        int r;

        r = cli_parse(argc, argv, &a, &error);
        if (r < 0) {
                const char *message = error ? error : strerror(-r);
                /* the parser's words begin with "dsctl: ", as every message of dsctl does */
                if (strncmp(message, "dsctl: ", 7) == 0)
                        message += 7;
                return output_fail(a.json, r == -EINVAL ? EXIT_USAGE : EXIT_ERROR, "%s", message);
        }
        if (a.version) {
                printf("dsctl %s\n", DSAGENT_VERSION);
                return EXIT_OK;
        }
        if (a.help) {
                cli_help(stdout, a.verb);
                return EXIT_OK;
        }
        return run(&a);
}
