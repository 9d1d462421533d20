/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The nettrace stream parser (nettrace.h): pure and incremental; every size checked against the
 * bytes present.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>
#include <time.h>

#include "common/array.h"
#include "common/cleanup.h"
#include "eventpipe/cursor.h"
#include "eventpipe/nettrace.h"
#include "common/text.h"

/* FastSerialization tags */
#define TAG_NULL_REFERENCE 0x01
#define TAG_BEGIN_PRIVATE_OBJECT 0x05
#define TAG_END_OBJECT 0x06

#define SIGNATURE "!FastSerialization.1"
#define SIGNATURE_SIZE 20
/* type object after its BeginPrivateObject tag: tag, NullReference, version, min version, name length */
#define TYPE_HEAD_SIZE 14
#define TYPE_NAME_MAX 32
#define TRACE_BODY_SIZE 48
/* uncompressed event header after its size field */
#define EVENT_HEADER_SIZE 76
#define BLOCK_HEADER_MIN 20

/* metadata tags of format v5 */
#define METADATA_TAG_OPCODE 1
#define METADATA_TAG_V2_PARAMS 2

typedef enum ObjectKind {
        OBJECT_TRACE,
        OBJECT_EVENT_BLOCK,
        OBJECT_METADATA_BLOCK,
        OBJECT_STACK_BLOCK,
        OBJECT_SP_BLOCK,
} ObjectKind;

/* One stack of a StackBlock: its frames in NettraceParser.frames; depth 0 when dropped. */
typedef struct StackEntry {
        size_t offset;
        uint32_t depth;
} StackEntry;

typedef enum State {
        STATE_MAGIC,         /* "Nettrace" and the length of the signature */
        STATE_SIGNATURE,
        STATE_TAG,           /* the next object, or the end-of-stream marker */
        STATE_TYPE,          /* the type object up to its name's length */
        STATE_TYPE_NAME,     /* the name and the type object's EndObject */
        STATE_TRACE,         /* the Trace body and its EndObject */
        STATE_BLOCK_SIZE,
        STATE_BLOCK_PADDING,
        STATE_BLOCK,         /* a block body and its EndObject */
        STATE_END,
        STATE_FAILED,
} State;

struct NettraceParser {
        NettraceCallbacks callbacks;
        void *userdata;

        State state;
        int error;          /* once failed, every later call returns it */
        uint64_t offset;    /* bytes consumed since the start of the stream */

        /* the unit being collected: @need bytes, @have of them arrived */
        uint8_t *buf;
        size_t have, need, cap;

        ObjectKind kind;
        uint32_t type_version;
        uint32_t type_min_version;
        uint32_t block_size;
        bool header_seen;

        NettraceMetadata *metadata; /* sorted by id */
        size_t n_metadata;
        size_t metadata_bytes;

        uint32_t pointer_size;      /* from the Trace object */
        /* with callbacks.stacks: the stacks since the last sequence point, ids stack_base and up */
        uint32_t stack_base;
        StackEntry *stacks;
        size_t n_stacks, cap_stacks;
        uint64_t *frames;
        size_t n_frames, cap_frames;
        uint64_t stacks_dropped;
};

/**
 * nettrace_varint_decode() - decode one LEB128-style unsigned integer
 * @bits: 32 or 64, the width of the field
 *
 * Seven bits per byte, least significant first, the high bit set on all but
 * the last byte. A value wider than @bits, or more bytes than it takes
 * (5 or 10), is malformed: no two encodings of a header may differ in length
 * without differing in value.
 *
 * Return: 0, NETTRACE_E_INCOMPLETE if @len ends inside the number,
 * NETTRACE_E_MALFORMED.
 */
int nettrace_varint_decode(const uint8_t *buf, size_t len, unsigned bits, uint64_t *ret_value,
                           size_t *ret_consumed) {
        size_t max_bytes = bits == 32 ? 5 : 10;
        uint64_t v = 0;

        for (size_t i = 0; i < max_bytes; i++) {
                uint64_t chunk;
                unsigned shift = (unsigned)(7 * i);

                if (i == len)
                        return NETTRACE_E_INCOMPLETE;
                chunk = buf[i] & 0x7F;
                /* the bits that do not fit the field must be zero */
                if (shift + 7 > bits && chunk >> (bits - shift) != 0)
                        return NETTRACE_E_MALFORMED;
                v |= chunk << shift;
                if (!(buf[i] & 0x80)) {
                        *ret_value = v;
                        *ret_consumed = i + 1;
                        return 0;
                }
        }
        return NETTRACE_E_MALFORMED;
}

