/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsctl trace, counters, stacks, exceptions and logs (session-client.h): reads a session's stream
 * from the agent's pipe, stops it on Ctrl-C.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "client/counter-sink.h"
#include "client/counter-view.h"
#include "client/exit-status.h"
#include "eventpipe/gcdump-heap.h"
#include "client/gcdump-view.h"
#include "eventpipe/monitor-view.h"
#include "eventpipe/nettrace.h"
#include "client/output.h"
#include "client/progress.h"
#include "client/session-client.h"
#include "common/text.h"
#include "eventpipe/trace-convert.h"

#define READ_CHUNK (256 * 1024)
/* Once the stream has ended, the agent's last frames follow at once; this is only a backstop. */
#define SESSION_ENDING_USEC (60 * 1000000ULL)

typedef struct SessionClient {
        const SessionOptions *options;
        NettraceParser *parser;
        int parse_error;
        uint64_t events;
        /* converting event timestamps to wall-clock time */
        bool have_header;
        NettraceHeader header; /* its clock sync dates the events */
        /* trace */
        Progress progress;
        uint64_t received;
        TraceConverter *converter; /* trace --format, flame: what the stream becomes */
        /* counters */
        CounterView *view;
        CounterSink *sink;
        char *providers;        /* as the agent asked the runtime: the session's SessionId and interval */
        uint32_t target_pid;    /* the agent's word, when it gives it */
        /* stacks, exceptions, logs */
        MonitorView *monitor;
        /* gcdump: the heap the events describe; the first error of its events */
        GcdumpHeap *heap;
        int heap_error;
        /* the agent's word */
        uint64_t request_id;
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

        s->header = *h;
        s->have_header = true;
        if (s->converter)
                trace_converter_header(s->converter, h);
        if (s->monitor)
                monitor_view_header(s->monitor, h);
        if (s->heap)
                gcdump_heap_set_pointer_size(s->heap, h->pointer_size);
        return 0;
}

/* An event's time on the wall clock, in nanoseconds since the epoch; before a header, the epoch. */
static int64_t event_time(const SessionClient *s, uint64_t timestamp) {
        return s->have_header ? nettrace_time_nsec(&s->header, timestamp) : 0;
}

static int64_t now_nsec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int heap_event(SessionClient *s, const NettraceEvent *e);

static int on_event(const NettraceEvent *e, void *userdata) {
        SessionClient *s = userdata;
        NettraceCounter c = {};

        s->events++;
        if (s->monitor)
                return monitor_view_event(s->monitor, e);
        if (s->heap)
                return heap_event(s, e);
        if (s->converter)
                return trace_converter_event(s->converter, e);
        if (s->options->kind == SESSION_OUTPUT_NETTRACE)
                return 0;
        if (nettrace_counter_extract(e, &c) == 0)
                counter_sink_add(s->sink, &c, event_time(s, e->timestamp), now_nsec());
        nettrace_counter_done(&c);
        return 0;
}

/* gcdump: an event of the heap; what the runtime got wrong is told at the end, not here. */
static int heap_event(SessionClient *s, const NettraceEvent *e) {
        int r;

        if (s->heap_error != 0)
                return 0;
        r = gcdump_heap_add(s->heap, e);
        if (r < 0)
                return r;
        if (r == GCDUMP_E_MALFORMED || r == GCDUMP_E_LIMIT)
                s->heap_error = r;
        return 0;
}

