/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A CPU trace's samples, stacks and names, as dotnet-trace convert reads them (cpu-profile.h); pure */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/param.h>

#include "common/array.h"
#include "common/cleanup.h"
#include "eventpipe/cpu-profile.h"
#include "eventpipe/cursor.h"
#include "eventpipe/hash-map.h"
#include "eventpipe/monitor-events.h"
#include "eventpipe/varint.h"

#define EVENTPIPE_PROVIDER "Microsoft-DotNETCore-EventPipe"
#define EVENTPIPE_PROCESS_INFO 1     /* its ProcessInfo event: CommandLine, OSInformation, ArchInformation */
#define THREAD_SAMPLE 0              /* the sample profiler's ThreadSample: Type (u32) */
#define SAMPLE_TYPE_MANAGED 2u       /* SampleProfilerSampleType: Error 0, External 1, Managed 2 */
#define RESOLVE_CANDIDATES 16        /* methods starting below an address that are tried for it */

/* A spool chunk: the offset of the thread's next chunk (u64, NO_CHUNK for none), the bytes of records
 * used (u32), then the records. */
#define CHUNK_HEADER 12u
#define CHUNK_PAYLOAD (CPU_PROFILE_SPOOL_CHUNK - CHUNK_HEADER)
#define NO_CHUNK UINT64_MAX
#define RECORD_MAX (3 * VARINT_MAX_BYTES)

typedef struct Address {
        uint64_t ip;
        uint64_t first_seen;     /* the ordinal of the event whose stack held it first */
        uint32_t method;         /* the method that names it, UINT32_MAX for none; after cpu_profile_finish() */
        uint32_t frame;          /* after cpu_profile_finish() */
} Address;

/* A node of the stack tree: the stack of its parent, and one more frame inside it. */
typedef struct Node {
        uint32_t parent;
        uint32_t address;
} Node;

/* A method's code, as an event that TraceLog resolves addresses on says it is (unload, rundown's end). */
typedef struct Method {
        uint64_t start;
        uint32_t size;
        uint32_t frame;          /* UINT32_MAX until named */
        uint64_t ordinal;
        uint64_t module_id;
        char *name;              /* "Namespace.Name(parameters)", as TraceLog.GetFullName() makes it */
} Method;

/*
 * A module, as TraceLog's module file for it comes to be: made by the first event that needs it. A module
 * event makes it with its path in lower case (TraceModuleFile's constructor); a method event of the module
 * that TraceLog acts on (a jitted method's load, or an unload or rundown event that names an address) makes
 * it with no name, and the module event that comes later names it as it is.
 */
typedef struct Module {
        uint64_t id;
        char *name;              /* TraceModuleFile.Name: the file name without .dll or .exe; NULL: none came */
        uint64_t named_at;       /* the ordinal of the event that named it */
        uint64_t made_by_method; /* the ordinal of the first method event that would have made it, or UINT64_MAX */
} Module;

typedef struct Thread {
        uint64_t id;
        /* TraceEvent's ThreadState: last_block_ms 0 uninitialized, < 0 running, > 0 blocked */
        double last_block_ms, last_cpu_ms;
        int64_t last_block_qpc, last_cpu_qpc;
        uint32_t last_block_node, last_cpu_node;
        /* its weighed samples */
        uint64_t samples, first_emission;
        double first_ms;
        /* its time line: chunks in the spool, and the one being filled */
        uint64_t first_chunk, last_chunk;
        uint8_t *chunk;
        size_t chunk_used;
        int64_t spool_qpc;       /* the time of its last record */
        uint32_t frame;
        uint32_t order;          /* its index among the ordered threads */
} Thread;

struct CpuProfile {
        uint64_t seed;
        bool have_spool;
        CpuProfileSpool spool;
        uint64_t spool_end;
        bool have_header;
        NettraceHeader header;
        uint64_t ordinal;        /* of the event being read */
        char *command_line;

        U64Map address_index;
        Address *addresses;
        size_t n_addresses, cap_addresses;
        U64Map node_index;       /* (parent << 32 | address) to node */
        Node *nodes;
        size_t n_nodes, cap_nodes;
        Method *methods;
        size_t n_methods, cap_methods;
        U64Map module_index;
        Module *modules;
        size_t n_modules, cap_modules;
        size_t name_bytes;
        U64Map thread_index;
        Thread *threads;
        size_t n_threads, cap_threads;
        U64Map total_index;      /* (thread << 32 | node) to total */
        CpuTotal *totals;
        size_t n_totals, cap_totals;
        uint64_t emissions, thread_samples, left_out;
        int64_t last_qpc;        /* the latest sample's time */
        uint64_t left_out_names;  /* methods named "?!?" past CPU_PROFILE_NAME_BYTES_MAX */

        /* cpu_profile_finish() */
        bool finished;
        StrMap frame_index;
        size_t frame_bytes;      /* of the method frames' names, bounded as the names they are made of */
        uint32_t unknown_frame;  /* "?!?" */
        const char **frames;     /* the frame_index's keys, by frame */
        size_t n_frames, cap_frames;
        uint32_t pseudo[_CPU_FRAME_PSEUDO_MAX];
        char *process_name;
        CpuThread *ordered;      /* the threads with weighed samples, in order */
        uint32_t *ordered_index; /* their indexes in threads */
        size_t n_ordered;
};

