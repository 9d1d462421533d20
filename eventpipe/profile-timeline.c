/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A CPU profile's time line as speedscope and Chromium files, as dotnet-trace convert writes them
 * (profile-timeline.h); pure: writes to the FILE it is given */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "eventpipe/profile-timeline.h"
#include "common/text.h"

#define PATH_MAX_FRAMES (CPU_PROFILE_DEPTH_MAX + 5) /* process, activities, threads, thread, the stack, the leaf */
#define NO_FRAME UINT32_MAX

/* StackSourceWriterHelper.Sample: one frame of one sample, and how long it has lasted so far. */
typedef struct Open {
        double time;
        float metric;
        int depth;
        uint32_t frame;          /* exported */
} Open;

/* FrameInfo: an exported frame, its caller where it was first seen (or NO_FRAME). */
typedef struct Exported {
        uint32_t frame;          /* the profile's */
        uint32_t parent;
} Exported;

typedef struct Writer {
        CpuProfile *profile;
        ProfileTimelineFormat format;
        FILE *out;
        uint32_t *exported_of;   /* by the profile's frame: its exported id, or NO_FRAME */
        Exported *exported;
        size_t n_exported;
        uint32_t path[PATH_MAX_FRAMES];
        Open previous[PATH_MAX_FRAMES], current[PATH_MAX_FRAMES];
        size_t n_previous, n_current;
        bool any_event;          /* of this thread */
        double last_time;        /* of its last event */
        double first_time;
        bool first_of_all;       /* no event written yet (chromium's one array) */
        uint32_t tid;            /* chromium: the thread's id as TraceEvent reads it from its frame's name */
} Writer;

/* A double as .NET's "R" writes it, read back as the same double: the shortest of 15, 16 or 17 digits that
 * is. JSON has no infinity or NaN, which finite times never make. */
static void json_double(FILE *f, double v) {
        char buf[32];

        if (!isfinite(v)) {
                fputc('0', f);
                return;
        }
        for (int precision = 15; precision <= 17; precision++) {
                snprintf(buf, sizeof(buf), "%.*g", precision, v);
                if (precision == 17 || strtod(buf, NULL) == v)
                        break;
        }
        fputs(buf, f);
}

static void json_text(FILE *f, const char *s) {
        text_json_string_html(f, s, strlen(s));
}

/* The name after a frame's first '!' (its method), and before it (its module: the category). */
static const char *short_name(const char *name) {
        const char *bang = strchr(name, '!');

        return bang && bang > name ? bang + 1 : name;
}

/* ThreadInfo's id: the digits in the first "(DIGITS)" of the thread frame's name, else 0. */
static uint32_t id_in_name(const char *name) {
        for (const char *p = strchr(name, '('); p; p = strchr(p + 1, '(')) {
                size_t n = strspn(p + 1, "0123456789");
                if (n > 0 && n <= 10 && p[1 + n] == ')')
                        return (uint32_t)strtoul(p + 1, NULL, 10);
        }
        return 0;
}

static int export_frame(Writer *w, uint32_t frame, uint32_t caller, uint32_t *ret) {
        uint32_t id = w->exported_of[frame];

        if (id == NO_FRAME) {
                id = (uint32_t)w->n_exported++;
                w->exported_of[frame] = id;
                w->exported[id] = (Exported){ .frame = frame, .parent = caller };
        }
        *ret = id;
        return 0;
}

static void write_event(Writer *w, bool open, const Open *o, double at) {
        FILE *f = w->out;

        if (w->format == PROFILE_TIMELINE_SPEEDSCOPE) {
                fprintf(f, "%s{\"type\":\"%s\",\"frame\":%" PRIu32 ",\"at\":", w->any_event ? "," : "", open ? "O" : "C",
                        o->frame);
                json_double(f, at);
                fputc('}', f);
        } else {
                fputs(w->first_of_all ? "{\"name\":" : ",{\"name\":", f);
                json_text(f, short_name(cpu_profile_frame_name(w->profile, w->exported[o->frame].frame)));
                fprintf(f, ",\"cat\":\"sampleEvent\",\"ph\":\"%s\",\"ts\":", open ? "B" : "E");
                json_double(f, at * 1000);
                fprintf(f, ",\"pid\":0,\"tid\":%" PRIu32 ",\"sf\":%" PRIu32 "}", w->tid, o->frame);
                w->first_of_all = false;
        }
        if (!w->any_event)
                w->first_time = at;
        w->any_event = true;
        w->last_time = at;
}

