/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A CPU profile as pprof's gzipped profile.proto (profile-pprof.h); pure: writes to the FILE it is given */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/cleanup.h"
#include "eventpipe/hash-map.h"
#include "eventpipe/profile-pprof.h"
#include "eventpipe/varint.h"

/* profile.proto's field numbers */
enum {
        PROFILE_SAMPLE_TYPE = 1,
        PROFILE_SAMPLE = 2,
        PROFILE_MAPPING = 3,
        PROFILE_LOCATION = 4,
        PROFILE_FUNCTION = 5,
        PROFILE_STRING_TABLE = 6,
        PROFILE_TIME_NANOS = 9,
        PROFILE_DURATION_NANOS = 10,
        PROFILE_PERIOD_TYPE = 11,
        PROFILE_PERIOD = 12,
        PROFILE_DEFAULT_SAMPLE_TYPE = 14,
        VALUE_TYPE_TYPE = 1,
        VALUE_TYPE_UNIT = 2,
        SAMPLE_LOCATION_ID = 1,
        SAMPLE_VALUE = 2,
        SAMPLE_LABEL = 3,
        LABEL_KEY = 1,
        LABEL_NUM = 3,
        MAPPING_ID = 1,
        MAPPING_FILENAME = 5,
        MAPPING_HAS_FUNCTIONS = 7,
        LOCATION_ID = 1,
        LOCATION_MAPPING_ID = 2,
        LOCATION_LINE = 4,
        LINE_FUNCTION_ID = 1,
        FUNCTION_ID = 1,
        FUNCTION_NAME = 2,
        FUNCTION_SYSTEM_NAME = 3,
        FUNCTION_FILENAME = 4,
};

#define WIRE_VARINT 0
#define WIRE_BYTES 2

/* The string table: fixed strings, then each frame's name (STRING_FRAMES + frame), then module names. */
enum {
        STRING_EMPTY,
        STRING_SAMPLES,
        STRING_COUNT,
        STRING_CPU,
        STRING_NANOSECONDS,
        STRING_WALL,
        STRING_THREAD,
        STRING_PROCESS,
        STRING_FRAMES,
};

typedef struct Buf {
        uint8_t *data;
        size_t n, cap;
        bool failed;
} Buf;

typedef struct Writer {
        const CpuProfile *profile;
        FILE *out;
        z_stream z;
        bool z_open;
        int error;
        Buf message, packed;
        uint8_t *used;           /* by frame: it stands in a stack */
        uint32_t *module_of;     /* by frame: its module's string, or STRING_EMPTY */
        StrMap modules;
        const char **module_names;
        size_t n_modules;
        uint32_t frames[CPU_PROFILE_DEPTH_MAX];
} Writer;

static void buf_room(Buf *b, size_t n) {
        size_t want = b->cap ? b->cap : 256;
        uint8_t *grown;

        if (b->failed || b->n + n <= b->cap)
                return;
        while (want < b->n + n)
                want *= 2;
        grown = realloc(b->data, want);
        if (!grown) {
                b->failed = true;
                return;
        }
        b->data = grown;
        b->cap = want;
}

static void buf_varint(Buf *b, uint64_t v) {
        buf_room(b, VARINT_MAX_BYTES);
        if (!b->failed)
                b->n += varint_put(b->data + b->n, v);
}

static void buf_bytes(Buf *b, const void *data, size_t n) {
        buf_room(b, n);
        if (!b->failed && n > 0) {
                memcpy(b->data + b->n, data, n);
                b->n += n;
        }
}

static void field_varint(Buf *b, unsigned field, uint64_t v) {
        buf_varint(b, (uint64_t)field << 3 | WIRE_VARINT);
        buf_varint(b, v);
}

static void field_bytes(Buf *b, unsigned field, const void *data, size_t n) {
        buf_varint(b, (uint64_t)field << 3 | WIRE_BYTES);
        buf_varint(b, n);
        buf_bytes(b, data, n);
}

/* Deflates @n bytes into the file; Z_FINISH at the end. */
static void deflate_out(Writer *w, const void *data, size_t n, int flush) {
        uint8_t chunk[16384];
        int r;

        if (w->error != 0)
                return;
        w->z.next_in = (Bytef *)(uintptr_t)data;
        w->z.avail_in = (uInt)n;
        do {
                w->z.next_out = chunk;
                w->z.avail_out = sizeof(chunk);
                r = deflate(&w->z, flush);
                if (r == Z_STREAM_ERROR) {
                        w->error = -EPROTO;
                        return;
                }
                if (fwrite(chunk, 1, sizeof(chunk) - w->z.avail_out, w->out) != sizeof(chunk) - w->z.avail_out) {
                        w->error = -EIO;
                        return;
                }
        } while (w->z.avail_out == 0 || (flush == Z_FINISH && r != Z_STREAM_END));
}