struct CpuSampleReader {
        CpuProfile *profile;
        uint64_t next_chunk;
        uint8_t chunk[CPU_PROFILE_SPOOL_CHUNK];
        size_t used, at;
        int64_t qpc;
};

int cpu_profile_new(CpuProfile **ret) {
        CpuProfile *p = calloc(1, sizeof(CpuProfile));

        if (!p)
                return -ENOMEM;
        /* node 0: the empty stack, above every other */
        p->nodes = calloc(16, sizeof(Node));
        if (!p->nodes) {
                free(p);
                return -ENOMEM;
        }
        p->cap_nodes = 16;
        p->n_nodes = 1;
        *ret = p;
        return 0;
}

CpuProfile *cpu_profile_free(CpuProfile *p) {
        if (!p)
                return NULL;
        u64map_done(&p->address_index);
        u64map_done(&p->node_index);
        u64map_done(&p->module_index);
        u64map_done(&p->thread_index);
        u64map_done(&p->total_index);
        strmap_done(&p->frame_index);
        for (size_t i = 0; i < p->n_methods; i++)
                free(p->methods[i].name);
        for (size_t i = 0; i < p->n_modules; i++)
                free(p->modules[i].name);
        for (size_t i = 0; i < p->n_threads; i++)
                free(p->threads[i].chunk);
        free(p->addresses);
        free(p->nodes);
        free(p->methods);
        free(p->modules);
        free(p->threads);
        free(p->totals);
        free(p->frames);
        free(p->command_line);
        free(p->process_name);
        free(p->ordered);
        free(p->ordered_index);
        free(p);
        return NULL;
}

void cpu_profile_set_seed(CpuProfile *p, uint64_t seed) {
        p->seed = seed;
        p->address_index.seed = p->node_index.seed = p->module_index.seed = seed;
        p->thread_index.seed = p->total_index.seed = p->frame_index.seed = seed;
}

void cpu_profile_set_spool(CpuProfile *p, const CpuProfileSpool *spool) {
        p->spool = *spool;
        p->have_spool = true;
}

void cpu_profile_header(CpuProfile *p, const NettraceHeader *h) {
        p->header = *h;
        p->have_header = true;
}

uint64_t cpu_profile_left_out(const CpuProfile *p) {
        return p->left_out;
}

uint64_t cpu_profile_thread_samples(const CpuProfile *p) {
        return p->thread_samples;
}

static bool event_is(const NettraceEvent *e, const char *provider, uint32_t id) {
        return e->metadata && e->metadata->event_id == id && strcmp(e->metadata->provider, provider) == 0;
}

/* ---- time, as TraceEvent computes it ---- */

/* A timestamp before the clock sync counts as the sync (TraceEventSource.QPCTimeToRelMSec()). */
static int64_t clamp_qpc(const CpuProfile *p, uint64_t timestamp) {
        int64_t qpc = (int64_t)timestamp;

        return qpc < p->header.sync_qpc ? p->header.sync_qpc : qpc;
}

/* Milliseconds since the sync, in TraceEvent's arithmetic: (qpc - sync) * 1000.0 / frequency. */
static double relative_ms(const CpuProfile *p, int64_t qpc) {
        return (double)(int64_t)((uint64_t)qpc - (uint64_t)p->header.sync_qpc) * 1000.0 / (double)p->header.qpc_frequency;
}

/* ---- names the runtime gives ---- */

static bool may_name(CpuProfile *p, size_t bytes) {
        if (bytes > CPU_PROFILE_NAME_BYTES_MAX - MIN(p->name_bytes, (size_t)CPU_PROFILE_NAME_BYTES_MAX))
                return false;
        p->name_bytes += bytes;
        return true;
}

/* The runtime's ProcessInfo: its command line names the process (TraceProcess.FromEventPipeProcessInfo()). */
static int add_process_info(CpuProfile *p, const NettraceEvent *e) {
        Cursor c = { e->payload, e->payload_size };
        char *command_line = NULL;
        int r = take_utf16z(&c, &command_line);

        if (r != 0)
                return r < 0 ? r : 0;
        if (!*command_line || !may_name(p, strlen(command_line))) {
                free(command_line);
                return 0;
        }
        free(p->command_line);
        p->command_line = command_line;
        return 0;
}

static int add_jitted_method(CpuProfile *p, const MonitorMethodEvent *m);

/* Only the events TraceLog resolves addresses on when it converts a file: MethodUnloadVerbose and the
 * rundown's MethodDCEndVerbose (its MethodDCStopVerbose). The loads feed its real-time lookups only. */
static int add_method(CpuProfile *p, const MonitorMethodEvent *m) {
        _cleanup_free_ char *name = NULL;
        const char *open;

        if (m->kind == MONITOR_METHOD_LOAD || m->kind == MONITOR_METHOD_DC_START)
                return add_jitted_method(p, m);
        if (m->size == 0 || m->start + m->size < m->start)
                return 0;
        open = strchr(m->signature, '(');
        if (asprintf(&name, "%s.%s%s", m->namespace_name, m->name, open ? open : "") < 0)
                return -ENOMEM;
        if (p->n_methods >= CPU_PROFILE_METHODS_MAX || !may_name(p, strlen(name)))
                return 0;
        if (array_reserve((void **)&p->methods, &p->cap_methods, p->n_methods, sizeof(Method)) < 0)
                return -ENOMEM;
        p->methods[p->n_methods++] = (Method){ .start = m->start, .size = m->size, .frame = UINT32_MAX,
                                               .ordinal = p->ordinal, .module_id = m->module_id,
                                               .name = TAKE_PTR(name) };
        return 0;
}