static bool take_varint(Cursor *c, unsigned bits, uint64_t *ret) {
        size_t n;

        if (nettrace_varint_decode(c->p, c->left, bits, ret, &n) != 0)
                return false;
        c->p += n;
        c->left -= n;
        return true;
}

static bool take_varint32(Cursor *c, uint32_t *ret) {
        uint64_t v;

        if (!take_varint(c, 32, &v))
                return false;
        *ret = (uint32_t)v;
        return true;
}

static void fields_free(NettraceField *fields, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(fields[i].name);
                fields_free(fields[i].children, fields[i].n_children);
        }
        free(fields);
}

/**
 * nettrace_metadata_done() - free what a definition owns and zero it
 */
void nettrace_metadata_done(NettraceMetadata *m) {
        free(m->provider);
        free(m->event_name);
        fields_free(m->fields, m->n_fields);
        *m = (NettraceMetadata){};
}

/* A name of a definition: the cursor's string, its codes said as the stream's. */
static int take_name(Cursor *c, char **ret) {
        int r = take_utf16z(c, ret);

        if (r == CURSOR_E_TOO_LONG)
                return NETTRACE_E_LIMIT;
        return r > 0 ? NETTRACE_E_MALFORMED : r;
}

static bool type_is_valid(uint32_t t, bool v2) {
        if (t == NETTRACE_TYPE_ARRAY)
                return v2;
        return t == NETTRACE_TYPE_OBJECT || (t >= NETTRACE_TYPE_BOOLEAN && t <= NETTRACE_TYPE_STRING);
}

typedef struct FieldBudget {
        size_t used;
} FieldBudget;

static int parse_field_list(Cursor *c, bool v2, unsigned depth, FieldBudget *budget, NettraceField **ret,
                            size_t *ret_count);

/* V1: type code, the nested list if it is a struct, then the name. */
static int parse_field_v1(Cursor *c, unsigned depth, FieldBudget *budget, NettraceField *f) {
        uint32_t type;
        int r;

        if (!take_u32(c, &type))
                return NETTRACE_E_MALFORMED;
        if (!type_is_valid(type, false))
                return NETTRACE_E_MALFORMED;
        f->type = type;
        if (type == NETTRACE_TYPE_OBJECT) {
                r = parse_field_list(c, false, depth + 1, budget, &f->children, &f->n_children);
                if (r != 0)
                        return r;
        }
        return take_name(c, &f->name);
}

/* V2: its own size (so later writers may append to it), name, type code,
 * element type for arrays, the nested list for structs. */
static int parse_field_v2(Cursor *c, unsigned depth, FieldBudget *budget, NettraceField *f) {
        Cursor body;
        uint32_t size, type, element = NETTRACE_TYPE_EMPTY;
        int r;

        if (!take_u32(c, &size) || size < 4 || !take(c, size - 4, &body.p))
                return NETTRACE_E_MALFORMED;
        body.left = size - 4;

        r = take_name(&body, &f->name);
        if (r != 0)
                return r;
        if (!take_u32(&body, &type) || !type_is_valid(type, true))
                return NETTRACE_E_MALFORMED;
        if (type == NETTRACE_TYPE_ARRAY &&
            (!take_u32(&body, &element) || !type_is_valid(element, false)))
                return NETTRACE_E_MALFORMED;
        f->type = type;
        f->element_type = element;
        if (type == NETTRACE_TYPE_OBJECT || element == NETTRACE_TYPE_OBJECT)
                return parse_field_list(&body, true, depth + 1, budget, &f->children, &f->n_children);
        return 0;
}

static int parse_field_list(Cursor *c, bool v2, unsigned depth, FieldBudget *budget, NettraceField **ret,
                            size_t *ret_count) {
        NettraceField *fields;
        uint32_t count;
        int r = 0;

        if (depth > NETTRACE_DEPTH_MAX)
                return NETTRACE_E_LIMIT;
        if (!take_u32(c, &count))
                return NETTRACE_E_MALFORMED;
        if (count > NETTRACE_FIELDS_MAX - budget->used)
                return NETTRACE_E_LIMIT;
        budget->used += count;
        if (count == 0) {
                *ret = NULL;
                *ret_count = 0;
                return 0;
        }

        fields = calloc(count, sizeof(NettraceField));
        if (!fields)
                return -ENOMEM;
        for (uint32_t i = 0; i < count && r == 0; i++)
                r = v2 ? parse_field_v2(c, depth, budget, &fields[i])
                       : parse_field_v1(c, depth, budget, &fields[i]);
        if (r != 0) {
                fields_free(fields, count);
                return r;
        }
        *ret = fields;
        *ret_count = count;
        return 0;
}

