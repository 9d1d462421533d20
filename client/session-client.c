/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "exit-status.h"
#include "nettrace.h"
#include "output.h"
#include "session-client.h"
#include "text.h"

#define READ_CHUNK (256 * 1024)

typedef struct SessionClient {
        const SessionOptions *options;
        NettraceParser *parser;
        int parse_error;
        uint64_t events;
        /* converting event timestamps to wall-clock time */
        bool have_header;
        int64_t sync_qpc, qpc_frequency;
        time_t sync_epoch;
        unsigned sync_ms;
        /* trace */
        int file_fd;
        char *temp_path;
        /* counters */
        FILE *rows;
        unsigned rows_written;
        /* the agent's last word */
        uint64_t bytes;
        char *ended;
        bool complete;
} SessionClient;

static volatile sig_atomic_t interrupts;

static void on_interrupt(int sig) {
        interrupts++;
}

static int on_header(const NettraceHeader *h, void *userdata) {
        SessionClient *s = userdata;
        struct tm tm = {
                .tm_year = h->sync_time[0] - 1900,
                .tm_mon = h->sync_time[1] - 1,
                .tm_mday = h->sync_time[3],
                .tm_hour = h->sync_time[4],
                .tm_min = h->sync_time[5],
                .tm_sec = h->sync_time[6],
        };

        s->sync_epoch = timegm(&tm);
        s->sync_ms = h->sync_time[7];
        s->sync_qpc = h->sync_qpc;
        s->qpc_frequency = h->qpc_frequency;
        s->have_header = true;
        return 0;
}

/* "2026-11-21 14:05:09" in local time, as an operator reads a log. */
static void format_time(const SessionClient *s, uint64_t timestamp, char *buf, size_t size) {
        time_t t = s->sync_epoch;
        struct tm tm;

        if (s->have_header && s->qpc_frequency > 0)
                t += (time_t)(((int64_t)timestamp - s->sync_qpc) / s->qpc_frequency);
        if (!localtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm) == 0)
                snprintf(buf, size, "%lld", (long long)t);
}

static bool counter_is_wanted(const SessionOptions *o, const NettraceCounter *c) {
        bool provider_filtered = false;

        for (size_t i = 0; i < o->n_counter_filters; i++) {
                if (strcmp(o->counter_filter_providers[i], c->provider) != 0)
                        continue;
                provider_filtered = true;
                if (strcmp(o->counter_names[i], c->name) == 0)
                        return true;
        }
        return !provider_filtered;
}

/* dotnet-counters' names: "CPU Usage (%)", "Allocation Rate (B / 1 sec)", "test-gauge (items)". */
static char *counter_label(const NettraceCounter *c) {
        const char *name = c->display_name && *c->display_name ? c->display_name : c->name;
        char *label;

        if ((c->units && *c->units ? asprintf(&label, "%s (%s)", name, c->units) : asprintf(&label, "%s", name)) < 0)
                return NULL;
        return label;
}

static void csv_field(FILE *f, const char *s) {
        if (!strpbrk(s, ",\"\n")) {
                fputs(s, f);
                return;
        }
        fputc('"', f);
        for (; *s; s++) {
                if (*s == '"')
                        fputc('"', f);
                fputc(*s, f);
        }
        fputc('"', f);
}