/* .NET's String.LastIndexOf(".ni.", Length, 8, OrdinalIgnoreCase): within the last seven characters. */
static const char *ni_suffix(const char *path) {
        size_t n = strlen(path);

        for (size_t i = n >= 4 ? n - 4 : 0; n >= 4 && i + 7 >= n; i--) {
                if (strncasecmp(path + i, ".ni.", 4) == 0)
                        return path + i;
                if (i == 0)
                        break;
        }
        return NULL;
}

static bool is_zero_guid(const uint8_t g[16]) {
        static const uint8_t zero[16];
        return memcmp(g, zero, 16) == 0;
}

/*
 * The module file TraceLog makes of a module's event (TraceLoadedModules.ManagedModuleLoadOrUnload()):
 * its IL path, with an NGEN image's ".ni." taken out when the IL path is the native one, or ".il" put
 * before the extension of a ReadyToRun image with both PDB signatures and no native path.
 */
static char *module_il_path(const MonitorModuleEvent *m) {
        const char *native = m->native_path ? m->native_path : "";
        const char *ni, *dot;
        char *path;

        if (strcmp(m->il_path, native) == 0) {
                ni = ni_suffix(m->il_path);
                if (ni && asprintf(&path, "%.*s%s", (int)(ni - m->il_path), m->il_path, ni + 3) >= 0)
                        return path;
        } else if (!*native && m->has_pdb_signatures && !is_zero_guid(m->native_pdb_signature) &&
                   !is_zero_guid(m->managed_pdb_signature)) {
                dot = strrchr(m->il_path, '.');
                if (dot && dot > m->il_path &&
                    asprintf(&path, "%.*s.il%s", (int)(dot - m->il_path), m->il_path, dot) >= 0)
                        return path;
        }
        return strdup(m->il_path);
}

/* TraceLog.GetFileNameWithoutExtensionNoIllegalChars(): after the last '/' or '\', without a .dll or
 * .exe extension (in any case). */
static char *file_name_without_extension(const char *path) {
        const char *base = path, *dot = strrchr(path, '.');

        for (const char *s = path; *s; s++)
                if (*s == '/' || *s == '\\')
                        base = s + 1;
        if (dot && dot > base && (strcasecmp(dot, ".dll") == 0 || strcasecmp(dot, ".exe") == 0))
                return strndup(base, (size_t)(dot - base));
        return strdup(base);
}

/* The module's entry, made when missing; UINT32_MAX past CPU_PROFILE_MODULES_MAX. */
static int module_get(CpuProfile *p, uint64_t id, uint32_t *ret) {
        uint32_t i = u64map_get(&p->module_index, id);
        int r;

        if (i == UINT32_MAX && p->n_modules < CPU_PROFILE_MODULES_MAX) {
                if (array_reserve((void **)&p->modules, &p->cap_modules, p->n_modules, sizeof(Module)) < 0)
                        return -ENOMEM;
                r = u64map_put(&p->module_index, id, (uint32_t)p->n_modules, false);
                if (r < 0)
                        return r;
                i = (uint32_t)p->n_modules++;
                p->modules[i] = (Module){ .id = id, .made_by_method = UINT64_MAX };
        }
        *ret = i;
        return 0;
}

/* The first module event names a module, as TraceLog sets a module file's name once. */
static int add_module(CpuProfile *p, const MonitorModuleEvent *m) {
        _cleanup_free_ char *path = NULL, *name = NULL;
        uint32_t i;
        int r;

        r = module_get(p, m->module_id, &i);
        if (r < 0 || i == UINT32_MAX || p->modules[i].name)
                return r;
        path = module_il_path(m);
        name = path ? file_name_without_extension(path) : NULL;
        if (!name)
                return -ENOMEM;
        if (!may_name(p, strlen(name)))
                return 0;
        p->modules[i].name = TAKE_PTR(name);
        p->modules[i].named_at = p->ordinal;
        return 0;
}

/* A jitted method's load: TraceLog's real-time table of jitted code makes its module (TraceLog.SetupCallbacks()). */
static int add_jitted_method(CpuProfile *p, const MonitorMethodEvent *m) {
        uint32_t i;
        int r;

        if (!(m->flags & MONITOR_METHOD_FLAG_JITTED))
                return 0;
        r = module_get(p, m->module_id, &i);
        if (r == 0 && i != UINT32_MAX)
                p->modules[i].made_by_method = MIN(p->modules[i].made_by_method, p->ordinal);
        return r;
}

/* ---- stacks ---- */