/* The optional v5 tags after the V1 list: OpCode, V2Params; others are skipped. */
static int parse_metadata_tags(Cursor *c, FieldBudget *budget, NettraceMetadata *m, bool *ret_v2) {
        while (c->left > 0) {
                Cursor tag;
                uint32_t size;
                uint8_t kind;
                int r;

                if (!take_u32(c, &size) || !take_u8(c, &kind) || !take(c, size, &tag.p))
                        return NETTRACE_E_MALFORMED;
                tag.left = size;

                if (kind == METADATA_TAG_OPCODE) {
                        if (!take_u8(&tag, &m->opcode))
                                return NETTRACE_E_MALFORMED;
                        m->has_opcode = true;
                } else if (kind == METADATA_TAG_V2_PARAMS) {
                        /* V2Params replaces an empty V1 list; two would be ambiguous */
                        if (*ret_v2 || m->n_fields > 0)
                                return NETTRACE_E_MALFORMED;
                        r = parse_field_list(&tag, true, 0, budget, &m->fields, &m->n_fields);
                        if (r != 0)
                                return r;
                        *ret_v2 = true;
                }
        }
        return 0;
}

static int metadata_decode_fields(Cursor *c, NettraceMetadata *m) {
        FieldBudget budget = {};
        bool v2 = false;
        int r;

        /* some definitions end after the level: events without fields */
        if (c->left == 0)
                return 0;
        r = parse_field_list(c, false, 0, &budget, &m->fields, &m->n_fields);
        if (r != 0)
                return r;
        return parse_metadata_tags(c, &budget, m, &v2);
}

/**
 * nettrace_metadata_decode() - decode one definition from a MetadataBlock blob's payload
 *
 * Return: 0 with *@ret owning its strings and fields, NETTRACE_E_MALFORMED,
 * NETTRACE_E_LIMIT, -ENOMEM. *@ret is untouched on failure.
 */
int nettrace_metadata_decode(const uint8_t *payload, size_t size, NettraceMetadata *ret) {
        _cleanup_(nettrace_metadata_done) NettraceMetadata m = {};
        Cursor c = { payload, size };
        uint64_t keywords;
        int r;

        if (!take_u32(&c, &m.id))
                return NETTRACE_E_MALFORMED;
        r = take_name(&c, &m.provider);
        if (r != 0)
                return r;
        if (!take_u32(&c, &m.event_id))
                return NETTRACE_E_MALFORMED;
        r = take_name(&c, &m.event_name);
        if (r != 0)
                return r;
        if (!take_u64(&c, &keywords) || !take_u32(&c, &m.version) || !take_u32(&c, &m.level))
                return NETTRACE_E_MALFORMED;
        m.keywords = keywords;

        r = metadata_decode_fields(&c, &m);
        if (r != 0)
                return r;

        *ret = m;
        m = (NettraceMetadata){};
        return 0;
}

static const NettraceMetadata *metadata_find(const NettraceParser *p, uint32_t id, size_t *ret_index) {
        size_t lo = 0, hi = p->n_metadata;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (p->metadata[mid].id == id)
                        return &p->metadata[mid];
                if (p->metadata[mid].id < id)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (ret_index)
                *ret_index = lo;
        return NULL;
}

/**
 * nettrace_metadata_lookup() - the definition of the events with metadata id @id
 *
 * Return: the definition, valid until the parser is freed, or NULL.
 */
const NettraceMetadata *nettrace_metadata_lookup(const NettraceParser *p, uint32_t id) {
        return metadata_find(p, id, NULL);
}

static int metadata_add(NettraceParser *p, const uint8_t *payload, size_t size) {
        _cleanup_(nettrace_metadata_done) NettraceMetadata m = {};
        NettraceMetadata *grown;
        size_t index = 0;
        int r;

        if (p->n_metadata >= NETTRACE_METADATA_MAX || size > NETTRACE_METADATA_BYTES_MAX - p->metadata_bytes)
                return NETTRACE_E_LIMIT;
        r = nettrace_metadata_decode(payload, size, &m);
        if (r != 0)
                return r;
        /* id 0 marks definitions themselves; a redefinition would retype earlier events */
        if (m.id == 0 || metadata_find(p, m.id, &index))
                return NETTRACE_E_MALFORMED;

        grown = reallocarray(p->metadata, p->n_metadata + 1, sizeof(NettraceMetadata));
        if (!grown)
                return -ENOMEM;
        p->metadata = grown;
        memmove(&p->metadata[index + 1], &p->metadata[index], (p->n_metadata - index) * sizeof(NettraceMetadata));
        p->metadata[index] = m;
        m = (NettraceMetadata){};
        p->n_metadata++;
        p->metadata_bytes += size;

        if (p->callbacks.metadata)
                return p->callbacks.metadata(&p->metadata[index], p->userdata);
        return 0;
}

