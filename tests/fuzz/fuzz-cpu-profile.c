/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes what dsctl trace --format, convert and flame make of a trace (eventpipe/cpu-profile.h and its
 * writers): the nettrace stream of the target, whose sample profiler events, stacks, method, module and
 * process events the profile is built from, then each of its files: speedscope and Chromium (from the
 * spool, in memory here), pprof and the flame graph.
 *
 * Input: the stream (as fuzz-nettrace's, without its chunking byte).
 * Invariants: cpu_profile_event() and cpu_profile_finish() return 0 or -ENOMEM; every writer succeeds;
 * the JSON files are valid UTF-8 with no control byte but their last newline, and no '<', '>' or '&'
 * (nothing a name holds can end a <script> element around them); the SVG is valid UTF-8 and every '<'
 * outside its one CDATA section opens or closes one of the elements the writer makes (no name opens one);
 * the pprof file is gzip whose content is well-formed protobuf, its string table valid UTF-8; no read past
 * a payload or a spool chunk (ASan).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "eventpipe/cpu-profile.h"
#include "eventpipe/flame-svg.h"
#include "tests/fuzz/fuzz.h"
#include "eventpipe/nettrace.h"
#include "eventpipe/profile-pprof.h"
#include "eventpipe/profile-timeline.h"
#include "common/text.h"

typedef struct Spool {
        uint8_t *data;
        size_t size;
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
        return 0;
}

static int spool_read(void *userdata, uint64_t offset, void *data, size_t size) {
        Spool *s = userdata;

        fuzz_assert(offset + size <= s->size); /* the profile reads only what it wrote */
        memcpy(data, s->data + offset, size);
        return 0;
}

static int on_header(const NettraceHeader *h, void *userdata) {
        cpu_profile_header(userdata, h);
        return 0;
}

static int on_event(const NettraceEvent *e, void *userdata) {
        int r = cpu_profile_event(userdata, e);

        fuzz_assert(r == 0 || r == -ENOMEM);
        return 0;
}

static void check_json(const char *s, size_t n) {
        fuzz_assert(n > 0 && s[n - 1] == '\n' && utf8_is_valid(s, n));
        for (size_t i = 0; i + 1 < n; i++)
                fuzz_assert((uint8_t)s[i] >= 0x20 && s[i] != '<' && s[i] != '>' && s[i] != '&');
}

static void check_svg(const char *s, size_t n) {
        static const char *const elements[] = { "?xml", "svg", "style", "rect", "text", "g", "title", "script" };
        const char *cdata = strstr(s, "<![CDATA["), *end = cdata ? strstr(cdata, "]]>") : NULL;

        fuzz_assert(utf8_is_valid(s, n) && cdata && end && !strstr(end + 3, "]]>") && !strstr(end + 3, "<![CDATA["));
        for (const char *p = s; (p = strchr(p, '<')); p++) {
                size_t k = 1 + (p[1] == '/'), len = strcspn(p + k, " >/\n");
                bool known = false;

                if (p == cdata) {
                        p = end;
                        continue;
                }
                for (size_t i = 0; i < sizeof(elements) / sizeof(elements[0]); i++)
                        known = known || (len == strlen(elements[i]) && strncmp(p + k, elements[i], len) == 0);
                fuzz_assert(known);
        }
}

/* A protobuf message, every field read to its end; the string table's entries (field 6 of the Profile) UTF-8. */
static void check_proto(const uint8_t *p, size_t n, bool profile) {
        size_t at = 0;

        while (at < n) {
                uint64_t key, v;
                size_t used;

                fuzz_assert(nettrace_varint_decode(p + at, n - at, 64, &key, &used) == 0);
                at += used;
                fuzz_assert((key & 7) == 0 || (key & 7) == 2);
                fuzz_assert(nettrace_varint_decode(p + at, n - at, 64, &v, &used) == 0);
                at += used;
                if ((key & 7) == 2) {
                        fuzz_assert(v <= n - at);
                        if (profile && key >> 3 == 6)
                                fuzz_assert(utf8_is_valid((const char *)p + at, v));
                        at += v;
                }
        }
}

static void check_pprof(const char *gz, size_t n) {
        z_stream z = {};
        uint8_t *plain = NULL;
        size_t cap = 0;
        int r;

        fuzz_assert(n > 2 && (uint8_t)gz[0] == 0x1f && (uint8_t)gz[1] == 0x8b);
        fuzz_assert(inflateInit2(&z, 15 + 16) == Z_OK);
        z.next_in = (Bytef *)gz;
        z.avail_in = (uInt)n;
        do {
                uint8_t *grown = realloc(plain, cap + 65536);

                fuzz_assert(grown);
                plain = grown;
                z.next_out = plain + cap;
                z.avail_out = 65536;
                cap += 65536;
                r = inflate(&z, Z_NO_FLUSH);
                fuzz_assert(r == Z_OK || r == Z_STREAM_END);
        } while (r != Z_STREAM_END);
        check_proto(plain, z.total_out, true);
        inflateEnd(&z);
        free(plain);
}

typedef int (*Writer)(CpuProfile *p, FILE *f);

static int write_speedscope(CpuProfile *p, FILE *f) {
        return profile_timeline_write(p, PROFILE_TIMELINE_SPEEDSCOPE, "fuzz", "dsctl fuzz", f);
}

static int write_chromium(CpuProfile *p, FILE *f) {
        return profile_timeline_write(p, PROFILE_TIMELINE_CHROMIUM, "fuzz", "dsctl fuzz", f);
}

static int write_pprof(CpuProfile *p, FILE *f) {
        return profile_pprof_write(p, f);
}

static int write_flame(CpuProfile *p, FILE *f) {
        return flame_svg_write(p, &(FlameOptions){}, f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const Writer writers[] = { write_speedscope, write_chromium, write_pprof, write_flame };
        Spool spool = {};
        CpuProfile *p = NULL;
        NettraceParser *parser = NULL;

        if (cpu_profile_new(&p) < 0)
                return 0;
        cpu_profile_set_seed(p, 0x5eed);
        cpu_profile_set_spool(p, &(CpuProfileSpool){ .write = spool_write, .read = spool_read, .userdata = &spool });
        if (nettrace_parser_new(&(NettraceCallbacks){ .header = on_header, .event = on_event, .stacks = true }, p,
                                &parser) < 0) {
                cpu_profile_free(p);
                return 0;
        }
        (void)nettrace_feed(parser, data, size);
        (void)nettrace_finish(parser);
        nettrace_parser_free(parser);
        if (cpu_profile_finish(p) == 0)
                for (size_t i = 0; i < sizeof(writers) / sizeof(writers[0]); i++) {
                        char *out = NULL;
                        size_t n = 0;
                        FILE *f = open_memstream(&out, &n);
                        int r;

                        if (!f)
                                continue;
                        r = writers[i](p, f);
                        fuzz_assert(fclose(f) == 0);
                        fuzz_assert(r == 0 || r == -ENOMEM);
                        if (r == 0 && i < 2)
                                check_json(out, n);
                        else if (r == 0 && i == 2)
                                check_pprof(out, n);
                        else if (r == 0)
                                check_svg(out, n);
                        free(out);
                }
        cpu_profile_free(p);
        free(spool.data);
        return 0;
}
