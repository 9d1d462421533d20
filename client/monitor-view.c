/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array.h"
#include "cleanup.h"
#include "monitor-events.h"
#include "monitor-view.h"
#include "output.h"
#include "text.h"

#define SCOPES_SHOWN_MAX 16 /* nested scopes shown around one message */

/* A stack as it came: instruction pointers, innermost first. */
typedef struct Stack {
        uint64_t thread_id;
        uint64_t timestamp;
        uint64_t *frames;
        size_t depth;
} Stack;

typedef struct Thrown {
        MonitorException x;
        Stack stack;
} Thrown;

struct MonitorView {
        MonitorViewKind kind;
        MonitorViewFormat format;
        FILE *out;

        bool have_header;
        NettraceHeader header;
        MonitorSymbols *symbols;
        MonitorScopes *scopes;

        Stack *threads;            /* stacks: the first sample of each thread, in order of arrival */
        size_t n_threads, cap_threads;
        Thrown *thrown;            /* exceptions */
        size_t n_thrown, cap_thrown;
        unsigned long left_out;
        unsigned long shown;
};

int monitor_view_new(MonitorViewKind kind, MonitorViewFormat format, FILE *out, MonitorView **ret) {
        _cleanup_free_ MonitorView *v = calloc(1, sizeof(MonitorView));

        if (!v)
                return -ENOMEM;
        *v = (MonitorView){ .kind = kind, .format = format, .out = out };
        if (monitor_symbols_new(&v->symbols) < 0 || monitor_scopes_new(&v->scopes) < 0) {
                monitor_symbols_free(v->symbols);
                return -ENOMEM;
        }
        *ret = TAKE_PTR(v);
        return 0;
}