/* One blob of a block with header compression; @e holds the previous header. */
static int event_decode_compressed(Cursor *c, NettraceEvent *e) {
        const uint8_t *guid, *payload;
        uint64_t v;
        uint32_t delta;
        uint8_t flags;

        if (!take_u8(c, &flags))
                return NETTRACE_E_MALFORMED;
        if ((flags & 0x01) && !take_varint32(c, &e->metadata_id))
                return NETTRACE_E_MALFORMED;
        if (flags & 0x02) {
                if (!take_varint32(c, &delta) || !take_varint(c, 64, &e->capture_thread_id) ||
                    !take_varint32(c, &e->processor))
                        return NETTRACE_E_MALFORMED;
                e->sequence += delta; /* counters wrap, as the runtime's do */
        }
        if (e->metadata_id != 0)
                e->sequence++;
        if ((flags & 0x04) && !take_varint(c, 64, &e->thread_id))
                return NETTRACE_E_MALFORMED;
        if ((flags & 0x08) && !take_varint32(c, &e->stack_id))
                return NETTRACE_E_MALFORMED;
        if (!take_varint(c, 64, &v))
                return NETTRACE_E_MALFORMED;
        e->timestamp += v;
        if (flags & 0x10) {
                if (!take(c, 16, &guid))
                        return NETTRACE_E_MALFORMED;
                memcpy(e->activity_id, guid, 16);
        }
        if (flags & 0x20) {
                if (!take(c, 16, &guid))
                        return NETTRACE_E_MALFORMED;
                memcpy(e->related_activity_id, guid, 16);
        }
        e->sorted = flags & 0x40;
        if ((flags & 0x80) && !take_varint32(c, &delta))
                return NETTRACE_E_MALFORMED;
        if (flags & 0x80)
                e->payload_size = delta;
        if (!take(c, e->payload_size, &payload))
                return NETTRACE_E_MALFORMED;
        e->payload = payload;
        return 0;
}

/* One blob of a block without compression, padded to 4 bytes from @block:
 * size, metadata id (high bit: sorted), sequence, thread, capture thread,
 * processor, stack id, timestamp, two GUIDs, payload size, payload. */
static int event_decode_plain(Cursor *c, const uint8_t *block, NettraceEvent *e) {
        const uint8_t *h;
        uint32_t size, id, payload_size;
        size_t padding;

        if (!take_u32(c, &size) || size < EVENT_HEADER_SIZE || !take(c, size, &h))
                return NETTRACE_E_MALFORMED;

        id = get_u32(h);
        e->metadata_id = id & 0x7FFFFFFFu;
        e->sorted = id >> 31;
        e->sequence = get_u32(h + 4);
        e->thread_id = get_u64(h + 8);
        e->capture_thread_id = get_u64(h + 16);
        e->processor = get_u32(h + 24);
        e->stack_id = get_u32(h + 28);
        e->timestamp = get_u64(h + 32);
        memcpy(e->activity_id, h + 40, 16);
        memcpy(e->related_activity_id, h + 56, 16);
        payload_size = get_u32(h + 72);
        if (payload_size > size - EVENT_HEADER_SIZE)
                return NETTRACE_E_MALFORMED;
        e->payload = h + EVENT_HEADER_SIZE;
        e->payload_size = payload_size;

        /* the last blob's padding may be cut off by the end of the block */
        padding = (size_t)(4 - (c->p - block) % 4) % 4;
        if (padding > c->left)
                padding = c->left;
        c->p += padding;
        c->left -= padding;
        return 0;
}

/* The frames of the event's stack, when they are kept and known. */
static void stack_lookup(const NettraceParser *p, NettraceEvent *e) {
        const StackEntry *s;

        e->stack = NULL;
        e->stack_depth = 0;
        if (!p->callbacks.stacks || e->stack_id < p->stack_base || e->stack_id - p->stack_base >= p->n_stacks)
                return;
        s = &p->stacks[e->stack_id - p->stack_base];
        if (s->depth == 0)
                return;
        e->stack = p->frames + s->offset;
        e->stack_depth = s->depth;
}

