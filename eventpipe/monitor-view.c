/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What dsctl stacks, exceptions and logs print of their session's events (monitor-view.h); dsctl's
 * session-client.c feeds it, and the agent's workers for a [[collect]] table's then.stacks.
 */
#include <errno.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/param.h>
#include <time.h>

#include "common/array.h"
#include "common/cleanup.h"
#include "eventpipe/monitor-events.h"
#include "eventpipe/monitor-view.h"
#include "common/text.h"

#define SCOPES_SHOWN_MAX 16 /* nested scopes shown around one message */

/* A stack as it came: instruction pointers, innermost first. */
typedef struct Stack {
        uint64_t thread_id;
        uint64_t timestamp;
        uint64_t *frames;
        size_t depth;
        size_t lost;               /* frames past MONITOR_VIEW_FRAMES_MAX, not kept */
        bool external;             /* stacks: taken outside managed code (monitor_sample_is_external()) */
} Stack;

/* stacks: where a thread's stack is in MonitorView.threads, in a tree by thread id */
typedef struct ThreadIndex {
        uint64_t thread_id;
        size_t index;
} ThreadIndex;

typedef struct Thrown {
        MonitorException x;
        Stack stack;
} Thrown;

struct MonitorView {
        MonitorViewKind kind;
        MonitorViewFormat format;
        FILE *out;                 /* writes into real, counting the bytes */
        FILE *real;
        uint64_t written;

        bool have_header;
        NettraceHeader header;
        MonitorSymbols *symbols;
        MonitorScopes *scopes;

        Stack *threads;            /* stacks: the first sample of each thread, in order of arrival */
        size_t n_threads, cap_threads;
        void *thread_index;        /* of ThreadIndex */
        Thrown *thrown;            /* exceptions */
        size_t n_thrown, cap_thrown;
        size_t kept_bytes;         /* of threads' stacks, or of exceptions */
        unsigned long left_out;
        unsigned long not_shown;
        unsigned long shown;
};

static ssize_t counted_write(void *cookie, const char *buf, size_t size) {
        MonitorView *v = cookie;
        size_t n = fwrite(buf, 1, size, v->real);

        v->written += n;
        return n > 0 || size == 0 ? (ssize_t)n : -1;
}

int monitor_view_new(MonitorViewKind kind, MonitorViewFormat format, FILE *out, MonitorView **ret) {
        _cleanup_free_ MonitorView *v = calloc(1, sizeof(MonitorView));

        if (!v)
                return -ENOMEM;
        *v = (MonitorView){ .kind = kind, .format = format, .real = out };
        v->out = fopencookie(v, "w", (cookie_io_functions_t){ .write = counted_write });
        if (!v->out)
                return -ENOMEM;
        if (monitor_symbols_new(&v->symbols) < 0 || monitor_scopes_new(&v->scopes) < 0) {
                monitor_symbols_free(v->symbols);
                fclose(v->out);
                return -ENOMEM;
        }
        *ret = TAKE_PTR(v);
        return 0;
}

static void view_flush(MonitorView *v) {
        fflush(v->out);
        fflush(v->real);
}

MonitorView *monitor_view_free(MonitorView *v) {
        if (!v)
                return NULL;
        fclose(v->out);
        fflush(v->real);
        tdestroy(v->thread_index, free);
        for (size_t i = 0; i < v->n_threads; i++)
                free(v->threads[i].frames);
        for (size_t i = 0; i < v->n_thrown; i++) {
                monitor_exception_done(&v->thrown[i].x);
                free(v->thrown[i].stack.frames);
        }
        free(v->threads);
        free(v->thrown);
        monitor_symbols_free(v->symbols);
        monitor_scopes_free(v->scopes);
        free(v);
        return NULL;
}

unsigned long monitor_view_left_out(const MonitorView *v) {
        return v->left_out;
}

unsigned long monitor_view_not_shown(const MonitorView *v) {
        return v->not_shown;
}

void monitor_view_header(MonitorView *v, const NettraceHeader *h) {
        v->header = *h;
        v->have_header = true;
}

/* Microseconds since the epoch of an event's timestamp, from the trace's clock sync. */
static int64_t wall_usec(const MonitorView *v, uint64_t timestamp) {
        return v->have_header ? nettrace_time_usec(&v->header, timestamp) : 0;
}

