/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The CPU profile (eventpipe/cpu-profile.h) and its writers, on events made here: TraceEvent's thread time
 * computer, which event names an address, module and process names as TraceLog makes them, the spool, the
 * limits; the time line as speedscope writes it, pprof's values, and the flame graph's frames and escaping.
 * (test_flame.py checks the same against the stock dotnet-trace and real runtimes.)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "eventpipe/cpu-profile.h"
#include "eventpipe/flame-svg.h"
#include "eventpipe/profile-pprof.h"
#include "eventpipe/profile-timeline.h"
#include "tests/unit/tap.h"
#include "common/text.h"

static const NettraceMetadata sampler = { .id = 1, .provider = (char *)"Microsoft-DotNETCore-SampleProfiler",
                                          .event_id = 0, .event_name = (char *)"ThreadSample" };
static const NettraceMetadata dc_end = { .id = 2, .provider = (char *)"Microsoft-Windows-DotNETRuntimeRundown",
                                         .event_id = 144, .event_name = (char *)"MethodDCEndVerbose", .version = 1 };
static const NettraceMetadata module_dc_end = { .id = 3, .provider = (char *)"Microsoft-Windows-DotNETRuntimeRundown",
                                                .event_id = 154, .event_name = (char *)"ModuleDCEnd" };
static const NettraceMetadata process_info = { .id = 4, .provider = (char *)"Microsoft-DotNETCore-EventPipe",
                                               .event_id = 1, .event_name = (char *)"ProcessInfo" };

/* 1000 ticks a second: a tick is a millisecond */
static const NettraceHeader header = { .version = 4, .sync_time = { 2026, 11, 0, 29, 8, 20, 0, 0 }, .sync_qpc = 1000,
                                       .qpc_frequency = 1000, .pointer_size = 8, .pid = 4242, .sampling_rate_ns = 1000000 };

typedef struct Bytes {
        uint8_t data[4096];
        size_t n;
} Bytes;

static void put(Bytes *b, const void *p, size_t n) {
        memcpy(b->data + b->n, p, n);
        b->n += n;
}

static void put_u16(Bytes *b, uint16_t v) {
        put(b, &v, 2);
}

static void put_u32(Bytes *b, uint32_t v) {
        put(b, &v, 4);
}

static void put_u64(Bytes *b, uint64_t v) {
        put(b, &v, 8);
}

/* ASCII as UTF-16LE, terminated */
static void put_string(Bytes *b, const char *s) {
        for (; *s; s++)
                put_u16(b, (uint8_t)*s);
        put_u16(b, 0);
}

static int sample(CpuProfile *p, uint64_t thread, uint64_t ms, bool managed, const uint64_t *stack, size_t depth) {
        uint32_t type = managed ? 2 : 1;
        NettraceEvent e = { .metadata = &sampler, .thread_id = thread, .timestamp = header.sync_qpc + ms,
                            .stack = stack, .stack_depth = depth, .payload = (const uint8_t *)&type, .payload_size = 4 };

        return cpu_profile_event(p, &e);
}

static int method(CpuProfile *p, uint64_t start, uint32_t size, uint64_t module, const char *ns, const char *name) {
        Bytes b = {};
        NettraceEvent e = { .metadata = &dc_end };

        put_u64(&b, start);  /* MethodID */
        put_u64(&b, module);
        put_u64(&b, start);
        put_u32(&b, size);
        put_u32(&b, 0x06000001);
        put_u32(&b, 0);
        put_string(&b, ns);
        put_string(&b, name);
        put_string(&b, "void  (int32)");
        e.payload = b.data;
        e.payload_size = b.n;
        return cpu_profile_event(p, &e);
}

static int module(CpuProfile *p, uint64_t id, const char *path) {
        Bytes b = {};
        NettraceEvent e = { .metadata = &module_dc_end };

        put_u64(&b, id);
        put_u64(&b, 1);
        put_u32(&b, 0);
        put_u32(&b, 0);
        put_string(&b, path);
        e.payload = b.data;
        e.payload_size = b.n;
        return cpu_profile_event(p, &e);
}

static int command_line(CpuProfile *p, const char *line) {
        Bytes b = {};
        NettraceEvent e = { .metadata = &process_info };

        put_string(&b, line);
        put_string(&b, "Linux");
        put_string(&b, "x64");
        e.payload = b.data;
        e.payload_size = b.n;
        return cpu_profile_event(p, &e);
}

