/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A CPU trace's samples, as dotnet-trace convert reads them: pure, no I/O.
 *
 * The sample profiler (Microsoft-DotNETCore-SampleProfiler's ThreadSample) takes every managed
 * thread's stack about every millisecond, as instruction pointers; the runtime's rundown at the
 * end (MethodDCEndVerbose, and MethodUnloadVerbose during the trace) says which method's code
 * holds each one. This module reads a nettrace stream's events once, in order, and keeps what
 * the converters (profile-timeline.c, profile-pprof.c, flame-svg.c) need:
 *
 * - the distinct stacks, in a tree of (caller, instruction pointer) nodes, and the distinct
 *   addresses in them;
 * - each thread's state in TraceEvent's SampleProfilerThreadTimeComputer (which dotnet-trace
 *   convert runs): a sample of a thread in managed code (Type Managed) counts as CPU time
 *   ("CPU_TIME"), any other (External, Error) as time outside managed code
 *   ("UNMANAGED_CODE_TIME"), each weighing the milliseconds until the thread's next sample of
 *   the same kind, so that the last of each thread weighs nothing;
 * - per thread and stack, the samples and milliseconds of each kind (cpu_profile_total());
 * - with a spool (cpu_profile_set_spool()), each thread's weighed samples in order, for the
 *   formats that keep the time line (speedscope, chromium), written to the spool in chunks of
 *   a thread each and read back thread by thread.
 *
 * Memory therefore grows with the distinct stacks, addresses, methods and threads, never with
 * the samples or the trace's size (the spool grows with the samples, on the caller's disk); the
 * limits below bound each, and what is past them is left out and counted
 * (cpu_profile_left_out()).
 *
 * Frames are named as TraceEvent names them for dotnet-trace (TraceLog, TraceEventStackSource):
 * "Module!Namespace.Type.Method(parameters)", the module's file name without ".dll" or ".exe"
 * ("ManagedModule" for a module no event named), "?!?" for an address no method's code holds;
 * an address is named by the first MethodDCEndVerbose or MethodUnloadVerbose, after the
 * address was first seen, whose code range [start, start + size) holds it. Above each stack
 * stand the frames dotnet-trace puts there: "Process64 NAME (PID) Args: ARGS" (from the
 * runtime's ProcessInfo event), "(Non-Activities)", "Threads", "Thread (TID)".
 * What is not replicated: TraceEvent's task and start-stop activities (the TPL provider's
 * events), which no profile dsctl or dotnet-trace uses for CPU sampling enables.
 *
 * Every name is the runtime's: valid UTF-8 with no NUL (utf16le_to_utf8()), otherwise anything.
 * The writers escape them for their formats.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cleanup.h"
#include "eventpipe/nettrace.h"

#define CPU_PROFILE_THREADS_MAX 16384u            /* threads kept; samples of more are left out */
#define CPU_PROFILE_ADDRESSES_MAX (1u << 20)      /* distinct instruction pointers */
#define CPU_PROFILE_NODES_MAX (4u << 20)          /* nodes of the stack tree: distinct (caller, address) */
#define CPU_PROFILE_DEPTH_MAX 1024u               /* frames kept of one stack, from its root; deeper ones cut */
#define CPU_PROFILE_METHODS_MAX (1u << 20)        /* method code ranges kept */
#define CPU_PROFILE_MODULES_MAX 65536u            /* modules kept */
#define CPU_PROFILE_NAME_BYTES_MAX (64u << 20)    /* bytes of method, module and frame names, summed */
#define CPU_PROFILE_TOTALS_MAX (4u << 20)         /* distinct (thread, stack) pairs summed */
#define CPU_PROFILE_SPOOL_CHUNK 1024u             /* bytes of one spool chunk; a thread buffers one */

/* What a weighed sample counts as: the leaf dotnet-trace puts under its stack. */
typedef enum CpuSampleKind {
        CPU_SAMPLE_CPU,   /* "CPU_TIME": the thread ran managed code */
        CPU_SAMPLE_WAIT,  /* "UNMANAGED_CODE_TIME": it waited or ran native code */
        _CPU_SAMPLE_KIND_MAX,
} CpuSampleKind;

/* Frames every profile has, besides the methods': see cpu_profile_pseudo_frame(). */
typedef enum CpuPseudoFrame {
        CPU_FRAME_PROCESS,        /* "Process64 NAME (PID) Args: ARGS" */
        CPU_FRAME_NON_ACTIVITIES, /* "(Non-Activities)" */
        CPU_FRAME_THREADS,        /* "Threads" */
        CPU_FRAME_CPU_TIME,       /* "CPU_TIME" */
        CPU_FRAME_UNMANAGED,      /* "UNMANAGED_CODE_TIME" */
        _CPU_FRAME_PSEUDO_MAX,
} CpuPseudoFrame;