MonitorView *monitor_view_free(MonitorView *v) {
        if (!v)
                return NULL;
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

static int stack_copy(const NettraceEvent *e, Stack *ret) {
        size_t depth = e->stack_depth < MONITOR_VIEW_FRAMES_MAX ? e->stack_depth : MONITOR_VIEW_FRAMES_MAX;

        *ret = (Stack){ .thread_id = e->thread_id, .timestamp = e->timestamp, .depth = depth };
        if (depth == 0)
                return 0;
        ret->frames = malloc(depth * sizeof(uint64_t));
        if (!ret->frames)
                return -ENOMEM;
        memcpy(ret->frames, e->stack, depth * sizeof(uint64_t));
        return 0;
}

/* stacks: the sample profiler's first (earliest) sample of each thread. */
static int on_sample(MonitorView *v, const NettraceEvent *e) {
        Stack *t = NULL;
        int r;

        if (!e->metadata || strcmp(e->metadata->provider, MONITOR_SAMPLE_PROFILER) != 0 || e->stack_depth == 0)
                return 0;
        for (size_t i = 0; i < v->n_threads && !t; i++)
                if (v->threads[i].thread_id == e->thread_id)
                        t = &v->threads[i];
        if (t && t->timestamp <= e->timestamp)
                return 0;
        if (t) {
                free(t->frames);
                return stack_copy(e, t);
        }
        if (v->n_threads >= MONITOR_VIEW_THREADS_MAX)
                return 0;
        r = array_reserve((void **)&v->threads, &v->cap_threads, v->n_threads, sizeof(Stack));
        if (r == 0)
                r = stack_copy(e, &v->threads[v->n_threads]);
        if (r == 0)
                v->n_threads++;
        return r;
}

static int on_exception(MonitorView *v, const NettraceEvent *e) {
        _cleanup_(monitor_exception_done) MonitorException x = {};
        int r;

        if (monitor_exception_extract(e, v->header.pointer_size, &x) != 0)
                return 0;
        if (v->n_thrown >= MONITOR_VIEW_EXCEPTIONS_MAX) {
                v->left_out++;
                return 0;
        }
        r = array_reserve((void **)&v->thrown, &v->cap_thrown, v->n_thrown, sizeof(Thrown));
        if (r == 0)
                r = stack_copy(e, &v->thrown[v->n_thrown].stack);
        if (r != 0)
                return r;
        v->thrown[v->n_thrown++].x = x;
        x = (MonitorException){};
        return 0;
}

/* A string for people: control characters and invalid bytes escaped (text_escape()). */
static void put_text(FILE *f, const char *s) {
        _cleanup_free_ char *escaped = text_escape(s, strlen(s));

        fputs(escaped ? escaped : "?", f);
}

static void json_key_string(FILE *f, const char *key, const char *value, bool first) {
        fprintf(f, "%s\"%s\":", first ? "" : ",", key);
        if (value)
                output_json_string(f, value);
        else
                fputs("null", f);
}

static const char *level_name(int32_t level) {
        static const char *const names[] = { "Trace", "Debug", "Information", "Warning", "Error", "Critical", "None" };

        return level >= 0 && level < (int32_t)ELEMENTSOF(names) ? names[level] : "Unknown";
}

/* logs: "TIME LEVEL CATEGORY[ID] MESSAGE [scope arguments]", or a JSON line, as each message comes. */
static void log_show(MonitorView *v, const NettraceEvent *e, const MonitorLogEntry *l) {
        const MonitorScope *scopes[SCOPES_SHOWN_MAX];
        size_t n = monitor_scopes_of(v->scopes, e, scopes, ELEMENTSOF(scopes));
        FILE *f = v->out;
        char when[64];

        if (v->format == MONITOR_VIEW_JSON) {
                char time_iso[64];
                bool first = true;

                format_time(v, e->timestamp, true, time_iso, sizeof(time_iso));
                fputc('{', f);
                json_key_string(f, "Timestamp", time_iso, true);
                json_key_string(f, "LogLevel", level_name(l->level), false);
                fprintf(f, ",\"EventId\":%d", (int)l->event_id);
                json_key_string(f, "EventName", l->event_name, false);
                json_key_string(f, "Category", l->category, false);
                json_key_string(f, "Message", l->message, false);
                fputs(",\"Scopes\":{", f);
                for (size_t i = n; i > 0; i--)
                        for (size_t k = 0; k < scopes[i - 1]->n_arguments; k++) {
                                if (strcmp(scopes[i - 1]->keys[k], "{OriginalFormat}") == 0)
                                        continue;
                                json_key_string(f, scopes[i - 1]->keys[k], scopes[i - 1]->values[k], first);
                                first = false;
                        }
                fprintf(f, "},\"ThreadId\":%llu}\n", (unsigned long long)e->thread_id);
        } else {
                format_time(v, e->timestamp, false, when, sizeof(when));
                fprintf(f, "%s %s ", when, level_name(l->level));
                put_text(f, l->category);
                fprintf(f, "[%d] ", (int)l->event_id);
                put_text(f, l->message);
                for (size_t i = n; i > 0; i--) {
                        bool first = true;

                        for (size_t k = 0; k < scopes[i - 1]->n_arguments; k++) {
                                if (strcmp(scopes[i - 1]->keys[k], "{OriginalFormat}") == 0)
                                        continue;
                                fputs(first ? " [" : ", ", f);
                                put_text(f, scopes[i - 1]->keys[k]);
                                fputc('=', f);
                                put_text(f, scopes[i - 1]->values[k]);
                                first = false;
                        }
                        if (!first)
                                fputc(']', f);
                }
                fputc('\n', f);
        }
        fflush(f);
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

/* "Namespace.Type.Method", with "Module!" before it when @module is set and known. */
static void frame_text(FILE *f, const Frame *fr, bool module) {
        if (!fr->method) {
                fputs("[Native Frames]", f);
                return;
        }
        if (module && fr->module) {
                put_text(f, fr->module);
                fputc('!', f);
        }
        put_text(f, fr->method->name);
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
        json_key_string(f, "methodName", fr->method->name + fr->method->method_at, true);
        json_key_string(f, "className", class_name ? class_name : "", false);
        json_key_string(f, "moduleName", fr->module, false);
        fputc('}', f);
}

static void call_stack_json(FILE *f, const Frame *frames, size_t n, uint64_t thread_id) {
        fprintf(f, "{\"threadId\":%llu,\"threadName\":null,\"frames\":[", (unsigned long long)thread_id);
        for (size_t i = 0; i < n; i++) {
                if (i > 0)
                        fputc(',', f);
                frame_json(f, &frames[i]);
        }
        fputs("]}", f);
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
        size_t n_frames_shared = 0;

        fputs("{\"exporter\":\"dsctl " DSAGENT_VERSION "\",\"name\":\"stacks\",\"activeProfileIndex\":0,"
              "\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"shared\":{\"frames\":[",
              f);
        /* each thread's frames in turn, numbered in that order: a frame is listed once per use, which
         * keeps the writer simple and is valid (speedscope merges frames of the same name) */
        for (size_t t = 0; t < v->n_threads; t++) {
                size_t n = frames_of(v, &v->threads[t], frames);

                for (size_t i = 0; i < n; i++) {
                        _cleanup_free_ char *name = NULL;
                        size_t size = 0;
                        FILE *m = open_memstream(&name, &size);

                        if (!m)
                                continue;
                        frame_text(m, &frames[i], true);
                        fclose(m);
                        fprintf(f, "%s{\"name\":", n_frames_shared > 0 ? "," : "");
                        output_json_string(f, name ? name : "?");
                        fputc('}', f);
                        n_frames_shared++;
                }
        }
        fputs("]},\"profiles\":[", f);
        n_frames_shared = 0;
        for (size_t t = 0; t < v->n_threads; t++) {
                size_t n = frames_of(v, &v->threads[t], frames);
                double at = (double)(wall_usec(v, v->threads[t].timestamp) - wall_usec(v, (uint64_t)v->header.sync_qpc)) /
                            1000.0;

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
}

static void stacks_show(MonitorView *v, Frame *frames) {
        FILE *f = v->out;

        if (v->format == MONITOR_VIEW_SPEEDSCOPE) {
                stacks_speedscope(v, frames);
                return;
        }
        if (v->format == MONITOR_VIEW_JSON)
                fputs("{\"threads\":[", f);
        for (size_t t = 0; t < v->n_threads; t++) {
                size_t n = frames_of(v, &v->threads[t], frames);

                if (v->format == MONITOR_VIEW_JSON) {
                        if (t > 0)
                                fputc(',', f);
                        call_stack_json(f, frames, n, v->threads[t].thread_id);
                        continue;
                }
                fprintf(f, "%sThread %llu (0x%llX):\n", t > 0 ? "\n" : "", (unsigned long long)v->threads[t].thread_id,
                        (unsigned long long)v->threads[t].thread_id);
                for (size_t i = 0; i < n; i++) {
                        fputs("  ", f);
                        frame_text(f, &frames[i], true);
                        fputc('\n', f);
                }
        }
        if (v->format == MONITOR_VIEW_JSON)
                fputs("]}\n", f);
}

static int thrown_compare(const void *a, const void *b) {
        const Thrown *x = a, *y = b;

        return x->stack.timestamp < y->stack.timestamp ? -1 : x->stack.timestamp > y->stack.timestamp;
}

/* dotnet-monitor's /exceptions: text blocks, or one ExceptionInstance per JSON line. */
static void exceptions_show(MonitorView *v, Frame *frames) {
        FILE *f = v->out;

        if (v->n_thrown > 1)
                qsort(v->thrown, v->n_thrown, sizeof(Thrown), thrown_compare);
        for (size_t i = 0; i < v->n_thrown; i++) {
                const Thrown *t = &v->thrown[i];
                const MonitorMethod *thrower = monitor_symbols_lookup(v->symbols, t->x.ip);
                size_t n = frames_of(v, &t->stack, frames);
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
                        json_key_string(f, "timestamp", when, false);
                        json_key_string(f, "typeName", t->x.type, false);
                        json_key_string(f, "message", t->x.message, false);
                        fprintf(f, ",\"hresult\":\"0x%08X\",\"innerExceptions\":[],\"callStack\":", t->x.hresult);
                        call_stack_json(f, frames, n, t->stack.thread_id);
                        fputs("}\n", f);
                        continue;
                }
                fprintf(f, "%sFirst chance exception at %s on thread %llu\n", i > 0 ? "\n" : "", when,
                        (unsigned long long)t->stack.thread_id);
                put_text(f, t->x.type);
                fputs(": ", f);
                put_text(f, t->x.message);
                fputc('\n', f);
                for (size_t j = 0; j < n; j++) {
                        fputs("   at ", f);
                        frame_text(f, &frames[j], false);
                        fputc('\n', f);
                }
        }
}

unsigned long monitor_view_finish(MonitorView *v) {
        _cleanup_free_ Frame *frames = malloc(MONITOR_VIEW_FRAMES_MAX * sizeof(Frame));

        if (!frames)
                return v->shown;
        if (v->kind == MONITOR_VIEW_STACKS) {
                stacks_show(v, frames);
                v->shown = v->n_threads;
        } else if (v->kind == MONITOR_VIEW_EXCEPTIONS) {
                exceptions_show(v, frames);
                v->shown = v->n_thrown;
        }
        fflush(v->out);
        return v->shown;
}
