/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes the dsctl <-> dsagent framing (common/wire.h). The agent runs as root
 * and decodes frames from any local user; dsctl decodes the agent's replies.
 *
 * Input: the bytes received, starting at a frame.
 *
 * Invariants: wire_frame_peek() and wire_frame_wanted() agree; only an exact
 * frame decodes; every field is reachable through exactly the getter of its
 * kind and through no other; getters return what the frame holds; and
 * re-encoding a decoded message with WireWriter, field by field in the same
 * order, reproduces the frame byte for byte.
 */
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "common/text.h"
#include "common/wire.h"

static uint32_t le32(const uint8_t *p) {
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* 64 KiB: static so that each run does not allocate and clear it */
static WireWriter writer;

static const WireField *find_field(const WireMessage *m, unsigned tag) {
        for (size_t i = 0; i < m->n_fields; i++)
                if (m->fields[i].tag == tag)
                        return &m->fields[i];
        return NULL;
}

/* Calls every getter for every tag, checks the results and returns how the
 * field is reachable: -1 if absent, else the one WireFieldKind that worked. */
static int check_getters(const WireMessage *m, const uint8_t *frame, size_t len, unsigned tag) {
        const WireField *f = find_field(m, tag);
        const uint8_t *bytes = NULL;
        size_t bytes_size = 0;
        uint64_t u64 = 0;
        uint32_t u32 = 0;
        char *s = NULL;
        int kind = -1, n_ok = 0, r;

        r = wire_message_get_u32(m, (WireTag)tag, &u32);
        fuzz_assert(r == 0 || r == WIRE_E_MISSING);
        if (r == 0) {
                fuzz_assert(f && f->size == 4 && u32 == le32(f->value));
                kind = WIRE_KIND_U32;
                n_ok++;
        }

        r = wire_message_get_u64(m, (WireTag)tag, &u64);
        fuzz_assert(r == 0 || r == WIRE_E_MISSING);
        if (r == 0) {
                fuzz_assert(f && f->size == 8);
                fuzz_assert(u64 == ((uint64_t)le32(f->value) | (uint64_t)le32(f->value + 4) << 32));
                kind = WIRE_KIND_U64;
                n_ok++;
        }

        r = wire_message_get_string(m, (WireTag)tag, &s);
        fuzz_assert(r == 0 || r == WIRE_E_MISSING);
        if (r == 0) {
                fuzz_assert(f && s);
                fuzz_assert(strlen(s) == f->size); /* no NUL inside */
                fuzz_assert(memcmp(s, f->value, f->size) == 0);
                fuzz_assert(f->size <= WIRE_STRING_MAX);
                /* STRING is UTF-8; TEXT (a process's facts) any bytes but NUL */
                fuzz_assert(wire_tag_kind((WireTag)tag) == WIRE_KIND_TEXT || utf8_is_valid(s, f->size));
                free(s);
                kind = WIRE_KIND_STRING;
                n_ok++;
        }

        r = wire_message_get_bytes(m, (WireTag)tag, &bytes, &bytes_size);
        fuzz_assert(r == 0 || r == WIRE_E_MISSING);
        if (r == 0) {
                fuzz_assert(f && bytes == f->value && bytes_size == f->size);
                kind = WIRE_KIND_COOKIE; /* COOKIE or BYTES: both are written back as bytes */
                n_ok++;
        }

        if (f) {
                fuzz_assert(n_ok == 1);
                fuzz_assert(f->value >= frame + WIRE_HEADER_SIZE + WIRE_FIELD_HEADER_SIZE);
                fuzz_assert(f->size <= len - (size_t)(f->value - frame));
        } else
                fuzz_assert(n_ok == 0);
        return kind;
}

static void check_message(const WireMessage *m, const uint8_t *frame, size_t len) {
        int kinds[_WIRE_TAG_MAX];
        const uint8_t *out;
        size_t out_size;
        uint64_t seen = 0; /* tags go up to 63 (wire.h): a 32-bit mask would fold 35 onto 3 */
        int r;

        fuzz_assert(m->type == (uint16_t)(frame[6] | frame[7] << 8));
        fuzz_assert(m->n_fields <= WIRE_FIELDS_MAX);

        for (unsigned tag = 1; tag < _WIRE_TAG_MAX; tag++)
                kinds[tag] = check_getters(m, frame, len, tag);

        /* tag 0 is never decoded, so nothing is reachable under it */
        fuzz_assert(check_getters(m, frame, len, 0) == -1);

        wire_writer_begin(&writer, (WireType)m->type);
        for (size_t i = 0; i < m->n_fields; i++) {
                const WireField *f = &m->fields[i];
                uint32_t u32;
                uint64_t u64;
                char *s;

                fuzz_assert(f->tag >= 1 && f->tag < _WIRE_TAG_MAX);
                fuzz_assert(!(seen & (UINT64_C(1) << f->tag)));
                seen |= UINT64_C(1) << f->tag;

                switch (kinds[f->tag]) {
                case WIRE_KIND_U32:
                        fuzz_assert(wire_message_get_u32(m, (WireTag)f->tag, &u32) == 0);
                        wire_writer_put_u32(&writer, (WireTag)f->tag, u32);
                        break;
                case WIRE_KIND_U64:
                        fuzz_assert(wire_message_get_u64(m, (WireTag)f->tag, &u64) == 0);
                        wire_writer_put_u64(&writer, (WireTag)f->tag, u64);
                        break;
                case WIRE_KIND_STRING:
                        fuzz_assert(wire_message_get_string(m, (WireTag)f->tag, &s) == 0);
                        wire_writer_put_string(&writer, (WireTag)f->tag, s);
                        free(s);
                        break;
                case WIRE_KIND_COOKIE:
                        wire_writer_put_bytes(&writer, (WireTag)f->tag, f->value, f->size);
                        break;
                default:
                        fuzz_assert(!"a decoded field has no getter");
                }
        }

        r = wire_writer_finish(&writer, &out, &out_size);
        fuzz_assert(r == 0);
        fuzz_assert(out_size == len);
        if (memcmp(out, frame, len) != 0)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        WireMessage m;
        size_t frame_size = 0;
        int peek, r;

        peek = wire_frame_peek(data, size, &frame_size);
        fuzz_assert(peek == 0 || peek == WIRE_E_TRUNCATED || peek == WIRE_E_MALFORMED);
        if (peek == 0) {
                fuzz_assert(frame_size >= WIRE_HEADER_SIZE && frame_size <= size);
                fuzz_assert(frame_size <= WIRE_FRAME_MAX);
                fuzz_assert(wire_frame_wanted(data, size) == frame_size);
        } else if (peek == WIRE_E_TRUNCATED) {
                /* a reader that reads what is wanted makes progress, within the frame limit */
                size_t wanted = wire_frame_wanted(data, size);
                fuzz_assert(wanted > size && wanted <= WIRE_FRAME_MAX);
        }

        /* the whole input as one frame: only an exact frame decodes */
        r = wire_message_decode(data, size, &m);
        fuzz_assert(r == 0 || r == WIRE_E_TRUNCATED || r == WIRE_E_MALFORMED || r == WIRE_E_VERSION);
        if (peek != 0)
                fuzz_assert(r == peek);
        else if (frame_size != size)
                fuzz_assert(r == WIRE_E_MALFORMED);
        if (r == 0)
                check_message(&m, data, size);

        /* what the agent does: peek, then decode just the frame */
        if (peek == 0 && frame_size != size) {
                r = wire_message_decode(data, frame_size, &m);
                fuzz_assert(r == 0 || r == WIRE_E_MALFORMED || r == WIRE_E_VERSION);
                if (r == 0)
                        check_message(&m, data, frame_size);
        }

        /* the header alone, as dsctl reads it first */
        if (size >= WIRE_HEADER_SIZE) {
                r = wire_frame_peek(data, WIRE_HEADER_SIZE, &frame_size);
                fuzz_assert(r == 0 || r == WIRE_E_TRUNCATED || r == WIRE_E_MALFORMED);
                if (peek == WIRE_E_MALFORMED)
                        fuzz_assert(r == WIRE_E_MALFORMED);
                if (r == 0)
                        fuzz_assert(frame_size == WIRE_HEADER_SIZE);
        }
        return 0;
}