/* The message built in w->message, as field @field of the Profile; the buffer is emptied. */
static void emit_message(Writer *w, unsigned field) {
        uint8_t head[2 * VARINT_MAX_BYTES];
        size_t n = 0;

        if (w->message.failed) {
                w->error = w->error ? w->error : -ENOMEM;
                return;
        }
        n += varint_put(head + n, (uint64_t)field << 3 | WIRE_BYTES);
        n += varint_put(head + n, w->message.n);
        deflate_out(w, head, n, Z_NO_FLUSH);
        deflate_out(w, w->message.data, w->message.n, Z_NO_FLUSH);
        w->message.n = 0;
}

static void emit_varint(Writer *w, unsigned field, uint64_t v) {
        Buf *b = &w->message;

        b->n = 0;
        field_varint(b, field, v);
        if (b->failed) {
                w->error = w->error ? w->error : -ENOMEM;
                return;
        }
        deflate_out(w, b->data, b->n, Z_NO_FLUSH);
        b->n = 0;
}

static void emit_string(Writer *w, const char *s) {
        Buf *b = &w->message;

        b->n = 0;
        field_bytes(b, PROFILE_STRING_TABLE, s, strlen(s));
        if (b->failed) {
                w->error = w->error ? w->error : -ENOMEM;
                return;
        }
        deflate_out(w, b->data, b->n, Z_NO_FLUSH);
        b->n = 0;
}

static void emit_value_type(Writer *w, unsigned field, uint64_t type, uint64_t unit) {
        field_varint(&w->message, VALUE_TYPE_TYPE, type);
        field_varint(&w->message, VALUE_TYPE_UNIT, unit);
        emit_message(w, field);
}

/* Milliseconds as whole nanoseconds, rounded, within int64 (a hostile stream's times are anything). */
static int64_t nanoseconds(double ms) {
        double ns = ms * 1e6;

        if (!(ns == ns))
                return 0;
        if (ns >= 9.2e18)
                return INT64_MAX;
        if (ns <= -9.2e18)
                return INT64_MIN;
        return ns >= 0 ? (int64_t)(ns + 0.5) : -(int64_t)(-ns + 0.5);
}

/* One Sample: the stack's frames innermost first, its three values, its thread. */
static void emit_sample(Writer *w, const CpuTotal *t) {
        const CpuThread *thread = cpu_profile_thread(w->profile, t->thread);
        Buf label = {};
        size_t depth = cpu_profile_stack(w->profile, t->node, w->frames);
        Buf *packed = &w->packed;

        packed->n = 0;
        for (size_t i = depth; i > 0; i--) {
                buf_varint(packed, (uint64_t)w->frames[i - 1] + 1);
                w->used[w->frames[i - 1]] = 1;
        }
        field_bytes(&w->message, SAMPLE_LOCATION_ID, packed->data, packed->n);
        packed->n = 0;
        buf_varint(packed, t->samples[CPU_SAMPLE_CPU] + t->samples[CPU_SAMPLE_WAIT]);
        buf_varint(packed, (uint64_t)nanoseconds(t->ms[CPU_SAMPLE_CPU]));
        buf_varint(packed, (uint64_t)nanoseconds(t->ms[CPU_SAMPLE_CPU] + t->ms[CPU_SAMPLE_WAIT]));
        field_bytes(&w->message, SAMPLE_VALUE, packed->data, packed->n);
        field_varint(&label, LABEL_KEY, STRING_THREAD);
        field_varint(&label, LABEL_NUM, thread->id);
        field_bytes(&w->message, SAMPLE_LABEL, label.data, label.n);
        if (packed->failed || label.failed)
                w->message.failed = true;
        free(label.data);
        emit_message(w, PROFILE_SAMPLE);
}

/* The module of a frame "Module!Method", in the string table after the frames'. */
static int frame_module(Writer *w, uint32_t frame) {
        const char *name = cpu_profile_frame_name(w->profile, frame), *bang = strchr(name, '!');
        _cleanup_free_ char *module = NULL;
        uint32_t i;
        int r;

        if (!bang || bang == name)
                return 0;
        module = strndup(name, (size_t)(bang - name));
        if (!module)
                return -ENOMEM;
        i = strmap_get(&w->modules, module);
        if (i == UINT32_MAX) {
                const char **grown = realloc(w->module_names, (w->n_modules + 1) * sizeof(char *));

                if (!grown)
                        return -ENOMEM;
                w->module_names = grown;
                i = (uint32_t)(STRING_FRAMES + cpu_profile_frames(w->profile) + w->n_modules);
                r = strmap_put(&w->modules, module, i);
                if (r < 0)
                        return r;
                w->module_names[w->n_modules++] = NULL; /* the map's copy, found at the end */
        }
        w->module_of[frame] = i;
        return 0;
}