/* .NET's Math.Max(): NaN wins, which finite times never make */
static double max_of(double a, double b) {
        return a > b || isnan(a) ? a : b;
}

/* AreNotContinuous() */
static bool continuous(const Open *left, const Open *right) {
        return left->depth == right->depth && left->frame == right->frame &&
               !(left->time + (left->metric * 1.001) < right->time);
}

/* HandleSamples(): what the sample continues of the one before grows, the rest closes, its own opens. */
static void handle_sample(Writer *w) {
        double last = w->any_event ? w->last_time : 0.0;
        size_t i = 0, max = w->n_previous < w->n_current ? w->n_previous : w->n_current;

        while (i < max && continuous(&w->previous[i], &w->current[i])) {
                w->previous[i].metric = w->previous[i].metric + w->current[i].metric;
                i++;
        }
        for (size_t j = w->n_previous; j > i; j--) {
                const Open *o = &w->previous[j - 1];
                last = max_of(o->time + o->metric, last);
                write_event(w, false, o, last);
        }
        w->n_previous = i;
        for (size_t k = i; k < w->n_current; k++) {
                last = max_of(last, w->current[k].time);
                write_event(w, true, &w->current[k], last);
                w->previous[w->n_previous++] = w->current[k];
        }
}

/* The sample's frames from the root: process, "(Non-Activities)", "Threads", its thread, its stack,
 * CPU_TIME or UNMANAGED_CODE_TIME; each exported when first seen, with the one before it as its caller. */
static void take_sample(Writer *w, const CpuThread *t, const CpuSample *s) {
        CpuProfile *p = w->profile;
        uint32_t caller = NO_FRAME;
        size_t n = 0;

        w->path[n++] = cpu_profile_pseudo_frame(p, CPU_FRAME_PROCESS);
        w->path[n++] = cpu_profile_pseudo_frame(p, CPU_FRAME_NON_ACTIVITIES);
        w->path[n++] = cpu_profile_pseudo_frame(p, CPU_FRAME_THREADS);
        w->path[n++] = t->frame;
        n += cpu_profile_stack(p, s->node, w->path + n);
        w->path[n++] = cpu_profile_pseudo_frame(p, s->kind == CPU_SAMPLE_CPU ? CPU_FRAME_CPU_TIME : CPU_FRAME_UNMANAGED);
        w->n_current = 0;
        for (size_t depth = 0; depth < n; depth++) {
                uint32_t id;

                /* TraceEvent passes over frames of no name, their depth counted */
                if (!*cpu_profile_frame_name(p, w->path[depth]))
                        continue;
                (void)export_frame(w, w->path[depth], caller, &id);
                w->current[w->n_current++] = (Open){ .time = s->time_ms, .metric = s->metric_ms, .depth = (int)depth,
                                                     .frame = id };
                caller = id;
        }
        handle_sample(w);
}