static int event_dispatch(NettraceParser *p, ObjectKind kind, NettraceEvent *e) {
        if (kind == OBJECT_METADATA_BLOCK) {
                if (e->metadata_id != 0)
                        return NETTRACE_E_MALFORMED;
                return metadata_add(p, e->payload, e->payload_size);
        }
        /* id 0 is for definitions only */
        if (e->metadata_id == 0)
                return NETTRACE_E_MALFORMED;
        e->metadata = nettrace_metadata_lookup(p, e->metadata_id);
        stack_lookup(p, e);
        if (p->callbacks.event)
                return p->callbacks.event(e, p->userdata);
        return 0;
}

/* EventBlock and MetadataBlock: a header, then blobs up to the end. */
static int parse_event_block(NettraceParser *p, ObjectKind kind, const uint8_t *block, size_t size) {
        Cursor c = { block, size };
        NettraceEvent e = {};
        uint16_t header_size, flags;
        const uint8_t *skip;
        int r;

        if (!take_u16(&c, &header_size) || !take_u16(&c, &flags) || header_size < BLOCK_HEADER_MIN ||
            !take(&c, header_size - 4, &skip))
                return NETTRACE_E_MALFORMED;

        while (c.left > 0) {
                /* the previous header carries over only within a block */
                r = (flags & 1) ? event_decode_compressed(&c, &e) : event_decode_plain(&c, block, &e);
                if (r != 0)
                        return r;
                e.metadata = NULL;
                r = event_dispatch(p, kind, &e);
                if (r != 0)
                        return r;
        }
        return 0;
}

static void stacks_forget(NettraceParser *p) {
        p->n_stacks = 0;
        p->n_frames = 0;
}

/* What the parser keeps at most between two sequence points (NettraceCallbacks.stack_frames_max). */
static size_t frames_max(const NettraceParser *p) {
        return p->callbacks.stack_frames_max ? MIN(p->callbacks.stack_frames_max, (size_t)NETTRACE_STACK_FRAMES_MAX)
                                             : NETTRACE_STACK_FRAMES_MAX;
}

static size_t stacks_max(const NettraceParser *p) {
        return p->callbacks.stack_frames_max ? MIN(p->callbacks.stack_frames_max, (size_t)NETTRACE_STACKS_MAX)
                                             : NETTRACE_STACKS_MAX;
}

/*
 * Keeps one stack: its instruction pointers, as 64-bit values. Past the
 * limits it is dropped: its id stays taken, so later ids still map right,
 * and events carrying it get no frames.
 */
static int stack_keep(NettraceParser *p, const uint8_t *ips, uint32_t size) {
        size_t depth = size / p->pointer_size;
        StackEntry *entry;

        if (array_reserve((void **)&p->stacks, &p->cap_stacks, p->n_stacks, sizeof(StackEntry)) < 0)
                return -ENOMEM;
        entry = &p->stacks[p->n_stacks++];
        *entry = (StackEntry){ .offset = p->n_frames };
        if (depth == 0)
                return 0;
        if (depth > frames_max(p) - p->n_frames) {
                p->stacks_dropped++;
                return 0;
        }
        if (array_reserve((void **)&p->frames, &p->cap_frames, p->n_frames + depth - 1, sizeof(uint64_t)) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < depth; i++)
                p->frames[p->n_frames + i] = p->pointer_size == 8 ? get_u64(ips + 8 * i) : get_u32(ips + 4 * i);
        p->n_frames += depth;
        entry->depth = (uint32_t)depth;
        return 0;
}

/*
 * StackBlock: the first id, a count, then each stack as its size and its
 * instruction pointers. Ids continue from block to block until a sequence
 * point resets them; a block that does not continue starts the table anew.
 * Without callbacks.stacks the framing is checked and the stacks skipped.
 */
static int parse_stack_block(NettraceParser *p, const uint8_t *block, size_t size) {
        Cursor c = { block, size };
        uint32_t first_id, count;
        int r;

        if (!take_u32(&c, &first_id) || !take_u32(&c, &count))
                return NETTRACE_E_MALFORMED;
        if (p->callbacks.stacks && (p->n_stacks == 0 || first_id != p->stack_base + p->n_stacks)) {
                stacks_forget(p);
                p->stack_base = first_id;
        }
        /* each stack takes at least its 4-byte size, so this loop is bounded by @size */
        for (uint32_t i = 0; i < count; i++) {
                const uint8_t *stack;
                uint32_t stack_size;

                if (!take_u32(&c, &stack_size) || !take(&c, stack_size, &stack))
                        return NETTRACE_E_MALFORMED;
                if (!p->callbacks.stacks)
                        continue;
                if (stack_size % p->pointer_size != 0)
                        return NETTRACE_E_MALFORMED;
                if (p->n_stacks >= stacks_max(p) || first_id + i < first_id) {
                        p->stacks_dropped++;
                        continue;
                }
                r = stack_keep(p, stack, stack_size);
                if (r != 0)
                        return r;
        }
        return c.left == 0 ? 0 : NETTRACE_E_MALFORMED;
}

