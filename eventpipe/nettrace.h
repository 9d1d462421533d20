/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Nettrace stream parser: pure and incremental, no I/O.
 *
 * The runtime streams a trace over the diagnostic socket in the NetTrace
 * format (version 4/5: "Nettrace", "!FastSerialization.1", then objects).
 * The bytes come from the target process, which is not trusted, so every size
 * is checked against the bytes present and against the limits below before
 * it is used, and memory grows only with bytes that actually arrived.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cleanup.h"

/* Limits. The runtime's blocks are about 100 KiB; its definitions are small. */
#define NETTRACE_BLOCK_MAX (1u << 20)             /* bytes of one block body */
#define NETTRACE_METADATA_MAX 16384u              /* definitions per stream */
#define NETTRACE_METADATA_BYTES_MAX (8u << 20)    /* their payloads, summed */
#define NETTRACE_FIELDS_MAX 256u                  /* field nodes per definition, nested ones included */
#define NETTRACE_DEPTH_MAX 8u                     /* struct/array nesting, in definitions and payloads */
#define NETTRACE_STRING_MAX 4096u                 /* UTF-16 units of one name or payload string */
#define NETTRACE_VALUES_MAX 4096u                 /* values one payload decodes into */
/* Stacks kept between two sequence points (the runtime numbers them anew after each), when
 * asked for: past this many frames in all, further stacks are dropped (counted), not an error. */
#define NETTRACE_STACK_FRAMES_MAX (2u << 20)
#define NETTRACE_STACKS_MAX (1u << 20)

enum {
        _NETTRACE_E_SUCCESS,
        NETTRACE_E_INCOMPLETE,  /* the stream ended before its end-of-stream marker */
        NETTRACE_E_MALFORMED,   /* the bytes can never form a valid stream or payload */
        NETTRACE_E_UNSUPPORTED, /* a valid format this parser refuses (NetPerf, v6, unknown objects) */
        NETTRACE_E_LIMIT,       /* valid so far, but beyond one of the limits above */
        NETTRACE_E_NO_COUNTER,  /* nettrace_counter_extract(): the event is no counter sample */
};

/* System.TypeCode, as the metadata uses it, plus EventPipe's Guid and Array. */
typedef enum NettraceType {
        NETTRACE_TYPE_EMPTY = 0,
        NETTRACE_TYPE_OBJECT = 1, /* a struct: its fields follow in the definition */
        NETTRACE_TYPE_BOOLEAN = 3,
        NETTRACE_TYPE_CHAR = 4,
        NETTRACE_TYPE_SBYTE = 5,
        NETTRACE_TYPE_BYTE = 6,
        NETTRACE_TYPE_INT16 = 7,
        NETTRACE_TYPE_UINT16 = 8,
        NETTRACE_TYPE_INT32 = 9,
        NETTRACE_TYPE_UINT32 = 10,
        NETTRACE_TYPE_INT64 = 11,
        NETTRACE_TYPE_UINT64 = 12,
        NETTRACE_TYPE_SINGLE = 13,
        NETTRACE_TYPE_DOUBLE = 14,
        NETTRACE_TYPE_DECIMAL = 15,
        NETTRACE_TYPE_DATETIME = 16,
        NETTRACE_TYPE_GUID = 17,
        NETTRACE_TYPE_STRING = 18,
        NETTRACE_TYPE_ARRAY = 19, /* V5 metadata (V2Params) only */
} NettraceType;

/* The Trace object: what the whole stream shares. */
typedef struct NettraceHeader {
        uint32_t version;          /* of the Trace object: 4 for NetTrace v4 and v5 */
        uint16_t sync_time[8];     /* SYSTEMTIME (UTC): year, month, weekday, day, h, min, s, ms */
        int64_t sync_qpc;          /* timestamp at sync_time */
        int64_t qpc_frequency;     /* timestamp ticks per second, > 0 */
        uint32_t pointer_size;     /* 4 or 8 */
        uint32_t pid;              /* in the target's pid namespace */
        uint32_t processors;
        uint32_t sampling_rate_ns;
} NettraceHeader;