static int write_thread(Writer *w, size_t i) {
        _cleanup_(cpu_sample_reader_freep) CpuSampleReader *r = NULL;
        const CpuThread *t = cpu_profile_thread(w->profile, i);
        const char *name = cpu_profile_frame_name(w->profile, t->frame);
        CpuSample s;
        double last;
        int k;

        k = cpu_profile_samples_open(w->profile, i, &r);
        if (k < 0)
                return k;
        w->n_previous = 0;
        w->any_event = false;
        w->tid = id_in_name(name);
        if (w->format == PROFILE_TIMELINE_SPEEDSCOPE) {
                fprintf(w->out, "%s{\"type\":\"evented\",\"name\":", i > 0 ? "," : "");
                json_text(w->out, name);
                fputs(",\"unit\":\"milliseconds\",\"startValue\":", w->out);
                /* the first event opens the first sample's frames at its time */
                json_double(w->out, t->first_ms > 0 ? t->first_ms : 0.0);
                fputs(",\"events\":[", w->out);
        }
        while ((k = cpu_sample_reader_next(r, &s)) > 0)
                take_sample(w, t, &s);
        if (k < 0)
                return k;
        /* the frames still open close at the end of their last sample */
        last = w->any_event ? w->last_time : 0.0;
        for (size_t j = w->n_previous; j > 0; j--) {
                const Open *o = &w->previous[j - 1];
                last = max_of(last, o->time + o->metric);
                write_event(w, false, o, last);
        }
        if (w->format == PROFILE_TIMELINE_SPEEDSCOPE) {
                fputs("],\"endValue\":", w->out);
                json_double(w->out, w->last_time);
                fputc('}', w->out);
        }
        return 0;
}

static void write_speedscope_frames(Writer *w) {
        fputs("],\"shared\":{\"frames\":[", w->out);
        for (size_t i = 0; i < w->n_exported; i++) {
                fputs(i > 0 ? ",{\"name\":" : "{\"name\":", w->out);
                json_text(w->out, cpu_profile_frame_name(w->profile, w->exported[i].frame));
                fputc('}', w->out);
        }
        fputs("]}}\n", w->out);
}

static void write_chromium_frames(Writer *w) {
        fputs("],\"displayTimeUnit\":\"ms\",\"stackFrames\":{", w->out);
        for (size_t i = 0; i < w->n_exported; i++) {
                const char *name = cpu_profile_frame_name(w->profile, w->exported[i].frame), *method = short_name(name);

                fprintf(w->out, "%s\"%zu\":{\"name\":", i > 0 ? "," : "", i);
                json_text(w->out, method);
                fputs(",\"category\":", w->out);
                text_json_string_html(w->out, name, method == name ? 0 : (size_t)(method - 1 - name));
                if (w->exported[i].parent != NO_FRAME)
                        fprintf(w->out, ",\"parent\":%" PRIu32, w->exported[i].parent);
                fputc('}', w->out);
        }
        fputs("}}\n", w->out);
}

int profile_timeline_write(CpuProfile *p, ProfileTimelineFormat format, const char *name, const char *exporter,
                           FILE *out) {
        size_t n_frames = cpu_profile_frames(p);
        Writer *w = calloc(1, sizeof(Writer));
        int r = 0;

        if (!w)
                return -ENOMEM;
        *w = (Writer){ .profile = p, .format = format, .out = out, .first_of_all = true };
        w->exported_of = malloc((n_frames + 1) * sizeof(uint32_t));
        w->exported = malloc((n_frames + 1) * sizeof(Exported));
        if (!w->exported_of || !w->exported) {
                r = -ENOMEM;
                goto done;
        }
        memset(w->exported_of, 0xff, (n_frames + 1) * sizeof(uint32_t));
        if (format == PROFILE_TIMELINE_SPEEDSCOPE) {
                fputs("{\"exporter\":", out);
                json_text(out, exporter);
                fputs(",\"name\":", out);
                json_text(out, name);
                fputs(",\"activeProfileIndex\":0,\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
                      "\"profiles\":[", out);
        } else {
                fputs("{\"otherData\":{\"name\":", out);
                json_text(out, name);
                fputs(",\"exporter\":", out);
                json_text(out, exporter);
                fputs("},\"traceEvents\":[", out);
        }
        for (size_t i = 0; r == 0 && i < cpu_profile_threads(p); i++)
                r = write_thread(w, i);
        if (r == 0 && format == PROFILE_TIMELINE_SPEEDSCOPE)
                write_speedscope_frames(w);
        else if (r == 0)
                write_chromium_frames(w);
        if (r == 0 && (fflush(out) != 0 || ferror(out)))
                r = -EIO;
done:
        free(w->exported_of);
        free(w->exported);
        free(w);
        return r;
}