static void write_counter(SessionClient *s, const NettraceCounter *c, uint64_t timestamp) {
        _cleanup_free_ char *label = counter_label(c);
        _cleanup_free_ char *provider = text_escape(c->provider, strlen(c->provider));
        char when[64];
        FILE *f = s->rows;

        if (!label || !provider)
                return;
        format_time(s, timestamp, when, sizeof(when));
        if (s->options->kind == SESSION_OUTPUT_CSV) {
                _cleanup_free_ char *escaped = text_escape(label, strlen(label));
                if (!escaped)
                        return;
                fprintf(f, "%s,", when);
                csv_field(f, provider);
                fputc(',', f);
                csv_field(f, escaped);
                fprintf(f, ",%s,%.17g\n", c->rate ? "Rate" : "Metric", c->value);
        } else {
                fprintf(f, "%s\n    { \"timestamp\": ", s->rows_written > 0 ? "," : "");
                output_json_string(f, when);
                fputs(", \"provider\": ", f);
                output_json_string(f, c->provider);
                fputs(", \"name\": ", f);
                output_json_string(f, c->name);
                fputs(", \"displayName\": ", f);
                output_json_string(f, label);
                fprintf(f, ", \"counterType\": \"%s\", \"value\": %.17g }", c->rate ? "Rate" : "Metric", c->value);
        }
        s->rows_written++;
        fflush(f);
}

static int on_event(const NettraceEvent *e, void *userdata) {
        SessionClient *s = userdata;
        NettraceCounter c = {};

        s->events++;
        if (s->options->kind == SESSION_OUTPUT_NETTRACE)
                return 0;
        if (nettrace_counter_extract(e, &c) == 0 && counter_is_wanted(s->options, &c))
                write_counter(s, &c, e->timestamp);
        nettrace_counter_done(&c);
        return 0;
}

/*
 * The trace goes to an unnamed file in FILE's directory (O_TMPFILE), which
 * gets its name only once the trace is whole: a dsctl that is killed leaves
 * nothing behind. File systems without O_TMPFILE get a hidden named file.
 */
static int open_trace_file(SessionClient *s) {
        _cleanup_free_ char *dir_copy = strdup(s->options->output), *base_copy = strdup(s->options->output);
        const char *dir;
        int fd;

        if (!dir_copy || !base_copy)
                return -ENOMEM;
        dir = dirname(dir_copy);
        fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
        if (fd >= 0) {
                s->file_fd = fd;
                return 0;
        }
        if (errno != EOPNOTSUPP && errno != EISDIR)
                return -errno;
        if (asprintf(&s->temp_path, "%s/.%s.XXXXXX", dir, basename(base_copy)) < 0) {
                s->temp_path = NULL;
                return -ENOMEM;
        }
        fd = mkostemp(s->temp_path, O_CLOEXEC);
        if (fd < 0)
                return -errno;
        s->file_fd = fd;
        return 0;
}