static int consume(SessionClient *s, const uint8_t *data, size_t n) {
        int r;

        s->received += n;
        if (s->options->trace_file) {
                r = out_file_write(s->options->trace_file, data, n);
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

/* After a read, or a second without one: the progress line and the counters' view, redrawn; the line at
 * once when @force, else at most ten times a second. */
static void show(SessionClient *s, bool force) {
        if (s->view)
                counter_view_draw(s->view);
        progress_set_bytes(&s->progress, s->received);
        if (s->heap)
                progress_set_items(&s->progress, gcdump_heap_objects(s->heap), "objects");
        progress_draw(&s->progress, force);
}

/*
 * Reads the pipe to its end. The first Ctrl-C asks the agent to stop the
 * session (a shutdown of our side of the socket); the runtime then sends the
 * rest of the trace and the pipe ends. A second one leaves at once.
 */
static int relay(SessionClient *s, AgentClient *client, int pipe_fd) {
        _cleanup_free_ uint8_t *buf = malloc(READ_CHUNK);
        /* a second's timeout only to redraw what is shown, or to the counters' next deadline;
         * otherwise the agent's end is awaited */
        bool ticking = s->progress.enabled || s->view;
        sigset_t during_poll;
        bool stop_sent = false;

        if (!buf)
                return -ENOMEM;
        sigemptyset(&during_poll);
        for (;;) {
                struct pollfd p = { .fd = pipe_fd, .events = POLLIN };
                int64_t deadline = s->sink ? counter_sink_next_deadline(s->sink) : INT64_MAX, left;
                struct timespec timeout = { .tv_sec = 1 };
                ssize_t n;
                int r;

                if (interrupts > 1)
                        return -EINTR;
                if (interrupts == 1 && !stop_sent) {
                        (void)shutdown(client->fd, SHUT_WR);
                        stop_sent = true;
                        progress_clear(&s->progress);
                        if (!s->options->quiet)
                                fprintf(stderr, "dsctl: stopping; Ctrl-C again to leave at once\n");
                }
                if (deadline != INT64_MAX) {
                        left = MAX(deadline - now_nsec(), 0);
                        if (!ticking || left < 1000000000LL)
                                timeout = (struct timespec){ .tv_sec = left / 1000000000LL,
                                                             .tv_nsec = left % 1000000000LL };
                }
                r = ppoll(&p, 1, ticking || deadline != INT64_MAX ? &timeout : NULL, &during_poll);
                if (r < 0 && errno != EINTR)
                        return -errno;
                if (s->sink)
                        counter_sink_tick(s->sink, now_nsec());
                if (r <= 0) {
                        show(s, false);
                        continue;
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
                /* gcdump: once the dump's GC has ended, only the rundown is still wanted; the line says
                 * then how many objects the heap has, whenever it was drawn last */
                if (s->heap && !stop_sent && gcdump_heap_dumped(s->heap)) {
                        (void)shutdown(client->fd, SHUT_WR);
                        stop_sent = true;
                        show(s, true);
                }
                show(s, false);
        }
}

static void trace_summary(SessionClient *s, const char *path) {
        const SessionOptions *o = s->options;

        if (o->json) {
                printf("{\"path\":");
                output_json_string(stdout, path);
                printf(",\"size\":%llu,\"events\":%llu,\"ended\":", (unsigned long long)s->bytes,
                       (unsigned long long)s->events);
                output_json_string(stdout, s->ended ? s->ended : "unknown");
                printf(",\"complete\":%s,\"request_id\":\"%016llx\"}\n", s->complete ? "true" : "false",
                       (unsigned long long)s->request_id);
                fflush(stdout);
        } else if (!o->quiet)
                fprintf(stderr, "dsctl: trace: wrote %s: %llu bytes, %llu events (ended: %s)\n", path,
                        (unsigned long long)s->bytes, (unsigned long long)s->events, s->ended ? s->ended : "unknown");
}

/* The stream into its file: whole under its name, else what arrived as FILE.partial. Return: EXIT_OK and
 * *@ret_path (the name it got), or the exit status of the failure, said. */
static int commit_trace(SessionClient *s, int verdict, const char **ret_path, char **partial) {
        const char *output = s->options->output;
        OutFile *file = s->options->trace_file;

        *ret_path = output;
        if (verdict == 0)
                verdict = out_file_commit(file, output);
        if (verdict == 0)
                return EXIT_OK;
        if (verdict < 0)
                return output_fail(s->options->json, EXIT_ERROR, "trace: cannot write %s: %s", output, strerror(-verdict));
        /* nothing is thrown away: what arrived stays, under a name that says what it is */
        if (asprintf(partial, "%s.partial", output) >= 0 && out_file_commit(file, *partial) == 0)
                return output_fail(s->options->json, EXIT_RUNTIME_FAILED,
                                   "trace: the trace is incomplete (ended: %s; %s); what arrived is in %s",
                                   s->ended ? s->ended : "unknown",
                                   verdict == NETTRACE_E_INCOMPLETE ? "it stops early" : "it is malformed", *partial);
        return output_fail(s->options->json, EXIT_RUNTIME_FAILED, "trace: the trace is incomplete (ended: %s)",
                           s->ended ? s->ended : "unknown");
}

static int finish_trace(SessionClient *s, int verdict) {
        _cleanup_free_ char *partial = NULL;
        const char *path;
        int status = commit_trace(s, verdict, &path, &partial);

        if (status == EXIT_OK)
                trace_summary(s, path);
        return status;
}

static void converted_summary(SessionClient *s, const char *path, const char *nettrace) {
        const SessionOptions *o = s->options;
        uint64_t samples = trace_converter_samples(s->converter), left_out = trace_converter_left_out(s->converter);

        if (o->json) {
                printf("{\"path\":");
                output_json_string(stdout, path);
                printf(",\"format\":\"%s\",\"nettrace\":", trace_format_to_string(o->format));
                if (nettrace)
                        output_json_string(stdout, nettrace);
                else
                        fputs("null", stdout);
                printf(",\"size\":%llu,\"events\":%llu,\"samples\":%llu,\"left_out\":%llu,\"ended\":",
                       (unsigned long long)s->bytes, (unsigned long long)s->events, (unsigned long long)samples,
                       (unsigned long long)left_out);
                output_json_string(stdout, s->ended ? s->ended : "unknown");
                printf(",\"complete\":%s,\"request_id\":\"%016llx\"}\n", s->complete ? "true" : "false",
                       (unsigned long long)s->request_id);
                fflush(stdout);
        } else if (!o->quiet)
                fprintf(stderr, "dsctl: trace: wrote %s (%s): %llu thread samples%s (ended: %s)%s%s\n", path,
                        trace_format_to_string(o->format), (unsigned long long)samples,
                        left_out > 0 ? ", some left out past dsctl's limits" : "", s->ended ? s->ended : "unknown",
                        nettrace ? "; the trace itself in " : "", nettrace ? nettrace : "");
}

/*
 * trace --format, flame: the stream kept too when asked, then the converted file, made of what arrived:
 * a trace cut short is converted as far as it goes, under FILE.partial.
 */
static int finish_converted(SessionClient *s, int verdict) {
        const SessionOptions *o = s->options;
        _cleanup_free_ char *partial = NULL, *nettrace_partial = NULL;
        const char *path = o->converted_output, *nettrace = NULL;
        int status = EXIT_OK, r;

        if (o->trace_file) {
                status = commit_trace(s, verdict, &nettrace, &nettrace_partial);
                if (nettrace_partial)
                        nettrace = nettrace_partial;
                if (status != EXIT_OK && status != EXIT_RUNTIME_FAILED)
                        return status;
        }
        if (!s->have_header)
                return output_fail(o->json, EXIT_RUNTIME_FAILED, "trace: the runtime sent no trace to convert (ended: %s)",
                                   s->ended ? s->ended : "unknown");
        if (verdict != 0) {
                if (asprintf(&partial, "%s.partial", o->converted_output) < 0)
                        return output_fail(o->json, EXIT_ERROR, "out of memory");
                path = partial;
        }
        r = trace_converter_write(s->converter, o->converted_output, o->converted_file->fd);
        if (r == 0)
                r = out_file_commit(o->converted_file, path);
        if (r < 0)
                return output_fail(o->json, EXIT_ERROR, "trace: cannot write %s: %s%s", path, strerror(-r),
                                   r == -EEXIST ? " (it appeared meanwhile; dsctl does not overwrite files)" : "");
        if (verdict != 0)
                return output_fail(o->json, EXIT_RUNTIME_FAILED,
                                   "trace: the trace is incomplete (ended: %s); what arrived is converted in %s",
                                   s->ended ? s->ended : "unknown", path);
        converted_summary(s, path, nettrace);
        return status;
}

/* After the pipe: how it ended, then DONE or ERROR. */
static int read_ending(SessionClient *s, AgentClient *client, SessionErrorReporter report_error, void *userdata) {
        WireMessage m;
        uint32_t complete = 0;
        int r;

        agent_client_set_deadline(client, SESSION_ENDING_USEC, "dsctl's wait for the session's last word (60 s)");
        for (;;) {
                r = agent_client_next(client, &m, NULL, NULL);
                if (r < 0)
                        return output_fail(s->options->json, EXIT_ERROR, "lost the agent before the session's end: %s",
                                           r == -ETIMEDOUT ? client->deadline_what : strerror(-r));
                switch (m.type) {
                case WIRE_REPLY_SESSION_END:
                        (void)wire_message_get_u64(&m, WIRE_TAG_SIZE, &s->bytes);
                        (void)wire_message_get_string(&m, WIRE_TAG_ENDED, &s->ended);
                        (void)wire_message_get_u32(&m, WIRE_TAG_COMPLETE, &complete);
                        s->complete = complete == 1;
                        break;
                case WIRE_REPLY_PROGRESS:
                        break;
                case WIRE_REPLY_DONE:
                        return EXIT_OK;
                case WIRE_REPLY_ERROR:
                        return report_error(&m, userdata);
                default:
                        return output_fail(s->options->json, EXIT_ERROR, "unexpected reply from the agent");
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

/* The agent's first answer that is not progress: STREAM with its pipe, or an error. Return: 0, or an exit status. */
static int await_stream(SessionClient *s, AgentClient *client, WireMessage *m) {
        int r;

        do
                r = agent_client_next(client, m, NULL, NULL);
        while (r == 0 && m->type == WIRE_REPLY_PROGRESS);
        if (r == -ETIMEDOUT)
                return output_fail(s->options->json, EXIT_AGENT_UNREACHABLE,
                                   "the agent did not answer within %s, and %llu s more; giving up",
                                   client->deadline_what, AGENT_CLIENT_GRACE_USEC / 1000000ULL);
        if (r < 0)
                return output_fail(s->options->json, EXIT_ERROR, "lost the agent's reply: %s", strerror(-r));
        if (m->type == WIRE_REPLY_STREAM) {
                (void)wire_message_get_u64(m, WIRE_TAG_REQUEST_ID, &s->request_id);
                (void)wire_message_get_string(m, WIRE_TAG_PROVIDERS, &s->providers);
                (void)wire_message_get_u32(m, WIRE_TAG_PID, &s->target_pid);
        }
        return 0;
}

/* stacks and exceptions show what they gathered once the rundown has named the frames. */
static int finish_monitor(SessionClient *s, int status) {
        const SessionOptions *o = s->options;
        unsigned long shown;

        if (status != EXIT_OK)
                return status;
        shown = monitor_view_finish(s->monitor);
        if (!o->quiet && !o->json && !o->speedscope)
                fprintf(stderr, "dsctl: %lu %s%s (ended: %s)%s\n", shown,
                        o->kind == SESSION_OUTPUT_STACKS ? "threads" : o->kind == SESSION_OUTPUT_LOGS ? "messages" : "exceptions",
                        monitor_view_left_out(s->monitor) > 0 ? ", and more not kept" : "",
                        s->ended ? s->ended : "unknown",
                        s->parse_error != 0 ? "; the stream was cut short" : "");
        /* said with JSON too: what is missing from the output is told on standard error */
        if (!o->quiet && monitor_view_not_shown(s->monitor) > 0)
                fprintf(stderr, "dsctl: %lu more %s not shown: the output reached its limit of %u MiB\n",
                        monitor_view_not_shown(s->monitor), o->kind == SESSION_OUTPUT_STACKS ? "threads" : "exceptions",
                        MONITOR_VIEW_OUTPUT_MAX >> 20);
        return EXIT_OK;
}

static int gcdump_failed(SessionClient *s, int r) {
        return output_fail(s->options->json, r < 0 ? EXIT_ERROR : EXIT_RUNTIME_FAILED, "gcdump: %s (ended: %s)",
                           gcdump_strerror(r), s->ended ? s->ended : "unknown");
}

static int write_gcdump_bytes(const void *data, size_t size, void *userdata) {
        return out_file_write(userdata, data, size);
}

/* gcdump -o: the .gcdump, named once whole. */
static int save_gcdump(SessionClient *s) {
        const SessionOptions *o = s->options;
        int r;

        r = gcdump_heap_write(s->heap, "dsctl", write_gcdump_bytes, o->gcdump_file);
        if (r > 0)
                return gcdump_failed(s, r);
        if (r == 0)
                r = out_file_commit(o->gcdump_file, o->gcdump_output);
        if (r < 0)
                return output_fail(o->json, EXIT_ERROR, "gcdump: cannot write %s: %s%s", o->gcdump_output, strerror(-r),
                                   r == -EEXIST ? " (it appeared meanwhile; dsctl does not overwrite files)" : "");
        if (!o->quiet)
                fprintf(stderr, "dsctl: gcdump: wrote %s\n", o->gcdump_output);
        return EXIT_OK;
}

/* gcdump: the stream kept when asked, then the dump's file and its type table, as asked. */
static int finish_gcdump(SessionClient *s, int status) {
        _cleanup_(gcdump_report_done) GcdumpReport report = {};
        const SessionOptions *o = s->options;
        int r;

        if (status != EXIT_OK)
                return status;
        if (o->trace_file) {
                status = finish_trace(s, s->parse_error != 0 ? s->parse_error : nettrace_finish(s->parser));
                if (status != EXIT_OK)
                        return status;
        }
        /* the stream is read: its parser's buffers go before the heap's graph is built, dsctl's peak */
        s->parser = nettrace_parser_free(s->parser);
        if (s->heap_error != 0)
                return gcdump_failed(s, s->heap_error);
        r = gcdump_heap_report(s->heap, &report);
        if (r != 0)
                return gcdump_failed(s, r);
        if (report.truncated && !o->quiet)
                fprintf(stderr, "dsctl: gcdump: the heap has more than %u objects; the rest is left out, as "
                        "dotnet-gcdump does\n", GCDUMP_NODES_MAX);
        if (o->gcdump_file && (status = save_gcdump(s)) != EXIT_OK)
                return status;
        if (o->gcdump_report && (r = gcdump_report_sort(&report, o->gcdump_sort)) < 0)
                return output_fail(o->json, EXIT_ERROR, "gcdump: %s", strerror(-r));
        if (o->gcdump_report && gcdump_report_print(stdout, &report, o->gcdump_sort) < 0)
                return output_fail(o->json, EXIT_ERROR, "gcdump: cannot write the report: %s", strerror(EIO));
        return EXIT_OK;
}

static bool is_monitor(const SessionOptions *o) {
        return o->kind == SESSION_OUTPUT_STACKS || o->kind == SESSION_OUTPUT_EXCEPTIONS || o->kind == SESSION_OUTPUT_LOGS;
}

/* stacks, exceptions and logs: their view; stacks and exceptions need the events' stacks. */
static int monitor_begin(SessionClient *s, NettraceCallbacks *callbacks) {
        const SessionOptions *o = s->options;
        MonitorViewKind kind = o->kind == SESSION_OUTPUT_STACKS       ? MONITOR_VIEW_STACKS
                               : o->kind == SESSION_OUTPUT_EXCEPTIONS ? MONITOR_VIEW_EXCEPTIONS
                                                                       : MONITOR_VIEW_LOGS;

        callbacks->stacks = kind != MONITOR_VIEW_LOGS;
        return monitor_view_new(kind, o->speedscope ? MONITOR_VIEW_SPEEDSCOPE : o->json ? MONITOR_VIEW_JSON : MONITOR_VIEW_TEXT,
                                stdout, &s->monitor);
}

static int session_client_stream(SessionClient *s, AgentClient *client, SessionErrorReporter report_error,
                                  void *userdata, bool *ret_started) {
        _cleanup_close_ int pipe_fd = -EBADF;
        const SessionOptions *o = s->options;
        WireMessage m;
        int r, status;

        status = await_stream(s, client, &m);
        if (status != 0)
                return status;
        if (m.type == WIRE_REPLY_ERROR)
                return report_error(&m, userdata);
        if (m.type != WIRE_REPLY_STREAM || (pipe_fd = take_pipe(client)) < 0)
                return output_fail(o->json, EXIT_ERROR, "the agent sent no stream");
        *ret_started = true;
        if (o->kind == SESSION_OUTPUT_NETTRACE || o->kind == SESSION_OUTPUT_GCDUMP) {
                if (o->kind == SESSION_OUTPUT_NETTRACE && !o->quiet)
                        fprintf(stderr, o->format == TRACE_FORMAT_NETTRACE
                                                ? "dsctl: tracing; Ctrl-C stops and keeps the trace\n"
                                                : "dsctl: tracing; Ctrl-C stops and converts what was traced\n");
                /* gcdump: the bytes of the stream and the heap's objects its events described so far */
                progress_start(&s->progress, o->kind == SESSION_OUTPUT_GCDUMP ? "gcdump" : "trace", o->progress, NULL);
                show(s, true);
        } else if (s->sink)
                counter_sink_begin(s->sink, s->providers, (pid_t)s->target_pid, now_nsec());

        r = relay(s, client, pipe_fd);
        progress_clear(&s->progress);
        if (r == -EINTR)
                return EXIT_INTERRUPTED;
        if (r < 0)
                return output_fail(o->json, EXIT_ERROR, "%s", strerror(-r));
        if (s->sink && (r = counter_sink_end(s->sink)) < 0)
                return output_fail(o->json, EXIT_ERROR, "counters: cannot write %s: %s",
                                   o->output ? o->output : "the rows", strerror(-r));
        if (s->view)
                counter_view_draw(s->view);
        status = read_ending(s, client, report_error, userdata);
        if (s->monitor)
                return finish_monitor(s, status);
        if (s->heap)
                return finish_gcdump(s, status);
        if (o->kind != SESSION_OUTPUT_NETTRACE || status != EXIT_OK)
                return status;
        if (s->converter)
                return finish_converted(s, s->parse_error != 0 ? s->parse_error : nettrace_finish(s->parser));
        return finish_trace(s, s->parse_error != 0 ? s->parse_error : nettrace_finish(s->parser));
}

int session_client_run(AgentClient *client, const SessionOptions *o, SessionErrorReporter report_error, void *userdata,
                       bool *ret_started) {
        NettraceCallbacks callbacks = { .header = on_header, .event = on_event };
        SessionClient s = { .options = o };
        struct sigaction sa = { .sa_handler = on_interrupt };
        sigset_t blocked;
        int status;

        *ret_started = false;
        if (is_monitor(o) && monitor_begin(&s, &callbacks) < 0)
                return EXIT_ERROR;
        if (o->format != TRACE_FORMAT_NETTRACE) {
                int r = trace_converter_new(o->format, &s.converter);

                if (r < 0)
                        return output_fail(o->json, EXIT_ERROR, "trace: cannot make a spool for the samples: %s",
                                           strerror(-r));
                callbacks.stacks = true;
        }
        if (o->kind == SESSION_OUTPUT_GCDUMP) {
                uint64_t seed = 0;

                if (gcdump_heap_new(&s.heap) < 0)
                        return EXIT_ERROR;
                /* the target must not know how its addresses hash; without getrandom() they hash unseeded */
                (void)getrandom(&seed, sizeof(seed), GRND_NONBLOCK);
                gcdump_heap_set_seed(s.heap, seed);
        }
        if (nettrace_parser_new(&callbacks, &s, &s.parser) < 0) {
                gcdump_heap_free(s.heap);
                monitor_view_free(s.monitor);
                trace_converter_free(s.converter);
                return EXIT_ERROR;
        }
        if ((o->watch && !(s.view = counter_view_new(o->rows, o->title ? o->title : "dsctl: counters"))) ||
            (o->kind != SESSION_OUTPUT_NETTRACE && o->kind != SESSION_OUTPUT_GCDUMP && !is_monitor(o) &&
             counter_sink_new(o, s.view, &s.sink) < 0)) {
                gcdump_heap_free(s.heap);
                counter_view_free(s.view);
                monitor_view_free(s.monitor);
                nettrace_parser_free(s.parser);
                trace_converter_free(s.converter);
                return EXIT_ERROR;
        }
        /* signals wait until ppoll() in relay(), so none is lost between checks */
        sigemptyset(&blocked);
        sigaddset(&blocked, SIGINT);
        sigaddset(&blocked, SIGTERM);
        sigprocmask(SIG_BLOCK, &blocked, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);

        status = session_client_stream(&s, client, report_error, userdata, ret_started);

        counter_sink_free(s.sink);
        counter_view_free(s.view);
        monitor_view_free(s.monitor);
        gcdump_heap_free(s.heap);
        nettrace_parser_free(s.parser);
        trace_converter_free(s.converter);
        free(s.providers);
        free(s.ended);
        return status;
}