static CpuProfile *profile_new(void) {
        CpuProfile *p = NULL;

        check(cpu_profile_new(&p) == 0 && p);
        cpu_profile_set_seed(p, 42);
        cpu_profile_header(p, &header);
        return p;
}

/* The frame names of @node, root first, joined by ';'. */
static char *stack_text(const CpuProfile *p, uint32_t node) {
        static uint32_t frames[CPU_PROFILE_DEPTH_MAX];
        size_t n = cpu_profile_stack(p, node, frames), size = 0;
        char *out = NULL;
        FILE *f = open_memstream(&out, &size);

        for (size_t i = 0; f && i < n; i++)
                fprintf(f, "%s%s", i > 0 ? ";" : "", cpu_profile_frame_name(p, frames[i]));
        if (f)
                fclose(f);
        return out;
}

static const CpuTotal *total_of(const CpuProfile *p, const char *stack) {
        for (size_t i = 0; i < cpu_profile_totals(p); i++) {
                char *text = stack_text(p, cpu_profile_total(p, i)->node);
                bool same = text && strcmp(text, stack) == 0;

                free(text);
                if (same)
                        return cpu_profile_total(p, i);
        }
        return NULL;
}

/* SampleProfilerThreadTimeComputer: each sample weighs the time to the thread's next one of its kind, the
 * last of each weighs nothing; External samples are UNMANAGED_CODE_TIME. */
static void test_thread_time(void) {
        CpuProfile *p = profile_new();
        const uint64_t a[] = { 0x1010 }, b[] = { 0x2010, 0x1010 };
        const CpuTotal *t;

        check(sample(p, 5, 1, true, a, 1) == 0);   /* CPU a, 1..2 */
        check(sample(p, 5, 2, true, a, 1) == 0);   /* CPU a, 2..5 (until it blocks) */
        check(sample(p, 5, 5, false, b, 2) == 0);  /* blocked in b, 5..6 */
        check(sample(p, 5, 6, false, b, 2) == 0);  /* blocked in b, 6..10 (until it runs) */
        check(sample(p, 5, 10, true, a, 1) == 0);  /* CPU a: its thread's last CPU sample, weightless */
        check(sample(p, 9, 3, true, a, 1) == 0);   /* another thread's only sample: weightless */
        check(method(p, 0x1000, 0x100, 7, "N", "Outer") == 0);
        check(method(p, 0x2000, 0x100, 7, "N", "Inner") == 0);
        check(module(p, 7, "/app/App.dll") == 0); /* after its methods, as a rundown sends it: its case kept */
        check(cpu_profile_finish(p) == 0);
        check(cpu_profile_thread_samples(p) == 6 && cpu_profile_left_out(p) == 0);
        t = total_of(p, "App!N.Outer(int32)");
        check(t && t->samples[CPU_SAMPLE_CPU] == 2 && t->ms[CPU_SAMPLE_CPU] == 4.0 && t->samples[CPU_SAMPLE_WAIT] == 0);
        t = total_of(p, "App!N.Outer(int32);App!N.Inner(int32)");
        check(t && t->samples[CPU_SAMPLE_WAIT] == 2 && t->ms[CPU_SAMPLE_WAIT] == 5.0);
        check(cpu_profile_threads(p) == 1 && cpu_profile_thread(p, 0)->id == 5);
        check(strcmp(cpu_profile_frame_name(p, cpu_profile_thread(p, 0)->frame), "Thread (5)") == 0);
        check(cpu_profile_thread(p, 0)->first_ms == 1.0 && cpu_profile_duration_ms(p) == 10.0);
        cpu_profile_free(p);

        /* a first sample taken at the clock sync itself weighs nothing: TraceEvent takes 0 for "none yet" */
        p = profile_new();
        check(sample(p, 5, 0, true, a, 1) == 0 && sample(p, 5, 4, true, a, 1) == 0 && sample(p, 5, 5, true, a, 1) == 0);
        check(cpu_profile_finish(p) == 0);
        check(cpu_profile_totals(p) == 1 && cpu_profile_total(p, 0)->samples[CPU_SAMPLE_CPU] == 1);
        check(cpu_profile_total(p, 0)->ms[CPU_SAMPLE_CPU] == 1.0);
        cpu_profile_free(p);
}