/* The address's index, or UINT32_MAX past the limit. */
static int address_intern(CpuProfile *p, uint64_t ip, uint32_t *ret) {
        uint32_t i = u64map_get(&p->address_index, ip);
        int r;

        if (i != UINT32_MAX) {
                *ret = i;
                return 0;
        }
        if (p->n_addresses >= CPU_PROFILE_ADDRESSES_MAX) {
                *ret = UINT32_MAX;
                return 0;
        }
        if (array_reserve((void **)&p->addresses, &p->cap_addresses, p->n_addresses, sizeof(Address)) < 0)
                return -ENOMEM;
        r = u64map_put(&p->address_index, ip, (uint32_t)p->n_addresses, false);
        if (r < 0)
                return r;
        p->addresses[p->n_addresses] = (Address){ .ip = ip, .first_seen = p->ordinal, .frame = UINT32_MAX };
        *ret = (uint32_t)p->n_addresses++;
        return 0;
}

static int node_child(CpuProfile *p, uint32_t parent, uint32_t address, uint32_t *ret) {
        uint64_t key = (uint64_t)parent << 32 | address;
        uint32_t i = u64map_get(&p->node_index, key);
        int r;

        if (i != UINT32_MAX) {
                *ret = i;
                return 0;
        }
        if (p->n_nodes >= CPU_PROFILE_NODES_MAX) {
                *ret = UINT32_MAX;
                return 0;
        }
        if (array_reserve((void **)&p->nodes, &p->cap_nodes, p->n_nodes, sizeof(Node)) < 0)
                return -ENOMEM;
        r = u64map_put(&p->node_index, key, (uint32_t)p->n_nodes, false);
        if (r < 0)
                return r;
        p->nodes[p->n_nodes] = (Node){ .parent = parent, .address = address };
        *ret = (uint32_t)p->n_nodes++;
        return 0;
}

/* The node of the event's stack, its CPU_PROFILE_DEPTH_MAX outermost frames; UINT32_MAX past a limit. */
static int stack_intern(CpuProfile *p, const NettraceEvent *e, uint32_t *ret) {
        size_t depth = MIN(e->stack_depth, (size_t)CPU_PROFILE_DEPTH_MAX);
        uint32_t node = 0;

        for (size_t i = 0; i < depth && node != UINT32_MAX; i++) {
                uint32_t address;
                int r = address_intern(p, e->stack[e->stack_depth - 1 - i], &address);

                if (r < 0)
                        return r;
                if (address == UINT32_MAX)
                        node = UINT32_MAX;
                else if ((r = node_child(p, node, address, &node)) < 0)
                        return r;
        }
        *ret = node;
        return 0;
}

/* ---- the time line ---- */

static int spool_flush(CpuProfile *p, Thread *t) {
        uint64_t at = p->spool_end;
        uint8_t header[CHUNK_HEADER];
        int r;

        if (t->chunk_used == 0)
                return 0;
        memset(header, 0xff, 8);
        header[8] = (uint8_t)t->chunk_used;
        header[9] = (uint8_t)(t->chunk_used >> 8);
        header[10] = header[11] = 0;
        memcpy(t->chunk, header, CHUNK_HEADER);
        r = p->spool.write(p->spool.userdata, at, t->chunk, CHUNK_HEADER + t->chunk_used);
        if (r == 0 && t->last_chunk != NO_CHUNK) {
                uint8_t link[8];

                for (int i = 0; i < 8; i++)
                        link[i] = (uint8_t)(at >> (8 * i));
                r = p->spool.write(p->spool.userdata, t->last_chunk, link, sizeof(link));
        }
        if (r < 0)
                return r;
        if (t->last_chunk == NO_CHUNK)
                t->first_chunk = at;
        t->last_chunk = at;
        p->spool_end += CHUNK_HEADER + t->chunk_used;
        t->chunk_used = 0;
        return 0;
}

/* One weighed sample into the thread's chunk: the time since its last one and the weight in
 * timestamp ticks (zigzag), then the stack and kind. */
static int spool_append(CpuProfile *p, Thread *t, CpuSampleKind kind, int64_t time_qpc, int64_t trigger_qpc,
                        uint32_t node) {
        uint8_t record[RECORD_MAX];
        size_t n = 0;
        int r;

        if (!t->chunk) {
                t->chunk = malloc(CPU_PROFILE_SPOOL_CHUNK);
                if (!t->chunk)
                        return -ENOMEM;
                t->spool_qpc = p->header.sync_qpc;
        }
        n += varint_put(record + n, zigzag((int64_t)((uint64_t)time_qpc - (uint64_t)t->spool_qpc)));
        n += varint_put(record + n, zigzag((int64_t)((uint64_t)trigger_qpc - (uint64_t)time_qpc)));
        n += varint_put(record + n, (uint64_t)node << 1 | (uint64_t)kind);
        if (t->chunk_used + n > CHUNK_PAYLOAD && (r = spool_flush(p, t)) < 0)
                return r;
        memcpy(t->chunk + CHUNK_HEADER + t->chunk_used, record, n);
        t->chunk_used += n;
        t->spool_qpc = time_qpc;
        return 0;
}