/* One field of a definition. A struct (OBJECT) has children; so has an
 * ARRAY of OBJECT, whose children describe one element. */
typedef struct NettraceField {
        char *name;                /* UTF-8 */
        NettraceType type;
        NettraceType element_type; /* for ARRAY; EMPTY otherwise */
        size_t n_children;
        struct NettraceField *children;
} NettraceField;

/* What a MetadataBlock says about the events carrying its id. */
typedef struct NettraceMetadata {
        uint32_t id;
        char *provider;            /* UTF-8, may be "" */
        uint32_t event_id;
        char *event_name;          /* UTF-8, may be "" (then the event id names it) */
        uint64_t keywords;
        uint32_t version;
        uint32_t level;
        bool has_opcode;           /* V5 OpCode tag */
        uint8_t opcode;
        size_t n_fields;           /* from V2Params when present, else from the V1 list */
        NettraceField *fields;
} NettraceMetadata;

typedef struct NettraceEvent {
        uint32_t metadata_id;
        const NettraceMetadata *metadata; /* NULL if the stream never defined the id */
        uint32_t sequence;
        uint64_t thread_id;
        uint64_t capture_thread_id;
        uint32_t processor;
        uint32_t stack_id;
        const uint64_t *stack;     /* with NettraceCallbacks.stacks: its frames, innermost first, valid
                                    * during the callback only; else NULL */
        size_t stack_depth;        /* 0 also when the stack is unknown or was dropped */
        uint64_t timestamp;
        uint8_t activity_id[16];
        uint8_t related_activity_id[16];
        bool sorted;
        const uint8_t *payload;    /* valid during the callback only */
        size_t payload_size;
} NettraceEvent;

/* A callback returning non-zero stops the parser, which then returns that value. */
typedef struct NettraceCallbacks {
        int (*header)(const NettraceHeader *header, void *userdata);
        int (*metadata)(const NettraceMetadata *metadata, void *userdata);
        int (*event)(const NettraceEvent *event, void *userdata);
        bool stacks;               /* keep StackBlocks and give each event its frames */
        /* with stacks: frames kept at most between two sequence points, and as many stacks; past them, as past
         * the limits above (0: NETTRACE_STACK_FRAMES_MAX and NETTRACE_STACKS_MAX). For a parser that lives
         * long beside many others, whose memory the stream's writer should not choose. */
        size_t stack_frames_max;
} NettraceCallbacks;

typedef struct NettraceParser NettraceParser;

/* A decoded payload value. Strings are UTF-8; names point into the metadata. */
typedef struct NettraceValue {
        const char *name;
        NettraceType type;         /* BOOLEAN, integers and DATETIME use i or u; SINGLE and DOUBLE use d */
        union {
                int64_t i;         /* SBYTE, INT16, INT32, INT64, BOOLEAN (0 or 1) */
                uint64_t u;        /* BYTE, CHAR, UINT16, UINT32, UINT64, DATETIME (FILETIME) */
                double d;
                uint8_t bytes[16]; /* GUID (as on the wire), DECIMAL */
                char *string;
        };
        size_t n_items;            /* OBJECT: its fields; ARRAY: its elements */
        struct NettraceValue *items;
} NettraceValue;

/* What a NettraceCounter carries. */
typedef enum NettraceCounterKind {
        NETTRACE_COUNTER_MEAN,       /* EventCounters: a level (EventCounter, PollingCounter) */
        NETTRACE_COUNTER_SUM,        /* EventCounters: the increment over the interval (Incrementing*Counter) */
        NETTRACE_COUNTER_GAUGE,      /* Meter: a gauge's last value */
        NETTRACE_COUNTER_COUNTER,    /* Meter: a Counter's increment over the interval, and its total */
        NETTRACE_COUNTER_UP_DOWN,    /* Meter: an UpDownCounter's value */
        NETTRACE_COUNTER_HISTOGRAM,  /* Meter: a histogram's quantiles over the interval, its count and sum */
        NETTRACE_COUNTER_INSTRUMENT, /* Meter: BeginInstrumentReporting: unit, description, tags; no value */
        NETTRACE_COUNTER_NOTICE,     /* Meter: a problem MetricsEventSource reports (name: the event) */
} NettraceCounterKind;