/* ISO 8601 in UTC for JSON ("2026-11-21T14:05:09.123456Z"); local time for people, to the millisecond. */
static void format_time(const MonitorView *v, uint64_t timestamp, bool iso, char *buf, size_t size) {
        int64_t usec = wall_usec(v, timestamp);
        time_t t = (time_t)(usec / 1000000);
        long fraction = (long)(usec % 1000000);
        struct tm tm;
        char head[48];

        if (fraction < 0) {
                fraction += 1000000;
                t--;
        }
        if (!(iso ? gmtime_r(&t, &tm) : localtime_r(&t, &tm)) ||
            strftime(head, sizeof(head), iso ? "%Y-%m-%dT%H:%M:%S" : "%Y-%m-%d %H:%M:%S", &tm) == 0) {
                snprintf(buf, size, "%lld", (long long)t);
                return;
        }
        if (iso)
                snprintf(buf, size, "%s.%06ldZ", head, fraction);
        else
                snprintf(buf, size, "%s.%03ld", head, fraction / 1000);
}

static size_t kept_depth(const NettraceEvent *e) {
        return MIN(e->stack_depth, (size_t)MONITOR_VIEW_FRAMES_MAX);
}

/* A stack of @depth @frames, of which the first MONITOR_VIEW_FRAMES_MAX are kept; @lost were before. */
static int stack_make(uint64_t thread_id, uint64_t timestamp, const uint64_t *frames, size_t depth, size_t lost,
                      Stack *ret) {
        size_t kept = MIN(depth, (size_t)MONITOR_VIEW_FRAMES_MAX);

        *ret = (Stack){ .thread_id = thread_id, .timestamp = timestamp, .depth = kept, .lost = lost + depth - kept };
        if (kept == 0)
                return 0;
        ret->frames = malloc(kept * sizeof(uint64_t));
        if (!ret->frames)
                return -ENOMEM;
        memcpy(ret->frames, frames, kept * sizeof(uint64_t));
        return 0;
}

static int stack_copy(const NettraceEvent *e, Stack *ret) {
        return stack_make(e->thread_id, e->timestamp, e->stack, e->stack_depth, 0, ret);
}

int monitor_thrown_take(MonitorException *x, const NettraceEvent *e, MonitorThrown *ret) {
        Stack s;

        if (stack_copy(e, &s) < 0)
                return -ENOMEM;
        *ret = (MonitorThrown){ .x = *x, .thread_id = s.thread_id, .timestamp = s.timestamp, .frames = s.frames,
                                .depth = s.depth, .lost = s.lost };
        *x = (MonitorException){};
        return 0;
}

int monitor_thrown_copy(const MonitorThrown *t, MonitorThrown *ret) {
        MonitorThrown c = { .x = { .ip = t->x.ip, .hresult = t->x.hresult, .flags = t->x.flags },
                            .thread_id = t->thread_id, .timestamp = t->timestamp };
        Stack s;

        c.x.type = t->x.type ? strdup(t->x.type) : NULL;
        c.x.message = t->x.message ? strdup(t->x.message) : NULL;
        if ((t->x.type && !c.x.type) || (t->x.message && !c.x.message) ||
            stack_make(t->thread_id, t->timestamp, t->frames, t->depth, t->lost, &s) < 0) {
                monitor_exception_done(&c.x);
                return -ENOMEM;
        }
        c.frames = s.frames;
        c.depth = s.depth;
        c.lost = s.lost;
        *ret = c;
        return 0;
}

void monitor_thrown_done(MonitorThrown *t) {
        monitor_exception_done(&t->x);
        free(t->frames);
        *t = (MonitorThrown){};
}

/* Whether @bytes more may be kept: past MONITOR_VIEW_KEPT_BYTES_MAX, what comes is counted, not kept. */
static bool may_keep(MonitorView *v, size_t bytes) {
        if (bytes > MONITOR_VIEW_KEPT_BYTES_MAX - MIN(v->kept_bytes, (size_t)MONITOR_VIEW_KEPT_BYTES_MAX)) {
                v->left_out++;
                return false;
        }
        return true;
}

static int thread_compare(const void *a, const void *b) {
        uint64_t x = ((const ThreadIndex *)a)->thread_id, y = ((const ThreadIndex *)b)->thread_id;

        return x < y ? -1 : x > y;
}

/*
 * Whether the sample @e (@external: monitor_sample_is_external()) is the one to show of its thread rather
 * than @t. JSON and speedscope show the thread's earliest sample. Text shows what dotnet-stack report shows:
 * TraceEvent's thread-time computer (SampleProfilerThreadTimeComputer), which dotnet-stack reads, makes
 * the first sample of a thread from its first stack taken outside managed code, headed "[Native Frames]"
 * (stacks taken in managed code count only once the thread was seen outside it), and dotnet-stack shows
 * each thread's first; a thread never seen outside managed code, which dotnet-stack leaves out, is shown
 * by its earliest sample.
 */