/* Gives the trace its name; never replaces an existing file. */
static int name_trace_file(SessionClient *s, const char *path) {
        char proc_path[64];

        if (s->temp_path)
                return link(s->temp_path, path) < 0 ? -errno : 0;
        snprintf(proc_path, sizeof(proc_path), "/proc/self/fd/%d", s->file_fd);
        return linkat(AT_FDCWD, proc_path, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
}

static void drop_trace_file(SessionClient *s) {
        s->file_fd = safe_close(s->file_fd);
        if (s->temp_path)
                (void)unlink(s->temp_path);
}

static int open_rows(SessionClient *s) {
        if (!s->options->output) {
                s->rows = stdout;
        } else {
                int fd = open(s->options->output, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
                if (fd < 0)
                        return -errno;
                s->rows = fdopen(fd, "w");
                if (!s->rows) {
                        safe_close(fd);
                        return -ENOMEM;
                }
        }
        if (s->options->kind == SESSION_OUTPUT_CSV)
                fputs("Timestamp,Provider,Counter Name,Counter Type,Mean/Increment\n", s->rows);
        else
                fputs("{ \"Events\": [", s->rows);
        fflush(s->rows);
        return 0;
}

static void close_rows(SessionClient *s) {
        if (!s->rows)
                return;
        if (s->options->kind == SESSION_OUTPUT_JSON)
                fputs("\n] }\n", s->rows);
        if (s->rows == stdout)
                fflush(stdout);
        else
                fclose(s->rows);
        s->rows = NULL;
}

static int write_all(int fd, const uint8_t *data, size_t size) {
        while (size > 0) {
                ssize_t n = write(fd, data, size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                data += n;
                size -= (size_t)n;
        }
        return 0;
}

static int consume(SessionClient *s, const uint8_t *data, size_t n) {
        int r;

        if (s->file_fd >= 0) {
                r = write_all(s->file_fd, data, n);
                if (r < 0)
                        return r;
        }
        if (s->parse_error == 0) {
                r = nettrace_feed(s->parser, data, n);
                if (r < 0)
                        return r;
                s->parse_error = r;
        }
        return 0;
}

/*
 * Reads the pipe to its end. The first Ctrl-C asks the agent to stop the
 * session (a shutdown of our side of the socket); the runtime then sends the
 * rest of the trace and the pipe ends. A second one leaves at once.
 */
static int relay(SessionClient *s, AgentClient *client, int pipe_fd) {
        _cleanup_free_ uint8_t *buf = malloc(READ_CHUNK);
        sigset_t during_poll;
        bool stop_sent = false;

        if (!buf)
                return -ENOMEM;
        sigemptyset(&during_poll);
        for (;;) {
                struct pollfd p = { .fd = pipe_fd, .events = POLLIN };
                ssize_t n;
                int r;

                if (interrupts > 1)
                        return -EINTR;
                if (interrupts == 1 && !stop_sent) {
                        (void)shutdown(client->fd, SHUT_WR);
                        stop_sent = true;
                        if (!s->options->quiet)
                                fprintf(stderr, "dsctl: stopping; Ctrl-C again to leave at once\n");
                }
                if (ppoll(&p, 1, NULL, &during_poll) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                n = read(pipe_fd, buf, READ_CHUNK);
                if (n < 0) {
                        if (errno == EINTR || errno == EAGAIN)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return 0;
                r = consume(s, buf, (size_t)n);
                if (r < 0)
                        return r;
        }
}

static int finish_trace(SessionClient *s, int verdict) {
        const char *output = s->options->output;
        _cleanup_free_ char *partial = NULL;

        if (fsync(s->file_fd) < 0)
                verdict = -errno;
        if (verdict == 0)
                verdict = name_trace_file(s, output);
        if (verdict == 0) {
                drop_trace_file(s);
                if (!s->options->quiet)
                        fprintf(stderr, "dsctl: trace: wrote %s: %llu bytes, %llu events (ended: %s)\n", output,
                                (unsigned long long)s->bytes, (unsigned long long)s->events, s->ended);
                return EXIT_OK;
        }
        if (verdict < 0) {
                fprintf(stderr, "dsctl: trace: cannot write %s: %s\n", output, strerror(-verdict));
                drop_trace_file(s);
                return EXIT_ERROR;
        }
        /* nothing is thrown away: what arrived stays, under a name that says what it is */
        if (asprintf(&partial, "%s.partial", output) >= 0 && name_trace_file(s, partial) == 0)
                fprintf(stderr, "dsctl: trace: the trace is incomplete (ended: %s; %s); what arrived is in %s\n",
                        s->ended ? s->ended : "unknown", verdict == NETTRACE_E_INCOMPLETE ? "it stops early" : "it is malformed",
                        partial);
        else
                fprintf(stderr, "dsctl: trace: the trace is incomplete (ended: %s)\n", s->ended ? s->ended : "unknown");
        drop_trace_file(s);
        return EXIT_RUNTIME_FAILED;
}

/* After the pipe: how it ended, then DONE or ERROR. */
static int read_ending(SessionClient *s, AgentClient *client, SessionErrorReporter report_error, void *userdata) {
        WireMessage m;
        uint32_t complete = 0;
        int r;

        for (;;) {
                r = agent_client_receive(client, &m);
                if (r < 0) {
                        fprintf(stderr, "dsctl: lost the agent before the session's end: %s\n", strerror(-r));
                        return EXIT_ERROR;
                }
                switch (m.type) {
                case WIRE_REPLY_SESSION_END:
                        (void)wire_message_get_u64(&m, WIRE_TAG_SIZE, &s->bytes);
                        (void)wire_message_get_string(&m, WIRE_TAG_ENDED, &s->ended);
                        (void)wire_message_get_u32(&m, WIRE_TAG_COMPLETE, &complete);
                        s->complete = complete == 1;
                        break;
                case WIRE_REPLY_DONE:
                        return EXIT_OK;
                case WIRE_REPLY_ERROR:
                        return report_error(&m, userdata);
                default:
                        fprintf(stderr, "dsctl: unexpected reply from the agent\n");
                        return EXIT_ERROR;
                }
        }
}

static int take_pipe(AgentClient *client) {
        int fd = TAKE_FD(client->received_fd);
        struct stat st;

        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode)) {
                safe_close(fd);
                return -EBADMSG;
        }
        return fd;
}

static int session_client_stream(SessionClient *s, AgentClient *client, SessionErrorReporter report_error, void *userdata) {
        _cleanup_close_ int pipe_fd = -EBADF;
        WireMessage m;
        int r, status;

        r = agent_client_receive(client, &m);
        if (r < 0) {
                fprintf(stderr, "dsctl: lost the agent's reply: %s\n", strerror(-r));
                return EXIT_ERROR;
        }
        if (m.type == WIRE_REPLY_ERROR)
                return report_error(&m, userdata);
        if (m.type != WIRE_REPLY_STREAM || (pipe_fd = take_pipe(client)) < 0) {
                fprintf(stderr, "dsctl: the agent sent no stream\n");
                return EXIT_ERROR;
        }
        r = s->options->kind == SESSION_OUTPUT_NETTRACE ? open_trace_file(s) : open_rows(s);
        if (r < 0) {
                fprintf(stderr, "dsctl: cannot create %s: %s%s\n", s->options->output, strerror(-r),
                        r == -EEXIST ? " (dsctl does not overwrite files)" : "");
                return EXIT_ERROR;
        }
        if (!s->options->quiet && s->options->kind == SESSION_OUTPUT_NETTRACE)
                fprintf(stderr, "dsctl: tracing; Ctrl-C stops and keeps the trace\n");

        r = relay(s, client, pipe_fd);
        if (r == -EINTR)
                return EXIT_INTERRUPTED;
        if (r < 0) {
                fprintf(stderr, "dsctl: %s\n", strerror(-r));
                return EXIT_ERROR;
        }
        status = read_ending(s, client, report_error, userdata);
        if (s->options->kind != SESSION_OUTPUT_NETTRACE)
                return status;
        if (status != EXIT_OK) {
                drop_trace_file(s);
                return status;
        }
        return finish_trace(s, s->parse_error != 0 ? s->parse_error : nettrace_finish(s->parser));
}

int session_client_run(AgentClient *client, const SessionOptions *o, SessionErrorReporter report_error, void *userdata) {
        static const NettraceCallbacks callbacks = { .header = on_header, .event = on_event };
        SessionClient s = { .options = o, .file_fd = -EBADF };
        struct sigaction sa = { .sa_handler = on_interrupt };
        sigset_t blocked;
        int status;

        if (nettrace_parser_new(&callbacks, &s, &s.parser) < 0)
                return EXIT_ERROR;
        /* signals wait until ppoll() in relay(), so none is lost between checks */
        sigemptyset(&blocked);
        sigaddset(&blocked, SIGINT);
        sigaddset(&blocked, SIGTERM);
        sigprocmask(SIG_BLOCK, &blocked, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);

        status = session_client_stream(&s, client, report_error, userdata);

        close_rows(&s);
        if (s.file_fd >= 0)
                drop_trace_file(&s);
        nettrace_parser_free(s.parser);
        free(s.temp_path);
        free(s.ended);
        return status;
}