/* A weighed sample, as TraceEvent's computer adds it to its stack source: summed, and kept in order. */
static int emit(CpuProfile *p, uint32_t thread, CpuSampleKind kind, int64_t time_qpc, int64_t trigger_qpc,
                uint32_t node) {
        Thread *t = &p->threads[thread];
        double time_ms = relative_ms(p, time_qpc);
        float metric = (float)(relative_ms(p, trigger_qpc) - time_ms);
        uint64_t key = (uint64_t)thread << 32 | node;
        uint32_t i = u64map_get(&p->total_index, key);
        int r;

        if (i == UINT32_MAX) {
                if (p->n_totals >= CPU_PROFILE_TOTALS_MAX) {
                        p->left_out++;
                        return 0;
                }
                if (array_reserve((void **)&p->totals, &p->cap_totals, p->n_totals, sizeof(CpuTotal)) < 0)
                        return -ENOMEM;
                r = u64map_put(&p->total_index, key, (uint32_t)p->n_totals, false);
                if (r < 0)
                        return r;
                i = (uint32_t)p->n_totals++;
                p->totals[i] = (CpuTotal){ .thread = thread, .node = node };
        }
        if (p->have_spool && (r = spool_append(p, t, kind, time_qpc, trigger_qpc, node)) < 0)
                return r;
        p->totals[i].samples[kind]++;
        p->totals[i].ms[kind] += metric;
        if (t->samples++ == 0) {
                t->first_ms = time_ms;
                t->first_emission = p->emissions;
        }
        p->emissions++;
        return 0;
}

/* ThreadState.AddCPUSample(): the last CPU sample, weighed until now. */
static int add_cpu_sample(CpuProfile *p, uint32_t thread, int64_t now_qpc) {
        Thread *t = &p->threads[thread];

        if (!(t->last_cpu_ms > 0))
                return 0;
        return emit(p, thread, CPU_SAMPLE_CPU, t->last_cpu_qpc, now_qpc, t->last_cpu_node);
}

/* ThreadState.AddBlockTimeSample() */
static int add_block_sample(CpuProfile *p, uint32_t thread, int64_t now_qpc) {
        Thread *t = &p->threads[thread];

        if (!(t->last_block_ms > 0))
                return 0;
        return emit(p, thread, CPU_SAMPLE_WAIT, t->last_block_qpc, now_qpc, t->last_block_node);
}

/* ThreadState.LogThreadStack(), line for line: a thread's state goes from uninitialized (0) to running
 * (< 0, the negated time it unblocked) or blocked (> 0, since when); each sample weighs the one before. */
static int log_thread_stack(CpuProfile *p, uint32_t thread, int64_t qpc, uint32_t node, bool on_cpu) {
        Thread *t = &p->threads[thread];
        double now = relative_ms(p, qpc);
        bool uninitialized = t->last_block_ms == 0, running = t->last_block_ms < 0, blocked = 0 < t->last_block_ms;
        int r = 0;

        if (on_cpu) {
                if (uninitialized) {
                        r = add_cpu_sample(p, thread, qpc);
                        t->last_block_ms = -1;
                } else if (running)
                        r = add_cpu_sample(p, thread, qpc);
                else if (blocked) {
                        r = add_block_sample(p, thread, qpc);
                        t->last_block_ms = -now;
                }
                t->last_cpu_ms = now;
                t->last_cpu_qpc = qpc;
                t->last_cpu_node = node;
                return r;
        }
        if (blocked || uninitialized)
                r = add_block_sample(p, thread, qpc);
        else if (running)
                r = add_cpu_sample(p, thread, qpc);
        t->last_block_ms = now;
        t->last_block_qpc = qpc;
        t->last_block_node = node;
        return r;
}

/* The thread's index, or UINT32_MAX past CPU_PROFILE_THREADS_MAX. */
static int thread_get(CpuProfile *p, uint64_t id, uint32_t *ret) {
        uint32_t i = u64map_get(&p->thread_index, id);
        int r;

        if (i == UINT32_MAX && p->n_threads < CPU_PROFILE_THREADS_MAX) {
                if (array_reserve((void **)&p->threads, &p->cap_threads, p->n_threads, sizeof(Thread)) < 0)
                        return -ENOMEM;
                r = u64map_put(&p->thread_index, id, (uint32_t)p->n_threads, false);
                if (r < 0)
                        return r;
                p->threads[p->n_threads] = (Thread){ .id = id, .first_chunk = NO_CHUNK, .last_chunk = NO_CHUNK };
                i = (uint32_t)p->n_threads++;
        }
        *ret = i;
        return 0;
}

static int on_thread_sample(CpuProfile *p, const NettraceEvent *e) {
        Cursor c = { e->payload, e->payload_size };
        uint32_t type = 0, thread, node;
        int r;

        p->thread_samples++;
        if (!p->have_header || p->header.qpc_frequency <= 0) {
                p->left_out++;
                return 0;
        }
        r = thread_get(p, e->thread_id, &thread);
        if (r == 0 && thread != UINT32_MAX)
                r = stack_intern(p, e, &node);
        if (r < 0)
                return r;
        if (thread == UINT32_MAX || node == UINT32_MAX) {
                p->left_out++;
                return 0;
        }
        /* a payload too short to say is no Managed sample */
        (void)take_u32(&c, &type);
        if (clamp_qpc(p, e->timestamp) > p->last_qpc || p->thread_samples == 1)
                p->last_qpc = clamp_qpc(p, e->timestamp);
        return log_thread_stack(p, thread, clamp_qpc(p, e->timestamp), node, type == SAMPLE_TYPE_MANAGED);
}