static bool sample_precedes(const MonitorView *v, const NettraceEvent *e, bool external, const Stack *t) {
        if (v->format == MONITOR_VIEW_TEXT && external != t->external)
                return external;
        return e->timestamp < t->timestamp;
}

/* stacks: of each thread, the one sample of the sample profiler to show (sample_precedes()). */
static int on_sample(MonitorView *v, const NettraceEvent *e) {
        ThreadIndex key = { .thread_id = e->thread_id }, *index;
        size_t bytes = sizeof(Stack) + sizeof(ThreadIndex) + 4 * sizeof(void *) + kept_depth(e) * sizeof(uint64_t);
        bool external = monitor_sample_is_external(e);
        void *found;
        int r;

        if (!e->metadata || strcmp(e->metadata->provider, MONITOR_SAMPLE_PROFILER) != 0 || e->stack_depth == 0)
                return 0;
        found = tfind(&key, &v->thread_index, thread_compare);
        if (found) {
                Stack *t = &v->threads[(*(ThreadIndex **)found)->index];
                size_t had = t->depth * sizeof(uint64_t);

                if (!sample_precedes(v, e, external, t))
                        return 0;
                /* a sample that comes later but is shown: it takes the kept one's place */
                v->kept_bytes -= had;
                if (!may_keep(v, kept_depth(e) * sizeof(uint64_t))) {
                        v->kept_bytes += had;
                        return 0;
                }
                free(t->frames);
                r = stack_copy(e, t);
                t->external = external;
                v->kept_bytes += t->depth * sizeof(uint64_t);
                return r;
        }
        if (v->n_threads >= MONITOR_VIEW_THREADS_MAX) {
                v->left_out++;
                return 0;
        }
        if (!may_keep(v, bytes))
                return 0;
        r = array_reserve((void **)&v->threads, &v->cap_threads, v->n_threads, sizeof(Stack));
        if (r < 0)
                return r;
        index = malloc(sizeof(ThreadIndex));
        if (!index)
                return -ENOMEM;
        *index = (ThreadIndex){ .thread_id = e->thread_id, .index = v->n_threads };
        if (!tsearch(index, &v->thread_index, thread_compare)) {
                free(index);
                return -ENOMEM;
        }
        r = stack_copy(e, &v->threads[v->n_threads]);
        if (r < 0) {
                tdelete(index, &v->thread_index, thread_compare);
                free(index);
                return r;
        }
        v->threads[v->n_threads].external = external;
        v->n_threads++;
        v->kept_bytes += bytes;
        return 0;
}

/* @s as shown: its first @max bytes at most, cut on a character's boundary, with what was left out said. */
/* A string as JSON; a process's facts come as its bytes: one that is not UTF-8 becomes U+FFFD. */
static void json_text(FILE *f, const char *s) {
        text_json_string(f, s, strlen(s));
}

static const char *cut(const char *s, size_t max, char **buf) {
        size_t n = strlen(s), k = max;

        *buf = NULL;
        if (n <= max)
                return s;
        while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
                k--;
        if (asprintf(buf, "%.*s\u2026[%zu bytes left out]", (int)k, s, n - k) < 0) {
                *buf = NULL;
                return "\u2026";
        }
        return *buf;
}

/* Replaces *@s with what would be shown of it. Return: 0 or -ENOMEM. */
static int cut_in_place(char **s, size_t max) {
        char *buf;

        (void)cut(*s, max, &buf);
        if (strlen(*s) > max && !buf)
                return -ENOMEM;
        if (buf) {
                free(*s);
                *s = buf;
        }
        return 0;
}