/* TraceLog names an address by the first unload or rundown event after it was first seen whose code holds it. */
static void test_names_of_addresses(void) {
        CpuProfile *p = profile_new();
        const uint64_t early[] = { 0x1010 }, end[] = { 0x1100 }, late[] = { 0x3010 }, twice[] = { 0x2010 };
        const char *const stacks[] = { "ManagedModule!N.Early(int32)", "?!?", "?!?", "ManagedModule!N.First(int32)" };

        check(sample(p, 1, 1, true, early, 1) == 0);
        check(sample(p, 1, 2, true, end, 1) == 0);       /* just past Early's code: no frame of it */
        check(sample(p, 1, 3, true, twice, 1) == 0);
        check(method(p, 0x1000, 0x100, 7, "N", "Early") == 0);
        check(method(p, 0x2000, 0x100, 7, "N", "First") == 0);
        check(method(p, 0x2000, 0x100, 7, "N", "Second") == 0); /* the same code again: the first names it */
        check(method(p, 0x3000, 0x100, 7, "N", "Late") == 0);
        check(sample(p, 1, 4, true, late, 1) == 0);      /* seen after Late's event: never named */
        check(sample(p, 1, 5, true, late, 1) == 0);
        check(cpu_profile_finish(p) == 0);
        for (size_t i = 0; i < 4; i++)
                check(total_of(p, stacks[i]));
        check(!total_of(p, "ManagedModule!N.Late(int32)") && !total_of(p, "ManagedModule!N.Second(int32)"));
        cpu_profile_free(p);
}

/* A module's name keeps its case only when a method made its module file first; .dll and .exe go. */
static void test_module_names(void) {
        const uint64_t a[] = { 0x1010 }, b[] = { 0x2010 };
        CpuProfile *p = profile_new();

        check(module(p, 1, "/usr/lib/dotnet/System.Private.CoreLib.DLL") == 0);
        check(sample(p, 1, 1, true, a, 1) == 0 && sample(p, 1, 2, true, b, 1) == 0 && sample(p, 1, 3, true, a, 1) == 0);
        check(method(p, 0x1000, 0x100, 1, "System", "Early") == 0);
        check(method(p, 0x2000, 0x100, 2, "", "NoType") == 0);
        check(module(p, 2, "C:\\\\app\\\\My.App.exe") == 0);
        check(cpu_profile_finish(p) == 0);
        check(total_of(p, "system.private.corelib!System.Early(int32)"));
        check(total_of(p, "My.App!.NoType(int32)"));
        cpu_profile_free(p);
}

static char *process_frame(const char *line) {
        CpuProfile *p = profile_new();
        char *frame;

        if (line)
                check(command_line(p, line) == 0);
        check(cpu_profile_finish(p) == 0);
        frame = strdup(cpu_profile_frame_name(p, cpu_profile_pseudo_frame(p, CPU_FRAME_PROCESS)));
        cpu_profile_free(p);
        return frame;
}

/* TraceProcess's name and TraceEventStackSource's process frame */
static void test_process_frame(void) {
        static const char *const cases[][2] = {
                { "/usr/bin/app /usr/bin/app.dll --x", "Process64 app (4242) Args: /usr/bin/app.dll --x" },
                /* the image ends at the first space, quotes or not; the arguments after the closing quote */
                { "\"/opt/my app/App.exe\" -v", "Process64 my (4242) Args:  -v" },
                { "\"/opt/App.exe\" -v", "Process64 App (4242) Args:  -v" },
                { "/opt/run", "Process64 run (4242) Args: /opt/run" },
                { NULL, "Process64 Process(4242) (4242) Args: " },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *frame = process_frame(cases[i][0]);

                check(frame && strcmp(frame, cases[i][1]) == 0);
                if (frame && strcmp(frame, cases[i][1]) != 0)
                        printf("# got '%s'\n", frame);
                free(frame);
        }
}

/* An in-memory spool */
typedef struct Spool {
        uint8_t *data;
        size_t size;
        unsigned writes;
} Spool;

static int spool_write(void *userdata, uint64_t offset, const void *data, size_t size) {
        Spool *s = userdata;

        if (offset + size > s->size) {
                uint8_t *grown = realloc(s->data, offset + size);
                if (!grown)
                        return -ENOMEM;
                memset(grown + s->size, 0, offset + size - s->size);
                s->data = grown;
                s->size = offset + size;
        }
        memcpy(s->data + offset, data, size);
        s->writes++;
        return 0;
}

static int spool_read(void *userdata, uint64_t offset, void *data, size_t size) {
        Spool *s = userdata;

        if (offset + size > s->size)
                return -EBADMSG;
        memcpy(data, s->data + offset, size);
        return 0;
}

static char *written(int (*write)(CpuProfile *, FILE *), CpuProfile *p) {
        char *out = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&out, &size);

        check(f && write(p, f) == 0);
        if (f)
                fclose(f);
        return out;
}