/* A sequence point: the runtime numbers stacks anew after it. Its thread list is not used. */
static int parse_sp_block(NettraceParser *p, const uint8_t *block, size_t size) {
        Cursor c = { block, size };
        uint64_t timestamp;
        uint32_t threads;

        if (!take_u64(&c, &timestamp) || !take_u32(&c, &threads))
                return NETTRACE_E_MALFORMED;
        /* thread id (8) and sequence number (4) per thread */
        if ((uint64_t)threads * 12 != c.left)
                return NETTRACE_E_MALFORMED;
        stacks_forget(p);
        return 0;
}

static void expect(NettraceParser *p, State state, size_t need) {
        p->state = state;
        p->need = need;
        p->have = 0;
}

static int step_magic(NettraceParser *p) {
        uint32_t length;

        if (memcmp(p->buf, "Nettrace", 8) != 0)
                return NETTRACE_E_MALFORMED;
        length = get_u32(p->buf + 8);
        /* v6 puts a reserved 0 where v4/v5 have the signature's length */
        if (length == 0)
                return NETTRACE_E_UNSUPPORTED;
        if (length != SIGNATURE_SIZE)
                return NETTRACE_E_MALFORMED;
        expect(p, STATE_SIGNATURE, SIGNATURE_SIZE);
        return 0;
}

static int step_tag(NettraceParser *p) {
        if (p->buf[0] == TAG_NULL_REFERENCE) {
                if (!p->header_seen)
                        return NETTRACE_E_MALFORMED;
                /* any byte after the marker is an error */
                expect(p, STATE_END, 1);
                return 0;
        }
        if (p->buf[0] != TAG_BEGIN_PRIVATE_OBJECT)
                return NETTRACE_E_MALFORMED;
        expect(p, STATE_TYPE, TYPE_HEAD_SIZE);
        return 0;
}

static int step_type(NettraceParser *p) {
        uint32_t name_size = get_u32(p->buf + 10);

        if (p->buf[0] != TAG_BEGIN_PRIVATE_OBJECT || p->buf[1] != TAG_NULL_REFERENCE)
                return NETTRACE_E_MALFORMED;
        if (name_size == 0 || name_size > TYPE_NAME_MAX)
                return NETTRACE_E_UNSUPPORTED;
        p->type_version = get_u32(p->buf + 2);
        p->type_min_version = get_u32(p->buf + 6);
        expect(p, STATE_TYPE_NAME, name_size + 1);
        return 0;
}

static bool name_is(const NettraceParser *p, const char *name) {
        return p->need - 1 == strlen(name) && memcmp(p->buf, name, p->need - 1) == 0;
}

static int step_type_name(NettraceParser *p) {
        static const struct {
                const char *name;
                ObjectKind kind;
        } kinds[] = {
                { "Trace", OBJECT_TRACE },
                { "EventBlock", OBJECT_EVENT_BLOCK },
                { "MetadataBlock", OBJECT_METADATA_BLOCK },
                { "StackBlock", OBJECT_STACK_BLOCK },
                { "SPBlock", OBJECT_SP_BLOCK },
        };
        size_t i;

        if (p->buf[p->need - 1] != TAG_END_OBJECT)
                return NETTRACE_E_MALFORMED;
        for (i = 0; i < ELEMENTSOF(kinds) && !name_is(p, kinds[i].name); i++)
                ;
        /* an object we cannot size cannot be skipped */
        if (i == ELEMENTSOF(kinds))
                return NETTRACE_E_UNSUPPORTED;
        p->kind = kinds[i].kind;

        /* the Trace object comes first and once; its v4 body is what we read */
        if ((p->kind == OBJECT_TRACE) == p->header_seen)
                return NETTRACE_E_MALFORMED;
        if (p->kind == OBJECT_TRACE) {
                if (p->type_version < 4 || p->type_min_version > 4)
                        return NETTRACE_E_UNSUPPORTED;
                expect(p, STATE_TRACE, TRACE_BODY_SIZE + 1);
                return 0;
        }
        if (p->type_version < 2 || p->type_min_version > 2)
                return NETTRACE_E_UNSUPPORTED;
        expect(p, STATE_BLOCK_SIZE, 4);
        return 0;
}