/* Keeps @x (taken: it is left empty) and its stack, within the view's limits. Return: 0 or -ENOMEM. */
static int keep_exception(MonitorView *v, MonitorException *x, uint64_t thread_id, uint64_t timestamp,
                          const uint64_t *frames, size_t depth, size_t lost) {
        size_t bytes;
        int r;

        if (v->n_thrown >= MONITOR_VIEW_EXCEPTIONS_MAX) {
                v->left_out++;
                return 0;
        }
        /* kept as they will be shown: the memory they take is bounded with them */
        if (cut_in_place(&x->type, MONITOR_VIEW_NAME_MAX) < 0 || cut_in_place(&x->message, MONITOR_VIEW_MESSAGE_MAX) < 0)
                return -ENOMEM;
        bytes = sizeof(Thrown) + strlen(x->type) + strlen(x->message) + 2 +
                MIN(depth, (size_t)MONITOR_VIEW_FRAMES_MAX) * sizeof(uint64_t);
        if (!may_keep(v, bytes))
                return 0;
        r = array_reserve((void **)&v->thrown, &v->cap_thrown, v->n_thrown, sizeof(Thrown));
        if (r == 0)
                r = stack_make(thread_id, timestamp, frames, depth, lost, &v->thrown[v->n_thrown].stack);
        if (r != 0)
                return r;
        v->thrown[v->n_thrown++].x = *x;
        v->kept_bytes += bytes;
        *x = (MonitorException){};
        return 0;
}

static int on_exception(MonitorView *v, const NettraceEvent *e) {
        _cleanup_(monitor_exception_done) MonitorException x = {};

        if (monitor_exception_extract(e, v->header.pointer_size, &x) != 0)
                return 0;
        return keep_exception(v, &x, e->thread_id, e->timestamp, e->stack, e->stack_depth, 0);
}

int monitor_view_thrown(MonitorView *v, const MonitorThrown *t) {
        _cleanup_(monitor_exception_done) MonitorException x = { .ip = t->x.ip, .hresult = t->x.hresult,
                                                                 .flags = t->x.flags };

        if (v->kind != MONITOR_VIEW_EXCEPTIONS)
                return 0;
        x.type = strdup(t->x.type ? t->x.type : "");
        x.message = strdup(t->x.message ? t->x.message : "");
        if (!x.type || !x.message)
                return -ENOMEM;
        return keep_exception(v, &x, t->thread_id, t->timestamp, t->frames, t->depth, t->lost);
}

/* A string for people, its first @max bytes: control characters and invalid bytes escaped (text_escape()). */
static void put_text(FILE *f, const char *s, size_t max) {
        _cleanup_free_ char *buf = NULL;
        const char *shown = cut(s, max, &buf);
        _cleanup_free_ char *escaped = text_escape(shown, strlen(shown));

        fputs(escaped ? escaped : "?", f);
}

/* A JSON string of @s's first @max bytes, or null. */
static void put_json(FILE *f, const char *s, size_t max) {
        _cleanup_free_ char *buf = NULL;

        if (s)
                json_text(f, cut(s, max, &buf));
        else
                fputs("null", f);
}

/* "key":value; the key too may come from the stream (a scope's, cut already), and is a JSON string like any other. */
static void json_key_string(FILE *f, const char *key, const char *value, size_t max, bool first) {
        if (!first)
                fputc(',', f);
        put_json(f, key, SIZE_MAX);
        fputc(':', f);
        put_json(f, value, max);
}

static const char *level_name(int32_t level) {
        static const char *const names[] = { "Trace", "Debug", "Information", "Warning", "Error", "Critical", "None" };

        return level >= 0 && level < (int32_t)ELEMENTSOF(names) ? names[level] : "Unknown";
}

/*
 * The arguments of the scopes around a message, outermost scope first, up to MONITOR_VIEW_SCOPE_BYTES_MAX
 * of their keys and values: as JSON members, or " [key=value, ...]" a scope. Return: how many were left out.
 */
static unsigned long scope_arguments_show(FILE *f, const MonitorScope *const *scopes, size_t n, bool json) {
        size_t budget = MONITOR_VIEW_SCOPE_BYTES_MAX;
        unsigned long left_out = 0;
        bool first = true;

        for (size_t i = n; i > 0; i--) {
                const MonitorScope *scope = scopes[i - 1];
                bool opened = false;

                for (size_t k = 0; k < scope->n_arguments; k++) {
                        _cleanup_free_ char *key_buf = NULL, *value_buf = NULL;
                        const char *key, *value;
                        size_t bytes;

                        if (strcmp(scope->keys[k], "{OriginalFormat}") == 0)
                                continue;
                        if (left_out > 0) {
                                left_out++;
                                continue;
                        }
                        key = cut(scope->keys[k], MONITOR_VIEW_NAME_MAX, &key_buf);
                        value = cut(scope->values[k], MONITOR_VIEW_NAME_MAX, &value_buf);
                        bytes = strlen(key) + strlen(value);
                        if (bytes > budget) {
                                left_out++;
                                continue;
                        }
                        budget -= bytes;
                        if (json)
                                json_key_string(f, key, value, SIZE_MAX, first);
                        else {
                                fputs(opened ? ", " : " [", f);
                                put_text(f, key, SIZE_MAX);
                                fputc('=', f);
                                put_text(f, value, SIZE_MAX);
                        }
                        first = false;
                        opened = true;
                }
                if (!json && opened)
                        fputc(']', f);
        }
        return left_out;
}

