/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A nettrace stream into speedscope, Chromium, pprof or a flame graph, for dsctl and the agent's workers (trace-convert.h) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "eventpipe/cpu-profile.h"
#include "eventpipe/flame-svg.h"
#include "eventpipe/profile-pprof.h"
#include "eventpipe/profile-timeline.h"
#include "eventpipe/trace-convert.h"

#define READ_CHUNK (1024 * 1024)
#define OUTPUT_BUFFER (1024 * 1024)

static const char *const format_names[_TRACE_FORMAT_MAX] = {
        [TRACE_FORMAT_NETTRACE] = "nettrace",
        [TRACE_FORMAT_SPEEDSCOPE] = "speedscope",
        [TRACE_FORMAT_CHROMIUM] = "chromium",
        [TRACE_FORMAT_PPROF] = "pprof",
        [TRACE_FORMAT_FLAME] = "flame",
};

static const char *const format_extensions[_TRACE_FORMAT_MAX] = {
        [TRACE_FORMAT_NETTRACE] = ".nettrace",
        [TRACE_FORMAT_SPEEDSCOPE] = ".speedscope.json",
        [TRACE_FORMAT_CHROMIUM] = ".chromium.json",
        [TRACE_FORMAT_PPROF] = ".pb.gz",
        [TRACE_FORMAT_FLAME] = ".svg",
};

TraceFormat trace_format_from_string(const char *s) {
        for (TraceFormat f = 0; s && f < _TRACE_FORMAT_MAX; f++)
                if (strcmp(s, format_names[f]) == 0)
                        return f;
        return _TRACE_FORMAT_INVALID;
}

const char *trace_format_to_string(TraceFormat f) {
        return f >= 0 && f < _TRACE_FORMAT_MAX ? format_names[f] : NULL;
}

const char *trace_format_extension(TraceFormat f) {
        return f >= 0 && f < _TRACE_FORMAT_MAX ? format_extensions[f] : NULL;
}

struct TraceConverter {
        TraceFormat format;
        CpuProfile *profile;
        int spool_fd;
};

static int spool_write(void *userdata, uint64_t offset, const void *data, size_t size) {
        int fd = *(int *)userdata;

        while (size > 0) {
                ssize_t n = pwrite(fd, data, size, (off_t)offset);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                data = (const uint8_t *)data + n;
                size -= (size_t)n;
                offset += (uint64_t)n;
        }
        return 0;
}

static int spool_read(void *userdata, uint64_t offset, void *data, size_t size) {
        int fd = *(int *)userdata;

        while (size > 0) {
                ssize_t n = pread(fd, data, size, (off_t)offset);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EBADMSG;
                data = (uint8_t *)data + n;
                size -= (size_t)n;
                offset += (uint64_t)n;
        }
        return 0;
}

/* An unnamed file of the caller's own in $TMPDIR (else /tmp); a named one, removed at once, where the file
 * system has no O_TMPFILE. */
static int spool_open(void) {
        _cleanup_free_ char *template = NULL;
        const char *dir = getenv("TMPDIR");
        int fd;

        if (!dir || !*dir)
                dir = "/tmp";
        fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd >= 0)
                return fd;
        if (errno != EOPNOTSUPP && errno != EISDIR)
                return -errno;
        if (asprintf(&template, "%s/dsctl-spool-XXXXXX", dir) < 0)
                return -ENOMEM;
        fd = mkostemp(template, O_CLOEXEC);
        if (fd < 0)
                return -errno;
        (void)unlink(template);
        return fd;
}

int trace_converter_new(TraceFormat format, TraceConverter **ret) {
        _cleanup_(trace_converter_freep) TraceConverter *c = calloc(1, sizeof(TraceConverter));
        uint64_t seed = 0;
        int r;

        if (!c)
                return -ENOMEM;
        c->format = format;
        c->spool_fd = -EBADF;
        r = cpu_profile_new(&c->profile);
        if (r < 0)
                return r;
        /* the target must not know how its addresses hash; without getrandom() they hash unseeded */
        (void)getrandom(&seed, sizeof(seed), GRND_NONBLOCK);
        cpu_profile_set_seed(c->profile, seed);
        if (format == TRACE_FORMAT_SPEEDSCOPE || format == TRACE_FORMAT_CHROMIUM) {
                c->spool_fd = spool_open();
                if (c->spool_fd < 0)
                        return c->spool_fd;
                cpu_profile_set_spool(c->profile, &(CpuProfileSpool){ .write = spool_write, .read = spool_read,
                                                                       .userdata = &c->spool_fd });
        }
        *ret = TAKE_PTR(c);
        return 0;
}