static int write_speedscope(CpuProfile *p, FILE *f) {
        return profile_timeline_write(p, PROFILE_TIMELINE_SPEEDSCOPE, "t", "dsctl test", f);
}

/* Samples spooled in chunks of a thread each, many threads interleaved, come back in order; the time line
 * continues a frame over samples of the same stack and closes it at the end of the last. */
static void test_spool_and_time_line(void) {
        const uint64_t a[] = { 0x1010 };
        Spool spool = {};
        CpuProfile *p = profile_new();
        CpuSampleReader *r = NULL;
        CpuSample s;
        char *json;
        size_t n = 0;
        int k;

        cpu_profile_set_spool(p, &(CpuProfileSpool){ .write = spool_write, .read = spool_read, .userdata = &spool });
        /* 3 threads, 2000 samples each: many chunks each, interleaved in the spool */
        for (uint64_t ms = 1; ms <= 2000; ms++)
                for (uint64_t t = 1; t <= 3; t++)
                        check(sample(p, t, ms * 3 + t, true, a, 1) == 0);
        check(method(p, 0x1000, 0x100, 7, "N", "M") == 0);
        check(cpu_profile_finish(p) == 0);
        check(spool.writes > 3 * 2 && cpu_profile_threads(p) == 3);
        check(cpu_profile_samples_open(p, 1, &r) == 0);
        while ((k = cpu_sample_reader_next(r, &s)) > 0) {
                check(s.kind == CPU_SAMPLE_CPU && s.metric_ms == 3.0f && s.time_ms == (double)((n + 1) * 3 + 2));
                n++;
        }
        check(k == 0 && n == 1999);
        cpu_sample_reader_free(r);
        cpu_profile_free(p);
        free(spool.data);

        /* one thread, two samples of one stack: each frame opened at 1 and closed at 3 (1 + 1 + 1) */
        spool = (Spool){};
        p = profile_new();
        cpu_profile_set_spool(p, &(CpuProfileSpool){ .write = spool_write, .read = spool_read, .userdata = &spool });
        check(sample(p, 8, 1, true, a, 1) == 0 && sample(p, 8, 2, true, a, 1) == 0 && sample(p, 8, 3, true, a, 1) == 0);
        check(method(p, 0x1000, 0x100, 7, "N", "M") == 0);
        check(cpu_profile_finish(p) == 0);
        json = written(write_speedscope, p);
        check(json && strstr(json, "\"profiles\":[{\"type\":\"evented\",\"name\":\"Thread (8)\",\"unit\":\"milliseconds\","
                                   "\"startValue\":1,\"events\":[{\"type\":\"O\",\"frame\":0,\"at\":1},"));
        check(json && strstr(json, "{\"type\":\"O\",\"frame\":5,\"at\":1},{\"type\":\"C\",\"frame\":5,\"at\":3}"));
        check(json && strstr(json, "{\"type\":\"C\",\"frame\":0,\"at\":3}],\"endValue\":3}]"));
        check(json && strstr(json, "\"shared\":{\"frames\":[{\"name\":\"Process64 Process(4242) (4242) Args: \"},"
                                   "{\"name\":\"(Non-Activities)\"},{\"name\":\"Threads\"},{\"name\":\"Thread (8)\"},"
                                   "{\"name\":\"ManagedModule!N.M(int32)\"},{\"name\":\"CPU_TIME\"}]}}"));
        free(json);
        cpu_profile_free(p);
        free(spool.data);
}

/* Past the limits, samples are left out and counted; a deep stack keeps its outermost frames. */
static void test_limits(void) {
        static uint64_t deep[CPU_PROFILE_DEPTH_MAX + 10];
        static uint32_t frames[CPU_PROFILE_DEPTH_MAX];
        CpuProfile *p = profile_new();

        for (uint64_t t = 0; t < CPU_PROFILE_THREADS_MAX + 5; t++)
                check(sample(p, 1000 + t, 1, true, deep, 0) == 0);
        check(cpu_profile_left_out(p) == 5);
        for (size_t i = 0; i < ELEMENTSOF(deep); i++)
                deep[i] = 0x10000 + i; /* innermost first: the last is the root */
        check(sample(p, 1000, 2, true, deep, ELEMENTSOF(deep)) == 0 && sample(p, 1000, 3, true, deep, 1) == 0);
        check(cpu_profile_finish(p) == 0);
        /* thread 1000's empty stack at 1, and the deep one at 2 */
        check(cpu_profile_totals(p) == 2);
        for (size_t i = 0; i < cpu_profile_totals(p); i++)
                if (cpu_profile_total(p, i)->node != 0)
                        check(cpu_profile_stack(p, cpu_profile_total(p, i)->node, frames) == CPU_PROFILE_DEPTH_MAX);
        cpu_profile_free(p);
}