/* logs: "TIME LEVEL CATEGORY[ID] MESSAGE [scope arguments]", or a JSON line, as each message comes. */
static void log_show(MonitorView *v, const NettraceEvent *e, const MonitorLogEntry *l) {
        const MonitorScope *scopes[SCOPES_SHOWN_MAX];
        size_t n = monitor_scopes_of(v->scopes, e, scopes, ELEMENTSOF(scopes));
        unsigned long left_out;
        FILE *f = v->out;
        char when[64];

        if (v->format == MONITOR_VIEW_JSON) {
                format_time(v, e->timestamp, true, when, sizeof(when));
                fputc('{', f);
                json_key_string(f, "Timestamp", when, SIZE_MAX, true);
                json_key_string(f, "LogLevel", level_name(l->level), SIZE_MAX, false);
                fprintf(f, ",\"EventId\":%d", (int)l->event_id);
                json_key_string(f, "EventName", l->event_name, MONITOR_VIEW_NAME_MAX, false);
                json_key_string(f, "Category", l->category, MONITOR_VIEW_NAME_MAX, false);
                json_key_string(f, "Message", l->message, MONITOR_VIEW_MESSAGE_MAX, false);
                fputs(",\"Scopes\":{", f);
                left_out = scope_arguments_show(f, scopes, n, true);
                fputc('}', f);
                if (left_out > 0)
                        fprintf(f, ",\"ScopesLeftOut\":%lu", left_out);
                fprintf(f, ",\"ThreadId\":%llu}\n", (unsigned long long)e->thread_id);
        } else {
                format_time(v, e->timestamp, false, when, sizeof(when));
                fprintf(f, "%s %s ", when, level_name(l->level));
                put_text(f, l->category, MONITOR_VIEW_NAME_MAX);
                fprintf(f, "[%d] ", (int)l->event_id);
                put_text(f, l->message, MONITOR_VIEW_MESSAGE_MAX);
                left_out = scope_arguments_show(f, scopes, n, false);
                if (left_out > 0)
                        fprintf(f, " [%lu scope arguments left out]", left_out);
                fputc('\n', f);
        }
        view_flush(v);
        v->shown++;
}

static int on_log(MonitorView *v, const NettraceEvent *e) {
        _cleanup_(monitor_log_entry_done) MonitorLogEntry l = {};

        if (monitor_log_extract(e, &l) != 0)
                return 0;
        switch (l.kind) {
        case MONITOR_LOG_SCOPE_START:
                return monitor_scopes_start(v->scopes, e, &l);
        case MONITOR_LOG_SCOPE_STOP:
                monitor_scopes_stop(v->scopes, e);
                return 0;
        default:
                log_show(v, e, &l);
                return 0;
        }
}

int monitor_view_event(MonitorView *v, const NettraceEvent *e) {
        int r;

        switch (v->kind) {
        case MONITOR_VIEW_LOGS:
                return on_log(v, e);
        case MONITOR_VIEW_STACKS:
                r = monitor_symbols_add(v->symbols, e);
                return r == MONITOR_E_OTHER ? on_sample(v, e) : (r < 0 ? r : 0);
        case MONITOR_VIEW_EXCEPTIONS:
                r = monitor_symbols_add(v->symbols, e);
                return r == MONITOR_E_OTHER ? on_exception(v, e) : (r < 0 ? r : 0);
        }
        return 0;
}

/* ---- frames, named at the end ---- */

typedef struct Frame {
        const MonitorMethod *method; /* NULL: frames the rundown does not name, shown as one "[Native Frames]" */
        const char *module;
} Frame;

/* The stack's frames, innermost first, runs of unnamed ones folded into one. */
static size_t frames_of(MonitorView *v, const Stack *s, Frame *out) {
        size_t n = 0;

        for (size_t i = 0; i < s->depth; i++) {
                const MonitorMethod *m = monitor_symbols_lookup(v->symbols, s->frames[i]);

                if (!m && n > 0 && !out[n - 1].method)
                        continue;
                out[n++] = (Frame){ .method = m, .module = m ? monitor_symbols_module(v->symbols, m->module_id) : NULL };
        }
        return n;
}