/*
 * Where the time line goes while the stream is read: bytes at offsets the profile chooses, each
 * written once and possibly patched (a chunk's link to the next), read back after
 * cpu_profile_finish(). The caller's: a temporary file (pwrite(), pread()), or memory.
 * Return: 0 or a negative errno.
 */
typedef struct CpuProfileSpool {
        int (*write)(void *userdata, uint64_t offset, const void *data, size_t size);
        int (*read)(void *userdata, uint64_t offset, void *data, size_t size);
        void *userdata;
} CpuProfileSpool;

/* One weighed sample of a thread's time line, as TraceEvent's computer makes it. */
typedef struct CpuSample {
        double time_ms;     /* when the sample was taken: ms since the trace's clock sync */
        float metric_ms;    /* its weight: until the thread's next sample of the same kind */
        uint32_t node;      /* its stack (cpu_profile_stack()) */
        CpuSampleKind kind;
} CpuSample;

/* Samples and milliseconds of one stack of one thread. */
typedef struct CpuTotal {
        uint32_t thread;    /* index, as cpu_profile_thread() takes it */
        uint32_t node;
        uint64_t samples[_CPU_SAMPLE_KIND_MAX];
        double ms[_CPU_SAMPLE_KIND_MAX]; /* the sum of the samples' metric_ms */
} CpuTotal;

typedef struct CpuThread {
        uint64_t id;           /* the runtime's thread id (the OS's) */
        uint32_t frame;        /* its "Thread (TID)" frame */
        uint64_t samples;      /* weighed samples */
        double first_ms;       /* the time of its first weighed sample */
} CpuThread;

typedef struct CpuProfile CpuProfile;
typedef struct CpuSampleReader CpuSampleReader;

int cpu_profile_new(CpuProfile **ret);
CpuProfile *cpu_profile_free(CpuProfile *p);
/* Hash tables' seed: the target must not know it (getrandom()). Before the first event. */
void cpu_profile_set_seed(CpuProfile *p, uint64_t seed);
/* Keep each thread's time line in @spool (copied). Before the first event. */
void cpu_profile_set_spool(CpuProfile *p, const CpuProfileSpool *spool);

void cpu_profile_header(CpuProfile *p, const NettraceHeader *h);
/* Any event of the stream, with its stack (NettraceCallbacks.stacks). Return: 0, or a negative errno
 * (memory, the spool's); what the profile cannot read or keep is left out, not an error. */
int cpu_profile_event(CpuProfile *p, const NettraceEvent *e);
/* The stream has ended: names every frame. Return: 0 or a negative errno. */
int cpu_profile_finish(CpuProfile *p);

/* Samples of the sample profiler left out: past a limit, or not readable. */
uint64_t cpu_profile_left_out(const CpuProfile *p);
/* ThreadSample events read. */
uint64_t cpu_profile_thread_samples(const CpuProfile *p);

/* ---- after cpu_profile_finish() ---- */

size_t cpu_profile_frames(const CpuProfile *p);
const char *cpu_profile_frame_name(const CpuProfile *p, uint32_t frame);
uint32_t cpu_profile_pseudo_frame(const CpuProfile *p, CpuPseudoFrame which);
/* The process's name as dotnet-trace gives it (its executable's file name), and its pid. */
const char *cpu_profile_process_name(const CpuProfile *p);
uint32_t cpu_profile_pid(const CpuProfile *p);
/* From the clock sync to the last ThreadSample, in ms. */
double cpu_profile_duration_ms(const CpuProfile *p);
const NettraceHeader *cpu_profile_nettrace_header(const CpuProfile *p);

/* The method frames of stack @node into @ret_frames (room for CPU_PROFILE_DEPTH_MAX), root first;
 * returns how many. Node 0 is the empty stack. */
size_t cpu_profile_stack(const CpuProfile *p, uint32_t node, uint32_t *ret_frames);

/* Threads with weighed samples, in dotnet-trace's order: by their first sample's time. */
size_t cpu_profile_threads(const CpuProfile *p);
const CpuThread *cpu_profile_thread(const CpuProfile *p, size_t i);

size_t cpu_profile_totals(const CpuProfile *p);
const CpuTotal *cpu_profile_total(const CpuProfile *p, size_t i);

/* Thread @i's weighed samples from the spool, in order. Return: 0, -ENODATA without a spool, -ENOMEM. */
int cpu_profile_samples_open(CpuProfile *p, size_t i, CpuSampleReader **ret);
/* Return: 1 and *@ret, 0 at the end, or a negative errno (the spool's, -EBADMSG for bytes it did not
 * write). */
int cpu_sample_reader_next(CpuSampleReader *r, CpuSample *ret);
CpuSampleReader *cpu_sample_reader_free(CpuSampleReader *r);

DEFINE_TRIVIAL_CLEANUP_FUNC(CpuProfile *, cpu_profile_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(CpuSampleReader *, cpu_sample_reader_free);