/* pprof: gzip, and inside, the names and the values (nanoseconds of CPU_TIME; of both kinds) */
static void test_pprof(void) {
        const uint64_t a[] = { 0x1010 };
        CpuProfile *p = profile_new();
        unsigned char plain[65536];
        uLongf n = sizeof(plain);
        z_stream z = {};
        char *gz = NULL;
        size_t size = 0;
        FILE *f;

        check(sample(p, 3, 1, true, a, 1) == 0 && sample(p, 3, 4, false, a, 1) == 0 && sample(p, 3, 6, true, a, 1) == 0);
        check(method(p, 0x1000, 0x100, 7, "N", "Hot<T>") == 0);
        check(module(p, 7, "/a/App.dll") == 0);
        check(cpu_profile_finish(p) == 0);
        f = open_memstream(&gz, &size);
        check(f && profile_pprof_write(p, f) == 0);
        fclose(f);
        check(size > 18 && (uint8_t)gz[0] == 0x1f && (uint8_t)gz[1] == 0x8b);
        check(inflateInit2(&z, 15 + 32) == Z_OK);
        z.next_in = (Bytef *)gz;
        z.avail_in = (uInt)size;
        z.next_out = plain;
        z.avail_out = (uInt)n;
        check(inflate(&z, Z_FINISH) == Z_STREAM_END);
        n = z.total_out;
        inflateEnd(&z);
        check(memmem(plain, n, "App!N.Hot<T>(int32)", 19) && memmem(plain, n, "\x32\x03" "cpu", 5));
        /* the sample: one location; values 2 samples, 3 ms = 3000000 ns of CPU, 5 ms of wall time (varints) */
        check(memmem(plain, n, "\x12\x09\x02\xc0\x8d\xb7\x01\xc0\x96\xb1\x02", 11));
        free(gz);
        cpu_profile_free(p);
}

static int write_flame(CpuProfile *p, FILE *f) {
        return flame_svg_write(p, &(FlameOptions){ .title = "t" }, f);
}

/* The flame graph: CPU frames merged over threads, names escaped, the narrowest left out and said so. */
static void test_flame(void) {
        const uint64_t hot[] = { 0x1010, 0x2010 }, cold[] = { 0x3010, 0x2010 };
        CpuProfile *p = profile_new();
        char *svg;

        /* two threads, each sampled every 2 ms: 19999 samples of 2 ms, one of them in Cold */
        for (uint64_t ms = 1; ms <= 20001; ms++)
                check(sample(p, ms % 2, ms, true, ms == 7 ? cold : hot, 2) == 0);
        check(method(p, 0x1000, 0x100, 7, "N", "<script>x</script>\"'&\x01") == 0);
        check(method(p, 0x2000, 0x100, 7, "N", "Main") == 0);
        check(method(p, 0x3000, 0x100, 7, "N", "Cold") == 0);
        check(cpu_profile_finish(p) == 0);
        svg = written(write_flame, p);
        check(svg && strstr(svg, "data-n=\"ManagedModule!N.&lt;script&gt;x&lt;/script&gt;&quot;&#39;&amp;\xef\xbf\xbd(int32)\""));
        check(svg && strstr(svg, "<title>ManagedModule!N.&lt;script&gt;x&lt;/script&gt;&quot;&#39;&amp;\xef\xbf\xbd(int32) ("));
        check(svg && strstr(svg, "data-n=\"ManagedModule!N.Main(int32)\" data-ms=\"39998.000000\" data-s=\"19999\""));
        /* Cold: 2 ms in 39998, 0.06 pixels wide: left out, and said */
        check(svg && !strstr(svg, "N.Cold") && strstr(svg, "data-left-out=\"1\""));
        check(svg && strstr(svg, "1 frames too narrow to draw left out"));
        check(svg && utf8_is_valid(svg, strlen(svg)));
        check(svg && !strstr(svg, "<script>x"));
        free(svg);
        cpu_profile_free(p);
}

int main(void) {
        run_test(test_thread_time);
        run_test(test_names_of_addresses);
        run_test(test_module_names);
        run_test(test_process_frame);
        run_test(test_spool_and_time_line);
        run_test(test_limits);
        run_test(test_pprof);
        run_test(test_flame);
        return tap_finish();
}