/* How many of @n frames are shown; *@ret_left_out: those that are not, and those not kept (@lost). */
static size_t frames_shown(size_t n, size_t lost, size_t *ret_left_out) {
        size_t shown = MIN(n, (size_t)MONITOR_VIEW_FRAMES_SHOWN_MAX);

        *ret_left_out = n - shown + lost;
        return shown;
}

/* "Namespace.Type.Method", with "Module!" before it when @module is set and known. */
static void frame_text(FILE *f, const Frame *fr, bool module) {
        if (!fr->method) {
                fputs("[Native Frames]", f);
                return;
        }
        if (module && fr->module) {
                put_text(f, fr->module, MONITOR_VIEW_NAME_MAX);
                fputc('!', f);
        }
        put_text(f, fr->method->name, MONITOR_VIEW_NAME_MAX);
}

/* dotnet-monitor's frame: methodName, className, moduleName. */
static void frame_json(FILE *f, const Frame *fr) {
        _cleanup_free_ char *class_name = NULL;

        if (!fr->method) {
                fputs("{\"methodName\":\"[Native Frames]\",\"className\":null,\"moduleName\":null}", f);
                return;
        }
        if (fr->method->method_at > 0)
                class_name = strndup(fr->method->name, fr->method->method_at - 1);
        fputc('{', f);
        json_key_string(f, "methodName", fr->method->name + fr->method->method_at, MONITOR_VIEW_NAME_MAX, true);
        json_key_string(f, "className", class_name ? class_name : "", MONITOR_VIEW_NAME_MAX, false);
        json_key_string(f, "moduleName", fr->module, MONITOR_VIEW_NAME_MAX, false);
        fputc('}', f);
}

/* The frames past MONITOR_VIEW_FRAMES_SHOWN_MAX, as one frame of their own: "[N frames left out]". */
static void left_out_json(FILE *f, size_t left_out) {
        fprintf(f, "{\"methodName\":\"[%zu frames left out]\",\"className\":null,\"moduleName\":null}", left_out);
}

static void call_stack_json(FILE *f, const Frame *frames, size_t n, size_t lost, uint64_t thread_id) {
        size_t left_out, shown = frames_shown(n, lost, &left_out);

        fprintf(f, "{\"threadId\":%llu,\"threadName\":null,\"frames\":[", (unsigned long long)thread_id);
        for (size_t i = 0; i < shown; i++) {
                if (i > 0)
                        fputc(',', f);
                frame_json(f, &frames[i]);
        }
        if (left_out > 0) {
                if (shown > 0)
                        fputc(',', f);
                left_out_json(f, left_out);
        }
        fputs("]}", f);
}

/* Whether the output reached MONITOR_VIEW_OUTPUT_MAX, @ahead bytes that are still to come counted. */
static bool output_full(MonitorView *v, uint64_t ahead) {
        fflush(v->out);
        return v->written + ahead >= MONITOR_VIEW_OUTPUT_MAX;
}

/*
 * speedscope's file format (https://www.speedscope.app/file-format-schema.json),
 * as dotnet-trace convert --format speedscope writes it: shared frames, one
 * evented profile per thread in milliseconds from the trace's start, whose
 * one sample opens its frames from the root in and closes them again one
 * sampling interval later.
 */