int cpu_profile_event(CpuProfile *p, const NettraceEvent *e) {
        _cleanup_(monitor_method_event_done) MonitorMethodEvent method = {};
        _cleanup_(monitor_module_event_done) MonitorModuleEvent module = {};
        int r;

        p->ordinal++;
        if (!e->metadata)
                return 0;
        if (event_is(e, MONITOR_SAMPLE_PROFILER, THREAD_SAMPLE))
                return on_thread_sample(p, e);
        if (event_is(e, EVENTPIPE_PROVIDER, EVENTPIPE_PROCESS_INFO))
                return add_process_info(p, e);
        r = monitor_method_event_extract(e, &method);
        if (r == 0)
                return add_method(p, &method);
        if (r == MONITOR_E_OTHER && (r = monitor_module_event_extract(e, &module)) == 0)
                return add_module(p, &module);
        return r < 0 ? r : 0;
}

/* ---- names, at the end ---- */

static int frame_intern(CpuProfile *p, const char *name, uint32_t *ret) {
        uint32_t i = strmap_get(&p->frame_index, name);
        int r;

        if (i == UINT32_MAX) {
                if (array_reserve((void **)&p->frames, &p->cap_frames, p->n_frames, sizeof(char *)) < 0)
                        return -ENOMEM;
                r = strmap_put(&p->frame_index, name, (uint32_t)p->n_frames);
                if (r < 0)
                        return r;
                i = (uint32_t)p->n_frames;
                /* the map's own copy, which lives as long as the map */
                p->frames[p->n_frames++] = NULL;
        }
        *ret = i;
        return 0;
}

static int method_compare(const void *a, const void *b) {
        const Method *x = a, *y = b;

        if (x->start != y->start)
                return x->start < y->start ? -1 : 1;
        return x->ordinal < y->ordinal ? -1 : x->ordinal > y->ordinal;
}

/* TraceCodeAddresses.AddMethod() on each unload or rundown event, in stream order: the first such
 * event after the address was first seen whose code holds it. Methods of code that overlaps none
 * but a re-reported range's are found among the few starting just below the address. */
static const Method *resolve(const CpuProfile *p, const Address *a) {
        size_t lo = 0, hi = p->n_methods;
        const Method *best = NULL;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (p->methods[mid].start <= a->ip)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        for (size_t i = lo, tries = 0; i > 0 && tries < RESOLVE_CANDIDATES; i--, tries++) {
                const Method *m = &p->methods[i - 1];

                if (a->ip - m->start < m->size && m->ordinal > a->first_seen && (!best || m->ordinal < best->ordinal))
                        best = m;
        }
        return best;
}

/* The module's name in frames: "ManagedModule" when no event named it, in lower case when a module event made
 * its module file (module_get()), as it came when a method event did. ASCII letters alone are lowered here,
 * where .NET's ToLowerInvariant() lowers every script's. */
static char *module_name(const CpuProfile *p, uint64_t module_id) {
        uint32_t i = u64map_get((U64Map *)&p->module_index, module_id);
        const Module *m = i == UINT32_MAX ? NULL : &p->modules[i];
        char *name;

        if (!m || !m->name)
                return strdup("ManagedModule");
        name = strdup(m->name);
        if (name && !(m->made_by_method < m->named_at))
                for (char *c = name; *c; c++)
                        if (*c >= 'A' && *c <= 'Z')
                                *c = (char)(*c - 'A' + 'a');
        return name;
}

static int method_frame(CpuProfile *p, Method *m, uint32_t *ret) {
        _cleanup_free_ char *name = NULL, *module = NULL;
        int r;

        if (m->frame == UINT32_MAX) {
                module = module_name(p, m->module_id);
                if (!module || asprintf(&name, "%s!%s", module, m->name) < 0)
                        return -ENOMEM;
                /* a long module name on many methods would multiply: past the bound, "?!?" */
                if (strlen(name) > CPU_PROFILE_NAME_BYTES_MAX - MIN(p->frame_bytes, (size_t)CPU_PROFILE_NAME_BYTES_MAX)) {
                        m->frame = p->unknown_frame;
                        p->left_out_names++;
                } else {
                        r = frame_intern(p, name, &m->frame);
                        if (r < 0)
                                return r;
                        p->frame_bytes += strlen(name);
                }
        }
        *ret = m->frame;
        return 0;
}

/* Each address's method first, which tells which modules a method event made (TraceCodeAddresses.AddMethod()
 * makes the module of a method that names an address), then the names. */
static int name_addresses(CpuProfile *p) {
        int r;

        if (p->n_methods > 1)
                qsort(p->methods, p->n_methods, sizeof(Method), method_compare);
        r = frame_intern(p, "?!?", &p->unknown_frame);
        for (size_t i = 0; r == 0 && i < p->n_addresses; i++) {
                const Method *m = resolve(p, &p->addresses[i]);
                uint32_t module;

                p->addresses[i].method = m ? (uint32_t)(m - p->methods) : UINT32_MAX;
                if (m && (r = module_get(p, m->module_id, &module)) == 0 && module != UINT32_MAX)
                        p->modules[module].made_by_method = MIN(p->modules[module].made_by_method, m->ordinal);
        }
        for (size_t i = 0; r == 0 && i < p->n_addresses; i++) {
                p->addresses[i].frame = p->unknown_frame;
                if (p->addresses[i].method != UINT32_MAX)
                        r = method_frame(p, &p->methods[p->addresses[i].method], &p->addresses[i].frame);
        }
        return r;
}