static int step_trace(NettraceParser *p) {
        NettraceHeader h = { .version = p->type_version };
        const uint8_t *b = p->buf;

        if (b[TRACE_BODY_SIZE] != TAG_END_OBJECT)
                return NETTRACE_E_MALFORMED;
        for (size_t i = 0; i < 8; i++)
                h.sync_time[i] = get_u16(b + 2 * i);
        h.sync_qpc = (int64_t)get_u64(b + 16);
        h.qpc_frequency = (int64_t)get_u64(b + 24);
        h.pointer_size = get_u32(b + 32);
        h.pid = get_u32(b + 36);
        h.processors = get_u32(b + 40);
        h.sampling_rate_ns = get_u32(b + 44);
        if (h.qpc_frequency <= 0 || (h.pointer_size != 4 && h.pointer_size != 8))
                return NETTRACE_E_MALFORMED;

        p->header_seen = true;
        p->pointer_size = h.pointer_size;
        expect(p, STATE_TAG, 1);
        if (p->callbacks.header)
                return p->callbacks.header(&h, p->userdata);
        return 0;
}

static int step_block_size(NettraceParser *p) {
        p->block_size = get_u32(p->buf);
        if (p->block_size > NETTRACE_BLOCK_MAX)
                return NETTRACE_E_LIMIT;
        /* "Nettrace" is 8 bytes, so file offsets align as the FastSerialization ones do */
        expect(p, STATE_BLOCK_PADDING, (size_t)(4 - p->offset % 4) % 4);
        return 0;
}

static int step_block_padding(NettraceParser *p) {
        for (size_t i = 0; i < p->need; i++)
                if (p->buf[i] != 0)
                        return NETTRACE_E_MALFORMED;
        expect(p, STATE_BLOCK, (size_t)p->block_size + 1);
        return 0;
}

static int step_block(NettraceParser *p) {
        size_t size = p->block_size;
        int r;

        if (p->buf[size] != TAG_END_OBJECT)
                return NETTRACE_E_MALFORMED;
        switch (p->kind) {
        case OBJECT_EVENT_BLOCK:
        case OBJECT_METADATA_BLOCK:
                r = parse_event_block(p, p->kind, p->buf, size);
                break;
        case OBJECT_STACK_BLOCK:
                r = parse_stack_block(p, p->buf, size);
                break;
        case OBJECT_SP_BLOCK:
                r = parse_sp_block(p, p->buf, size);
                break;
        default:
                r = NETTRACE_E_MALFORMED;
        }
        if (r != 0)
                return r;
        expect(p, STATE_TAG, 1);
        return 0;
}

/* Handles the complete unit in p->buf and sets up the next one. */
static int step(NettraceParser *p) {
        switch (p->state) {
        case STATE_MAGIC:
                return step_magic(p);
        case STATE_SIGNATURE:
                if (memcmp(p->buf, SIGNATURE, SIGNATURE_SIZE) != 0)
                        return NETTRACE_E_MALFORMED;
                expect(p, STATE_TAG, 1);
                return 0;
        case STATE_TAG:
                return step_tag(p);
        case STATE_TYPE:
                return step_type(p);
        case STATE_TYPE_NAME:
                return step_type_name(p);
        case STATE_TRACE:
                return step_trace(p);
        case STATE_BLOCK_SIZE:
                return step_block_size(p);
        case STATE_BLOCK_PADDING:
                return step_block_padding(p);
        case STATE_BLOCK:
                return step_block(p);
        default:
                return NETTRACE_E_MALFORMED;
        }
}

/* Makes room for @n more bytes of the current unit; never beyond the unit. */
static int buffer_reserve(NettraceParser *p, size_t n) {
        size_t want = p->have + n, cap;
        uint8_t *grown;

        if (want <= p->cap)
                return 0;
        /* grow with the bytes that arrived, not with what a size field claims */
        cap = p->cap < 4096 ? 4096 : p->cap * 2;
        if (cap < want)
                cap = want;
        if (cap > p->need)
                cap = p->need;
        grown = realloc(p->buf, cap);
        if (!grown)
                return -ENOMEM;
        p->buf = grown;
        p->cap = cap;
        return 0;
}

static int fail(NettraceParser *p, int error) {
        p->state = STATE_FAILED;
        p->error = error;
        return error;
}

/**
 * nettrace_feed() - parse the next @size bytes of the stream
 *
 * Bytes may arrive in any chunks; callbacks run as soon as a unit (the trace
 * header, a block) is complete. A failure is final: every later call returns
 * it again.
 *
 * Return: 0, NETTRACE_E_MALFORMED (also for bytes after the end-of-stream
 * marker), NETTRACE_E_UNSUPPORTED, NETTRACE_E_LIMIT, -ENOMEM, or what a
 * callback returned.
 */