static void stacks_speedscope(MonitorView *v, Frame *frames) {
        FILE *f = v->out;
        double interval = v->header.sampling_rate_ns > 0 ? v->header.sampling_rate_ns / 1e6 : 1.0;
        size_t n_frames_shared = 0, n_threads = v->n_threads;
        uint64_t profiles_bytes = 0;

        fputs("{\"exporter\":\"dsctl " DSAGENT_VERSION "\",\"name\":\"stacks\",\"activeProfileIndex\":0,"
              "\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"shared\":{\"frames\":[",
              f);
        /* each thread's frames in turn, numbered in that order: a frame is listed once per use, which
         * keeps the writer simple and is valid (speedscope merges frames of the same name); the
         * profiles that follow are counted ahead against the limit of the output */
        for (size_t t = 0; t < v->n_threads; t++) {
                size_t n, left_out, shown;

                if (output_full(v, profiles_bytes)) {
                        n_threads = t;
                        break;
                }
                n = frames_of(v, &v->threads[t], frames);
                shown = frames_shown(n, v->threads[t].lost, &left_out);
                for (size_t i = 0; i < shown + (left_out > 0); i++) {
                        _cleanup_free_ char *name = NULL;
                        size_t size = 0;
                        FILE *m = open_memstream(&name, &size);

                        if (!m)
                                continue;
                        if (i < shown)
                                frame_text(m, &frames[i], true);
                        else
                                fprintf(m, "[%zu frames left out]", left_out);
                        fclose(m);
                        fprintf(f, "%s{\"name\":", n_frames_shared > 0 ? "," : "");
                        json_text(f, name ? name : "?");
                        fputc('}', f);
                        n_frames_shared++;
                }
                /* a profile's head, and two events of at most 32 + 2 * 24 bytes a frame */
                profiles_bytes += 256 + (shown + 1) * 2 * 80;
        }
        fputs("]},\"profiles\":[", f);
        n_frames_shared = 0;
        for (size_t t = 0; t < n_threads; t++) {
                size_t n = frames_of(v, &v->threads[t], frames), left_out;
                size_t shown = frames_shown(n, v->threads[t].lost, &left_out);
                double at = (double)(wall_usec(v, v->threads[t].timestamp) - wall_usec(v, (uint64_t)v->header.sync_qpc)) /
                            1000.0;

                n = shown + (left_out > 0);
                if (at < 0)
                        at = 0;
                fprintf(f, "%s{\"type\":\"evented\",\"name\":\"Thread (%llu)\",\"unit\":\"milliseconds\","
                           "\"startValue\":%.6f,\"endValue\":%.6f,\"events\":[",
                        t > 0 ? "," : "", (unsigned long long)v->threads[t].thread_id, at, at + interval);
                for (size_t i = n; i > 0; i--) /* from the root in */
                        fprintf(f, "%s{\"type\":\"O\",\"frame\":%zu,\"at\":%.6f}", i < n ? "," : "",
                                n_frames_shared + i - 1, at);
                for (size_t i = 0; i < n; i++)
                        fprintf(f, ",{\"type\":\"C\",\"frame\":%zu,\"at\":%.6f}", n_frames_shared + i, at + interval);
                fputs("]}", f);
                n_frames_shared += n;
        }
        fputs("]}\n", f);
        v->not_shown = v->n_threads - n_threads;
        v->shown = n_threads;
}

/*
 * A frame as dotnet-stack report names it (TraceEvent's frame name): "Module!Namespace.Type.Method(parameters)",
 * the module's file name without ".dll" or ".exe", "?" for a module not named, "?!?" for code no method holds,
 * and "." before a method of no type (TraceEvent joins the two with "." however empty the type is).
 */
static void dotnet_stack_frame(FILE *f, MonitorView *v, uint64_t ip) {
        const MonitorMethod *m = monitor_symbols_lookup(v->symbols, ip);
        _cleanup_free_ char *module = NULL, *method = NULL;
        const char *file;
        size_t n;

        if (!m) {
                fputs("?!?", f);
                return;
        }
        file = monitor_symbols_module(v->symbols, m->module_id);
        n = file ? strlen(file) : 0;
        if (n > 4 && (strcasecmp(file + n - 4, ".dll") == 0 || strcasecmp(file + n - 4, ".exe") == 0))
                n -= 4;
        module = file ? strndup(file, n) : NULL;
        if (asprintf(&method, "%s%s%s", m->method_at == 0 ? "." : "", m->name, m->parameters) < 0)
                method = NULL;
        put_text(f, module ? module : "?", MONITOR_VIEW_NAME_MAX);
        fputc('!', f);
        put_text(f, method ? method : "?", MONITOR_VIEW_NAME_MAX);
}

/*
 * dotnet-stack report's text: "Thread (0xTID):", "[Native Frames]" when the stack was taken outside managed
 * code, the frames innermost first, each line indented by two spaces, and an empty line after each thread.
 */
static void stacks_text(MonitorView *v) {
        FILE *f = v->out;
        size_t t;

        for (t = 0; t < v->n_threads && !output_full(v, 0); t++) {
                const Stack *s = &v->threads[t];
                size_t left_out, shown = frames_shown(s->depth, s->lost, &left_out);

                fprintf(f, "Thread (0x%llX):\n", (unsigned long long)s->thread_id);
                if (s->external)
                        fputs("  [Native Frames]\n", f);
                for (size_t i = 0; i < shown; i++) {
                        fputs("  ", f);
                        dotnet_stack_frame(f, v, s->frames[i]);
                        fputc('\n', f);
                }
                if (left_out > 0)
                        fprintf(f, "  [%zu frames left out]\n", left_out);
                fputc('\n', f);
        }
        v->not_shown = v->n_threads - t;
        v->shown = t;
}