/*
 * TraceProcess: its image file name is the command line up to the first space, unquoted; its Name that
 * file's name without .dll or .exe ("Process(PID)" when empty); the frame shows the arguments, the
 * command line after the executable's name (TraceEventStackSource.GetFrameName()).
 */
static int name_process(CpuProfile *p) {
        _cleanup_free_ char *image = NULL, *frame = NULL;
        const char *command = p->command_line ? p->command_line : "", *args = command, *space = strchr(command, ' ');
        int32_t pid = (int32_t)p->header.pid;
        size_t n;

        image = space && space > command ? strndup(command, (size_t)(space - command)) : strdup(command);
        if (!image)
                return -ENOMEM;
        n = strlen(image);
        if (n > 2 && image[0] == '"' && image[n - 1] == '"') {
                memmove(image, image + 1, n - 2);
                image[n - 2] = '\0';
        }
        p->process_name = file_name_without_extension(image);
        if (!p->process_name)
                return -ENOMEM;
        if (!*p->process_name && pid != -1 && pid != 0) {
                free(p->process_name);
                if (asprintf(&p->process_name, "Process(%" PRId32 ")", pid) < 0) {
                        p->process_name = NULL;
                        return -ENOMEM;
                }
        }
        if (*command) {
                const char *end = command[0] == '"' ? strchr(command + 1, '"') : strchr(command, ' ');
                if (end)
                        args = end + 1;
        }
        if (asprintf(&frame, "Process%s %s (%" PRId32 ") Args: %s", p->header.pointer_size == 8 ? "64" : "32",
                     p->process_name, pid, args) < 0)
                return -ENOMEM;
        return frame_intern(p, frame, &p->pseudo[CPU_FRAME_PROCESS]);
}

static int name_pseudo_frames(CpuProfile *p) {
        static const char *const names[_CPU_FRAME_PSEUDO_MAX] = {
                [CPU_FRAME_NON_ACTIVITIES] = "(Non-Activities)",
                [CPU_FRAME_THREADS] = "Threads",
                [CPU_FRAME_CPU_TIME] = "CPU_TIME",
                [CPU_FRAME_UNMANAGED] = "UNMANAGED_CODE_TIME",
        };
        int r = name_process(p);

        for (int i = 0; r == 0 && i < _CPU_FRAME_PSEUDO_MAX; i++)
                if (names[i])
                        r = frame_intern(p, names[i], &p->pseudo[i]);
        return r;
}

/* dotnet-trace's order of threads: by the time of their first weighed sample. */
static int thread_order_compare(const void *a, const void *b, void *userdata) {
        const CpuProfile *p = userdata;
        const Thread *x = &p->threads[*(const uint32_t *)a], *y = &p->threads[*(const uint32_t *)b];

        if (x->first_ms != y->first_ms)
                return x->first_ms < y->first_ms ? -1 : 1;
        return x->first_emission < y->first_emission ? -1 : x->first_emission > y->first_emission;
}

static int order_threads(CpuProfile *p) {
        p->ordered_index = calloc(MAX(p->n_threads, (size_t)1), sizeof(uint32_t));
        p->ordered = calloc(MAX(p->n_threads, (size_t)1), sizeof(CpuThread));
        if (!p->ordered_index || !p->ordered)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_threads; i++) {
                char name[48];
                int r;

                /* VerboseThreadName: an EventPipe trace says no thread's CPU time or name */
                snprintf(name, sizeof(name), "Thread (%" PRId32 ")", (int32_t)p->threads[i].id);
                r = frame_intern(p, name, &p->threads[i].frame);
                if (r < 0)
                        return r;
                if (p->threads[i].samples > 0)
                        p->ordered_index[p->n_ordered++] = (uint32_t)i;
        }
        qsort_r(p->ordered_index, p->n_ordered, sizeof(uint32_t), thread_order_compare, p);
        for (size_t i = 0; i < p->n_ordered; i++) {
                Thread *t = &p->threads[p->ordered_index[i]];
                p->ordered[i] = (CpuThread){ .id = t->id, .frame = t->frame, .samples = t->samples, .first_ms = t->first_ms };
                t->order = (uint32_t)i;
        }
        /* a total's thread had a weighed sample: it is among the ordered */
        for (size_t i = 0; i < p->n_totals; i++)
                p->totals[i].thread = p->threads[p->totals[i].thread].order;
        return 0;
}

int cpu_profile_finish(CpuProfile *p) {
        int r = 0;

        if (p->finished)
                return 0;
        for (size_t i = 0; r == 0 && i < p->n_threads; i++) {
                if (p->have_spool)
                        r = spool_flush(p, &p->threads[i]);
                free(p->threads[i].chunk);
                p->threads[i].chunk = NULL;
        }
        if (r == 0)
                r = name_pseudo_frames(p);
        if (r == 0)
                r = name_addresses(p);
        if (r == 0)
                r = order_threads(p);
        if (r < 0)
                return r;
        /* the names' own copies: the map's keys, which it keeps as long as it lives */
        for (size_t i = 0; i < p->frame_index.cap; i++)
                if (p->frame_index.keys[i])
                        p->frames[p->frame_index.values[i]] = p->frame_index.keys[i];
        p->finished = true;
        return 0;
}