int nettrace_feed(NettraceParser *p, const void *data, size_t size) {
        const uint8_t *in = data;
        int r;

        if (p->state == STATE_FAILED)
                return p->error;

        for (;;) {
                size_t n;

                if (p->have == p->need) {
                        r = step(p);
                        if (r != 0)
                                return fail(p, r);
                        continue;
                }
                if (size == 0)
                        return 0;
                if (p->state == STATE_END)
                        return fail(p, NETTRACE_E_MALFORMED);

                n = p->need - p->have < size ? p->need - p->have : size;
                r = buffer_reserve(p, n);
                if (r != 0)
                        return fail(p, r);
                memcpy(p->buf + p->have, in, n);
                p->have += n;
                p->offset += n;
                in += n;
                size -= n;
        }
}

/**
 * nettrace_finish() - the stream's connection was closed: was the stream whole?
 *
 * Return: 0 if the end-of-stream marker was seen, NETTRACE_E_INCOMPLETE if the
 * stream stopped before it, or the error that stopped the parser.
 */
int nettrace_finish(NettraceParser *p) {
        if (p->state == STATE_FAILED)
                return p->error;
        return p->state == STATE_END ? 0 : NETTRACE_E_INCOMPLETE;
}

bool nettrace_ended(const NettraceParser *p) {
        return p->state == STATE_END;
}

uint64_t nettrace_offset(const NettraceParser *p) {
        return p->offset;
}

/* SYSTEMTIME's own ranges; the target writes the clock sync, and timegm() must not overflow on it. */
static bool sync_time_is_valid(const uint16_t t[8]) {
        return t[0] >= 1601 && t[0] <= 9999 && t[1] >= 1 && t[1] <= 12 && t[3] >= 1 && t[3] <= 31 && t[4] <= 23 &&
               t[5] <= 59 && t[6] <= 60 && t[7] <= 999;
}

/**
 * nettrace_time_nsec() - an event's @timestamp as nanoseconds since the epoch
 *
 * From the Trace object's clock sync: its UTC time (to the millisecond) at
 * sync_qpc, plus the ticks since at qpc_frequency. Pure: no time zone. A
 * clock sync outside SYSTEMTIME's ranges counts as the epoch, and the sum is
 * held to what an int64_t holds: a target's header never overflows it.
 */
int64_t nettrace_time_nsec(const NettraceHeader *h, uint64_t timestamp) {
        struct tm tm = {
                .tm_year = h->sync_time[0] - 1900,
                .tm_mon = h->sync_time[1] - 1,
                .tm_mday = h->sync_time[3],
                .tm_hour = h->sync_time[4],
                .tm_min = h->sync_time[5],
                .tm_sec = h->sync_time[6],
        };
        __int128 nsec = 0;

        if (sync_time_is_valid(h->sync_time))
                nsec = (__int128)timegm(&tm) * 1000000000 + (__int128)h->sync_time[7] * 1000000;
        if (h->qpc_frequency > 0)
                nsec += ((__int128)(int64_t)timestamp - h->sync_qpc) * 1000000000 / h->qpc_frequency;
        if (nsec > INT64_MAX)
                return INT64_MAX;
        if (nsec < INT64_MIN)
                return INT64_MIN;
        return (int64_t)nsec;
}

/* nettrace_time_nsec() in microseconds. */
int64_t nettrace_time_usec(const NettraceHeader *h, uint64_t timestamp) {
        return nettrace_time_nsec(h, timestamp) / 1000;
}

/* Stacks not kept for the limits (NETTRACE_STACKS_MAX, NETTRACE_STACK_FRAMES_MAX). */
uint64_t nettrace_stacks_dropped(const NettraceParser *p) {
        return p->stacks_dropped;
}

/**
 * nettrace_parser_new() - a parser for one stream
 * @callbacks: any of them may be NULL; copied
 *
 * Return: 0 or -ENOMEM.
 */
int nettrace_parser_new(const NettraceCallbacks *callbacks, void *userdata, NettraceParser **ret) {
        NettraceParser *p;

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        if (callbacks)
                p->callbacks = *callbacks;
        p->userdata = userdata;
        expect(p, STATE_MAGIC, 8 + 4);
        *ret = p;
        return 0;
}

NettraceParser *nettrace_parser_free(NettraceParser *p) {
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n_metadata; i++)
                nettrace_metadata_done(&p->metadata[i]);
        free(p->metadata);
        free(p->stacks);
        free(p->frames);
        free(p->buf);
        free(p);
        return NULL;
}