static void emit_functions(Writer *w) {
        size_t n = cpu_profile_frames(w->profile);

        /* one mapping for all: functions are named, nothing is to be symbolized */
        field_varint(&w->message, MAPPING_ID, 1);
        field_varint(&w->message, MAPPING_FILENAME, STRING_PROCESS);
        field_varint(&w->message, MAPPING_HAS_FUNCTIONS, 1);
        emit_message(w, PROFILE_MAPPING);
        for (size_t f = 0; f < n && w->error == 0; f++) {
                Buf line = {};

                if (!w->used[f])
                        continue;
                if (frame_module(w, (uint32_t)f) < 0) {
                        w->error = -ENOMEM;
                        return;
                }
                field_varint(&line, LINE_FUNCTION_ID, f + 1);
                field_varint(&w->message, LOCATION_ID, f + 1);
                field_varint(&w->message, LOCATION_MAPPING_ID, 1);
                field_bytes(&w->message, LOCATION_LINE, line.data, line.n);
                if (line.failed)
                        w->message.failed = true;
                free(line.data);
                emit_message(w, PROFILE_LOCATION);
                field_varint(&w->message, FUNCTION_ID, f + 1);
                field_varint(&w->message, FUNCTION_NAME, STRING_FRAMES + f);
                field_varint(&w->message, FUNCTION_SYSTEM_NAME, STRING_FRAMES + f);
                field_varint(&w->message, FUNCTION_FILENAME, w->module_of[f]);
                emit_message(w, PROFILE_FUNCTION);
        }
}

static void emit_strings(Writer *w) {
        static const char *const fixed[STRING_FRAMES] = {
                [STRING_EMPTY] = "",           [STRING_SAMPLES] = "samples", [STRING_COUNT] = "count",
                [STRING_CPU] = "cpu",          [STRING_NANOSECONDS] = "nanoseconds",
                [STRING_WALL] = "wall",        [STRING_THREAD] = "thread",
        };
        size_t n = cpu_profile_frames(w->profile);

        for (size_t i = 0; i < STRING_FRAMES; i++)
                emit_string(w, i == STRING_PROCESS ? cpu_profile_process_name(w->profile) : fixed[i]);
        for (size_t f = 0; f < n; f++)
                emit_string(w, cpu_profile_frame_name(w->profile, (uint32_t)f));
        for (size_t i = 0; i < w->modules.cap; i++)
                if (w->modules.keys[i])
                        w->module_names[w->modules.values[i] - STRING_FRAMES - n] = w->modules.keys[i];
        for (size_t i = 0; i < w->n_modules; i++)
                emit_string(w, w->module_names[i]);
}

int profile_pprof_write(const CpuProfile *p, FILE *out) {
        const NettraceHeader *h = cpu_profile_nettrace_header(p);
        size_t n_frames = cpu_profile_frames(p);
        Writer w = { .profile = p, .out = out };
        int r;

        w.used = calloc(n_frames + 1, 1);
        w.module_of = calloc(n_frames + 1, sizeof(uint32_t));
        if (!w.used || !w.module_of) {
                r = -ENOMEM;
                goto done;
        }
        if (deflateInit2(&w.z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16 /* gzip */, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
                r = -ENOMEM;
                goto done;
        }
        w.z_open = true;
        emit_value_type(&w, PROFILE_SAMPLE_TYPE, STRING_SAMPLES, STRING_COUNT);
        emit_value_type(&w, PROFILE_SAMPLE_TYPE, STRING_CPU, STRING_NANOSECONDS);
        emit_value_type(&w, PROFILE_SAMPLE_TYPE, STRING_WALL, STRING_NANOSECONDS);
        emit_value_type(&w, PROFILE_PERIOD_TYPE, STRING_CPU, STRING_NANOSECONDS);
        emit_varint(&w, PROFILE_PERIOD, h->sampling_rate_ns > 0 ? h->sampling_rate_ns : 1000000);
        emit_varint(&w, PROFILE_DEFAULT_SAMPLE_TYPE, STRING_CPU);
        emit_varint(&w, PROFILE_TIME_NANOS, (uint64_t)nettrace_time_nsec(h, (uint64_t)h->sync_qpc));
        emit_varint(&w, PROFILE_DURATION_NANOS, (uint64_t)nanoseconds(cpu_profile_duration_ms(p)));
        for (size_t i = 0; i < cpu_profile_totals(p) && w.error == 0; i++)
                emit_sample(&w, cpu_profile_total(p, i));
        emit_functions(&w);
        emit_strings(&w);
        deflate_out(&w, NULL, 0, Z_FINISH);
        r = w.error;
        if (r == 0 && (fflush(out) != 0 || ferror(out)))
                r = -EIO;
done:
        if (w.z_open)
                deflateEnd(&w.z);
        free(w.message.data);
        free(w.packed.data);
        free(w.used);
        free(w.module_of);
        free(w.module_names);
        strmap_done(&w.modules);
        return r;
}