static void stacks_show(MonitorView *v, Frame *frames) {
        FILE *f = v->out;
        size_t t;

        if (v->format == MONITOR_VIEW_SPEEDSCOPE) {
                stacks_speedscope(v, frames);
                return;
        }
        if (v->format == MONITOR_VIEW_TEXT) {
                stacks_text(v);
                return;
        }
        fputs("{\"threads\":[", f);
        for (t = 0; t < v->n_threads && !output_full(v, 0); t++) {
                size_t n = frames_of(v, &v->threads[t], frames);

                if (t > 0)
                        fputc(',', f);
                call_stack_json(f, frames, n, v->threads[t].lost, v->threads[t].thread_id);
        }
        fputs("]}\n", f);
        v->not_shown = v->n_threads - t;
        v->shown = t;
}

static int thrown_compare(const void *a, const void *b) {
        const Thrown *x = a, *y = b;

        return x->stack.timestamp < y->stack.timestamp ? -1 : x->stack.timestamp > y->stack.timestamp;
}

/* dotnet-monitor's /exceptions: text blocks, or one ExceptionInstance per JSON line. */
static void exceptions_show(MonitorView *v, Frame *frames) {
        FILE *f = v->out;
        size_t i;

        if (v->n_thrown > 1)
                qsort(v->thrown, v->n_thrown, sizeof(Thrown), thrown_compare);
        for (i = 0; i < v->n_thrown && !output_full(v, 0); i++) {
                const Thrown *t = &v->thrown[i];
                const MonitorMethod *thrower = monitor_symbols_lookup(v->symbols, t->x.ip);
                size_t n = frames_of(v, &t->stack, frames), left_out, shown;
                char when[64];

                size_t k = 0;

                /* the stack was taken inside the runtime's dispatch: it starts, as dotnet-monitor's
                 * does, at the method that threw, where ExceptionEIP points; .NET 9 and later leave
                 * that 0, and their managed dispatcher (System.Runtime.EH) is skipped instead */
                while (k < n && (thrower ? frames[k].method != thrower
                                         : frames[k].method && strncmp(frames[k].method->name, "System.Runtime.EH.", 18) == 0))
                        k++;
                if (k == n)
                        k = 0;
                memmove(frames, frames + k, (n - k) * sizeof(Frame));
                n -= k;

                format_time(v, t->stack.timestamp, v->format == MONITOR_VIEW_JSON, when, sizeof(when));
                if (v->format == MONITOR_VIEW_JSON) {
                        fprintf(f, "{\"id\":%zu", i + 1);
                        json_key_string(f, "timestamp", when, SIZE_MAX, false);
                        /* type and message were cut when kept */
                        json_key_string(f, "typeName", t->x.type, SIZE_MAX, false);
                        json_key_string(f, "message", t->x.message, SIZE_MAX, false);
                        fprintf(f, ",\"hresult\":\"0x%08X\",\"innerExceptions\":[],\"callStack\":", t->x.hresult);
                        call_stack_json(f, frames, n, t->stack.lost, t->stack.thread_id);
                        fputs("}\n", f);
                        continue;
                }
                fprintf(f, "%sFirst chance exception at %s on thread %llu\n", i > 0 ? "\n" : "", when,
                        (unsigned long long)t->stack.thread_id);
                put_text(f, t->x.type, SIZE_MAX);
                fputs(": ", f);
                put_text(f, t->x.message, SIZE_MAX);
                fputc('\n', f);
                shown = frames_shown(n, t->stack.lost, &left_out);
                for (size_t j = 0; j < shown; j++) {
                        fputs("   at ", f);
                        frame_text(f, &frames[j], false);
                        fputc('\n', f);
                }
                if (left_out > 0)
                        fprintf(f, "   [%zu frames left out]\n", left_out);
        }
        v->not_shown = v->n_thrown - i;
        v->shown = i;
}

unsigned long monitor_view_finish(MonitorView *v) {
        _cleanup_free_ Frame *frames = malloc(MONITOR_VIEW_FRAMES_MAX * sizeof(Frame));

        if (!frames)
                return v->shown;
        if (v->kind == MONITOR_VIEW_STACKS)
                stacks_show(v, frames);
        else if (v->kind == MONITOR_VIEW_EXCEPTIONS)
                exceptions_show(v, frames);
        view_flush(v);
        return v->shown;
}