/* ---- reading ---- */

size_t cpu_profile_frames(const CpuProfile *p) {
        return p->n_frames;
}

const char *cpu_profile_frame_name(const CpuProfile *p, uint32_t frame) {
        return frame < p->n_frames ? p->frames[frame] : "?";
}

uint32_t cpu_profile_pseudo_frame(const CpuProfile *p, CpuPseudoFrame which) {
        return p->pseudo[which];
}

const char *cpu_profile_process_name(const CpuProfile *p) {
        return p->process_name ? p->process_name : "";
}

double cpu_profile_duration_ms(const CpuProfile *p) {
        return p->have_header && p->header.qpc_frequency > 0 && p->thread_samples > 0 ? relative_ms(p, p->last_qpc) : 0;
}

uint32_t cpu_profile_pid(const CpuProfile *p) {
        return p->header.pid;
}

const NettraceHeader *cpu_profile_nettrace_header(const CpuProfile *p) {
        return &p->header;
}

size_t cpu_profile_stack(const CpuProfile *p, uint32_t node, uint32_t *ret_frames) {
        size_t n = 0;

        /* a node's parent was made before it: the walk ends, and within the depth it was made with */
        for (; node != 0 && node < p->n_nodes && n < CPU_PROFILE_DEPTH_MAX; node = p->nodes[node].parent)
                ret_frames[n++] = p->addresses[p->nodes[node].address].frame;
        for (size_t i = 0; i < n / 2; i++) {
                uint32_t f = ret_frames[i];
                ret_frames[i] = ret_frames[n - 1 - i];
                ret_frames[n - 1 - i] = f;
        }
        return n;
}

size_t cpu_profile_threads(const CpuProfile *p) {
        return p->n_ordered;
}

const CpuThread *cpu_profile_thread(const CpuProfile *p, size_t i) {
        return &p->ordered[i];
}

size_t cpu_profile_totals(const CpuProfile *p) {
        return p->n_totals;
}

const CpuTotal *cpu_profile_total(const CpuProfile *p, size_t i) {
        return &p->totals[i];
}

int cpu_profile_samples_open(CpuProfile *p, size_t i, CpuSampleReader **ret) {
        CpuSampleReader *r;

        if (!p->have_spool)
                return -ENODATA;
        r = calloc(1, sizeof(CpuSampleReader));
        if (!r)
                return -ENOMEM;
        r->profile = p;
        r->next_chunk = p->threads[p->ordered_index[i]].first_chunk;
        r->qpc = p->header.sync_qpc;
        *ret = r;
        return 0;
}

CpuSampleReader *cpu_sample_reader_free(CpuSampleReader *r) {
        free(r);
        return NULL;
}

static int reader_load(CpuSampleReader *r) {
        CpuProfile *p = r->profile;
        uint8_t *h = r->chunk;
        int k;

        k = p->spool.read(p->spool.userdata, r->next_chunk, h, CHUNK_HEADER);
        if (k < 0)
                return k;
        r->used = (size_t)h[8] | (size_t)h[9] << 8;
        if (r->used == 0 || r->used > CHUNK_PAYLOAD)
                return -EBADMSG;
        k = p->spool.read(p->spool.userdata, r->next_chunk + CHUNK_HEADER, h + CHUNK_HEADER, r->used);
        if (k < 0)
                return k;
        r->next_chunk = get_u64(h);
        r->at = 0;
        return 0;
}

static int reader_varint(CpuSampleReader *r, uint64_t *ret) {
        size_t n;

        if (nettrace_varint_decode(r->chunk + CHUNK_HEADER + r->at, r->used - r->at, 64, ret, &n) != 0)
                return -EBADMSG;
        r->at += n;
        return 0;
}

int cpu_sample_reader_next(CpuSampleReader *r, CpuSample *ret) {
        const CpuProfile *p = r->profile;
        uint64_t delta, weight, node;
        int64_t time_qpc, trigger_qpc;
        int k;

        if (r->at >= r->used) {
                if (r->next_chunk == NO_CHUNK)
                        return 0;
                k = reader_load(r);
                if (k < 0)
                        return k;
        }
        if (reader_varint(r, &delta) < 0 || reader_varint(r, &weight) < 0 || reader_varint(r, &node) < 0 ||
            (node >> 1) >= p->n_nodes)
                return -EBADMSG;
        time_qpc = (int64_t)((uint64_t)r->qpc + (uint64_t)unzigzag(delta));
        trigger_qpc = (int64_t)((uint64_t)time_qpc + (uint64_t)unzigzag(weight));
        r->qpc = time_qpc;
        ret->time_ms = relative_ms(p, time_qpc);
        ret->metric_ms = (float)(relative_ms(p, trigger_qpc) - ret->time_ms);
        ret->node = (uint32_t)(node >> 1);
        ret->kind = (CpuSampleKind)(node & 1);
        return 1;
}