#define NETTRACE_QUANTILES_MAX 16u   /* quantiles kept of one histogram sample */
#define NETTRACE_COUNTER_TEXT_MAX 4096u /* bytes of a tag list or a description kept; longer ones are cut */

typedef struct NettraceQuantile {
        double quantile;           /* 0..1 */
        double value;
} NettraceQuantile;

/* One counter sample, from EventCounters or System.Diagnostics.Metrics events. */
typedef struct NettraceCounter {
        NettraceCounterKind kind;
        char *provider;            /* the EventSource or the Meter */
        char *name;
        char *display_name;        /* EventCounters' DisplayName; may be NULL */
        char *units;               /* may be NULL */
        bool has_value;            /* false: the instrument had nothing to report this interval */
        double value;              /* Mean, Increment, the gauge's or up-down counter's value, the counter's increment */
        bool rate;                 /* an increment over an interval (SUM, COUNTER), not a level */
        unsigned interval_ms;      /* EventCounters: the interval they were asked for ("Series") */
        char *tags;                /* the value's tags, "k=v,k2=v2" (EventCounters: Metadata, "k:v,..."); may be NULL */
        uint32_t event_version;    /* of the MetricsEventSource event: what fields it has */
        /* Meters */
        char *session_id;          /* the session whose configuration produced the event; may be NULL */
        char *meter_version;       /* may be NULL */
        int32_t instrument_id;     /* 0: none (before .NET 9) */
        bool has_total;
        double total;              /* COUNTER (.NET 8+): the running total; UP_DOWN: the value */
        bool has_count;            /* HISTOGRAM (.NET 8+): measurements and their sum over the interval */
        int64_t count;
        double sum;
        size_t n_quantiles;
        NettraceQuantile quantiles[NETTRACE_QUANTILES_MAX];
        /* INSTRUMENT (and NOTICE: description is the message) */
        char *description, *instrument_type, *instrument_tags, *meter_tags; /* may be NULL */
} NettraceCounter;

int nettrace_parser_new(const NettraceCallbacks *callbacks, void *userdata, NettraceParser **ret);
NettraceParser *nettrace_parser_free(NettraceParser *p);
int nettrace_feed(NettraceParser *p, const void *data, size_t size);
int nettrace_finish(NettraceParser *p);
bool nettrace_ended(const NettraceParser *p);
uint64_t nettrace_offset(const NettraceParser *p);
const NettraceMetadata *nettrace_metadata_lookup(const NettraceParser *p, uint32_t id);
uint64_t nettrace_stacks_dropped(const NettraceParser *p);
/* An event's timestamp on the wall clock, from the trace's clock sync: nanoseconds, microseconds since the epoch. */
int64_t nettrace_time_nsec(const NettraceHeader *h, uint64_t timestamp);
int64_t nettrace_time_usec(const NettraceHeader *h, uint64_t timestamp);

/* Pure pieces, exported for tests and for nettrace-payload.c. */
int nettrace_varint_decode(const uint8_t *buf, size_t len, unsigned bits, uint64_t *ret_value,
                           size_t *ret_consumed);
int nettrace_metadata_decode(const uint8_t *payload, size_t size, NettraceMetadata *ret);
void nettrace_metadata_done(NettraceMetadata *m);

int nettrace_payload_decode(const NettraceMetadata *m, const uint8_t *payload, size_t size,
                            NettraceValue **ret_values, size_t *ret_count);
void nettrace_values_free(NettraceValue *values, size_t count);
const NettraceValue *nettrace_value_find(const NettraceValue *values, size_t count, const char *name);

int nettrace_counter_extract(const NettraceEvent *event, NettraceCounter *ret);
void nettrace_counter_done(NettraceCounter *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(NettraceParser *, nettrace_parser_free);