TraceConverter *trace_converter_free(TraceConverter *c) {
        if (!c)
                return NULL;
        cpu_profile_free(c->profile);
        safe_close(c->spool_fd);
        free(c);
        return NULL;
}

void trace_converter_header(TraceConverter *c, const NettraceHeader *h) {
        cpu_profile_header(c->profile, h);
}

int trace_converter_event(TraceConverter *c, const NettraceEvent *e) {
        return cpu_profile_event(c->profile, e);
}

uint64_t trace_converter_samples(const TraceConverter *c) {
        return cpu_profile_thread_samples(c->profile);
}

uint64_t trace_converter_left_out(const TraceConverter *c) {
        return cpu_profile_left_out(c->profile);
}

/* Path.GetFileNameWithoutExtension() */
static char *document_name(const char *path) {
        const char *base = strrchr(path, '/'), *dot;

        base = base ? base + 1 : path;
        dot = strrchr(base, '.');
        return dot && dot > base ? strndup(base, (size_t)(dot - base)) : strdup(base);
}

int trace_converter_write(TraceConverter *c, const char *path, int fd) {
        _cleanup_free_ char *name = document_name(path);
        _cleanup_fclose_ FILE *f = NULL;
        int copy, r;

        if (!name)
                return -ENOMEM;
        r = cpu_profile_finish(c->profile);
        if (r < 0)
                return r;
        copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (copy < 0)
                return -errno;
        f = fdopen(copy, "w");
        if (!f) {
                safe_close(copy);
                return -ENOMEM;
        }
        (void)setvbuf(f, NULL, _IOFBF, OUTPUT_BUFFER);
        switch (c->format) {
        case TRACE_FORMAT_SPEEDSCOPE:
        case TRACE_FORMAT_CHROMIUM:
                r = profile_timeline_write(c->profile,
                                           c->format == TRACE_FORMAT_SPEEDSCOPE ? PROFILE_TIMELINE_SPEEDSCOPE
                                                                                : PROFILE_TIMELINE_CHROMIUM,
                                           name, "dsctl " DSAGENT_VERSION, f);
                break;
        case TRACE_FORMAT_PPROF:
                r = profile_pprof_write(c->profile, f);
                break;
        case TRACE_FORMAT_FLAME:
                r = flame_svg_write(c->profile, &(FlameOptions){}, f);
                break;
        default:
                return -EINVAL;
        }
        if (r < 0)
                return r;
        r = fflush(f) == 0 && !ferror(f) ? 0 : -errno;
        return r < 0 ? r : 0;
}

typedef struct FileReading {
        TraceConverter *converter;
        bool header;             /* the stream had its header: it is a nettrace stream, whole or not */
} FileReading;

static int on_header(const NettraceHeader *h, void *userdata) {
        FileReading *f = userdata;

        trace_converter_header(f->converter, h);
        f->header = true;
        return 0;
}

static int on_event(const NettraceEvent *e, void *userdata) {
        FileReading *f = userdata;

        return trace_converter_event(f->converter, e);
}

int trace_convert_file(int input_fd, TraceFormat format, const char *path, int output_fd, uint64_t *ret_samples,
                       uint64_t *ret_left_out, bool *ret_converted) {
        _cleanup_(trace_converter_freep) TraceConverter *c = NULL;
        _cleanup_(nettrace_parser_freep) NettraceParser *parser = NULL;
        _cleanup_free_ uint8_t *buf = malloc(READ_CHUNK);
        FileReading reading = {};
        int r, verdict = 0;

        *ret_converted = false;
        if (!buf)
                return -ENOMEM;
        r = trace_converter_new(format, &c);
        if (r < 0)
                return r;
        reading.converter = c;
        r = nettrace_parser_new(&(NettraceCallbacks){ .header = on_header, .event = on_event, .stacks = true },
                                &reading, &parser);
        if (r < 0)
                return r;
        for (;;) {
                ssize_t n = read(input_fd, buf, READ_CHUNK);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                r = nettrace_feed(parser, buf, (size_t)n);
                if (r < 0)
                        return r;
                if (r > 0) {
                        verdict = r;
                        break;
                }
        }
        if (verdict == 0)
                verdict = nettrace_finish(parser);
        if (verdict < 0)
                return verdict;
        if (!reading.header)
                return verdict; /* not converted: no nettrace stream at all */
        r = trace_converter_write(c, path, output_fd);
        if (r < 0)
                return r;
        *ret_samples = trace_converter_samples(c);
        *ret_left_out = trace_converter_left_out(c);
        *ret_converted = true;
        return verdict;
}
