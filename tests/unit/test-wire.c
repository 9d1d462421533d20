/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The dsctl <-> dsagent protocol: byte-exact frames and everything the decoder must refuse */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "common/wire.h"

static WireWriter w;

static size_t frame_of(const uint8_t **ret) {
        size_t size = 0;
        check(wire_writer_finish(&w, ret, &size) == 0);
        return size;
}

static void test_info_request_vector(void) {
        static const uint8_t expected[] = {
                'D', 'S', 'A', 'G', 0x01, 0x00, 0x02, 0x00, 0x0A, 0x00, 0x00, 0x00, /* header */
                0x01, 0x00, 0x04, 0x00, 0x00, 0x00, 0xD2, 0x04, 0x00, 0x00,         /* PID 1234 */
        };
        const uint8_t *frame;
        WireMessage m;
        uint32_t pid = 0;
        size_t size, wanted;

        wire_writer_begin(&w, WIRE_REQUEST_INFO);
        wire_writer_put_u32(&w, WIRE_TAG_PID, 1234);
        size = frame_of(&frame);
        check(size == sizeof(expected) && memcmp(frame, expected, size) == 0);

        check(wire_frame_peek(frame, size, &wanted) == 0 && wanted == size);
        check(wire_frame_peek(frame, 5, &wanted) == WIRE_E_TRUNCATED);
        check(wire_frame_wanted(frame, 5) == WIRE_HEADER_SIZE);
        check(wire_frame_wanted(frame, 12) == size);
        check(wire_message_decode(frame, size, &m) == 0);
        check(m.type == WIRE_REQUEST_INFO && m.n_fields == 1);
        check(wire_message_get_u32(&m, WIRE_TAG_PID, &pid) == 0 && pid == 1234);
        check(wire_message_get_u64(&m, WIRE_TAG_PID, &(uint64_t){ 0 }) == WIRE_E_MISSING);
        check(wire_message_get_u32(&m, WIRE_TAG_UID, &pid) == WIRE_E_MISSING);
}

static void test_round_trip_all_kinds(void) {
        const uint8_t *frame, *bytes;
        uint8_t cookie[16] = { 1, 2, 3 };
        char *s = NULL;
        uint64_t id = 0;
        WireMessage m;
        size_t size, n;

        wire_writer_begin(&w, WIRE_REPLY_PROCESS);
        wire_writer_put_u64(&w, WIRE_TAG_REQUEST_ID, 0x0102030405060708ULL);
        wire_writer_put_string(&w, WIRE_TAG_COMMAND_LINE, "dotnet app.dll \xc3\xa9");
        wire_writer_put_string(&w, WIRE_TAG_UNIT, NULL); /* absent, not empty */
        wire_writer_put_bytes(&w, WIRE_TAG_COOKIE, cookie, sizeof(cookie));
        size = frame_of(&frame);
        check(wire_message_decode(frame, size, &m) == 0 && m.n_fields == 3);
        check(wire_message_get_u64(&m, WIRE_TAG_REQUEST_ID, &id) == 0 && id == 0x0102030405060708ULL);
        check(wire_message_get_string(&m, WIRE_TAG_COMMAND_LINE, &s) == 0);
        check(s && strcmp(s, "dotnet app.dll \xc3\xa9") == 0);
        free(s);
        check(wire_message_get_string(&m, WIRE_TAG_UNIT, &s) == WIRE_E_MISSING);
        check(wire_message_get_bytes(&m, WIRE_TAG_COOKIE, &bytes, &n) == 0 && n == 16 && bytes[2] == 3);
}

/* PROGRESS carries the agent's deadline and a dump's bytes; REMOVE_DUMP a path; a u64 deadline is 8 bytes. */
static void test_progress_and_remove(void) {
        const uint8_t *frame;
        uint64_t deadline = 0, bytes = 0;
        WireMessage m;
        size_t size;

        wire_writer_begin(&w, WIRE_REPLY_PROGRESS);
        wire_writer_put_u64(&w, WIRE_TAG_DEADLINE, 330000000);
        wire_writer_put_u64(&w, WIRE_TAG_SIZE, 4096);
        size = frame_of(&frame);
        check(wire_message_decode(frame, size, &m) == 0 && m.type == WIRE_REPLY_PROGRESS);
        check(wire_message_get_u64(&m, WIRE_TAG_DEADLINE, &deadline) == 0 && deadline == 330000000);
        check(wire_message_get_u64(&m, WIRE_TAG_SIZE, &bytes) == 0 && bytes == 4096);

        wire_writer_begin(&w, WIRE_REQUEST_REMOVE_DUMP);
        wire_writer_put_u32(&w, WIRE_TAG_PROGRESS, 1);
        wire_writer_put_string(&w, WIRE_TAG_PATH, "dump.x");
        size = frame_of(&frame);
        check(wire_message_decode(frame, size, &m) == 0 && m.type == WIRE_REQUEST_REMOVE_DUMP);

        /* the writer keeps to the kinds: a DEADLINE is 8 bytes */
        wire_writer_begin(&w, WIRE_REPLY_PROGRESS);
        wire_writer_put_u32(&w, WIRE_TAG_DEADLINE, 1);
        check(wire_writer_finish(&w, &frame, &size) != 0);
}

static void test_unit_names(void) {
        char name[WIRE_UNIT_MAX + 2];

        check(wire_unit_name_is_valid("orders.service", 14));
        check(wire_unit_name_is_valid("session-3.scope", 15));
        check(wire_unit_name_is_valid("getty@tty1.service", 18));
        check(wire_unit_name_is_valid("user-1000\\x2d.slice-x.service", 29));
        check(!wire_unit_name_is_valid("", 0));
        check(!wire_unit_name_is_valid(".service", 8));          /* no name before the suffix */
        check(!wire_unit_name_is_valid("orders", 6));            /* no unit type */
        check(!wire_unit_name_is_valid("system.slice", 12));     /* no process of its own */
        check(!wire_unit_name_is_valid("a/b.service", 11));
        check(!wire_unit_name_is_valid("a b.service", 11));
        check(!wire_unit_name_is_valid("a\0b.service", 11));
        memset(name, 'a', sizeof(name));
        memcpy(name + WIRE_UNIT_MAX - 8, ".service", 8);
        check(wire_unit_name_is_valid(name, WIRE_UNIT_MAX));
        memcpy(name + WIRE_UNIT_MAX - 7, ".service", 8);
        check(!wire_unit_name_is_valid(name, WIRE_UNIT_MAX + 1));
}

static void test_writer_refuses(void) {
        const uint8_t *frame;
        size_t size;

        wire_writer_begin(&w, WIRE_REPLY_ERROR);
        wire_writer_put_string(&w, WIRE_TAG_MESSAGE, "bad \xff utf-8");
        check(wire_writer_finish(&w, &frame, &size) == WIRE_E_MALFORMED);

        wire_writer_begin(&w, WIRE_REPLY_ERROR);
        wire_writer_put_u32(&w, WIRE_TAG_ERROR, 1);
        wire_writer_put_u32(&w, WIRE_TAG_ERROR, 2);
        check(wire_writer_finish(&w, &frame, &size) == WIRE_E_MALFORMED);

        wire_writer_begin(&w, WIRE_REPLY_ERROR);
        wire_writer_put_u32(&w, (WireTag)99, 1);
        check(wire_writer_finish(&w, &frame, &size) == WIRE_E_MALFORMED);
}

/* Builds a raw frame with a header saying @type/@version around @payload. */
static size_t raw_frame(uint8_t *buf, uint16_t version, uint16_t type, const uint8_t *payload, uint32_t n) {
        memcpy(buf, "DSAG", 4);
        buf[4] = (uint8_t)version;
        buf[5] = (uint8_t)(version >> 8);
        buf[6] = (uint8_t)type;
        buf[7] = (uint8_t)(type >> 8);
        memcpy(buf + 8, &n, 4);
        memcpy(buf + 12, payload, n);
        return 12 + n;
}

static void test_decoder_refuses(void) {
        uint8_t buf[256];
        WireMessage m;
        size_t size, wanted;

        /* a valid field for reference: PID u32 */
        static const uint8_t pid_field[] = { 1, 0, 4, 0, 0, 0, 1, 0, 0, 0 };
        size = raw_frame(buf, 1, WIRE_REQUEST_INFO, pid_field, sizeof(pid_field));
        check(wire_message_decode(buf, size, &m) == 0);

        /* trailing bytes are never a second message */
        check(wire_message_decode(buf, size + 1, &m) == WIRE_E_MALFORMED);
        /* another protocol version */
        size = raw_frame(buf, 2, WIRE_REQUEST_INFO, pid_field, sizeof(pid_field));
        check(wire_message_decode(buf, size, &m) == WIRE_E_VERSION);
        /* unknown message type */
        size = raw_frame(buf, 1, 0x7777, pid_field, sizeof(pid_field));
        check(wire_message_decode(buf, size, &m) == WIRE_E_MALFORMED);
        /* wrong magic, caught from the first byte on */
        buf[0] = 'X';
        check(wire_frame_peek(buf, 1, &wanted) == WIRE_E_MALFORMED);
        /* oversized payload claim */
        size = raw_frame(buf, 1, WIRE_REQUEST_INFO, pid_field, sizeof(pid_field));
        buf[10] = 0x10; /* 0x00100000 + ... bytes */
        check(wire_frame_peek(buf, size, &wanted) == WIRE_E_MALFORMED);

        /* duplicate tag */
        static const uint8_t dup[] = { 1, 0, 4, 0, 0, 0, 1, 0, 0, 0, 1, 0, 4, 0, 0, 0, 2, 0, 0, 0 };
        size = raw_frame(buf, 1, WIRE_REQUEST_INFO, dup, sizeof(dup));
        check(wire_message_decode(buf, size, &m) == WIRE_E_MALFORMED);
        /* u32 of the wrong size */
        static const uint8_t short_u32[] = { 1, 0, 3, 0, 0, 0, 1, 0, 0 };
        size = raw_frame(buf, 1, WIRE_REQUEST_INFO, short_u32, sizeof(short_u32));
        check(wire_message_decode(buf, size, &m) == WIRE_E_MALFORMED);
        /* unknown tag */
        static const uint8_t unknown[] = { 0x63, 0, 0, 0, 0, 0 };
        size = raw_frame(buf, 1, WIRE_REQUEST_INFO, unknown, sizeof(unknown));
        check(wire_message_decode(buf, size, &m) == WIRE_E_MALFORMED);
        /* strings: embedded NUL, invalid UTF-8, overlong encoding */
        static const uint8_t nul[] = { 15, 0, 3, 0, 0, 0, 'a', 0, 'b' };
        size = raw_frame(buf, 1, WIRE_REPLY_ERROR, nul, sizeof(nul));
        check(wire_message_decode(buf, size, &m) == WIRE_E_MALFORMED);
        static const uint8_t bad[] = { 15, 0, 2, 0, 0, 0, 0xC0, 0x80 };
        size = raw_frame(buf, 1, WIRE_REPLY_ERROR, bad, sizeof(bad));
        check(wire_message_decode(buf, size, &m) == WIRE_E_MALFORMED);
        /* a cookie is 16 bytes, no more, no less */
        static const uint8_t cookie[] = { 13, 0, 3, 0, 0, 0, 1, 2, 3 };
        size = raw_frame(buf, 1, WIRE_REPLY_PROCESS, cookie, sizeof(cookie));
        check(wire_message_decode(buf, size, &m) == WIRE_E_MALFORMED);
        /* a field running past the frame */
        static const uint8_t past[] = { 15, 0, 9, 0, 0, 0, 'a' };
        size = raw_frame(buf, 1, WIRE_REPLY_ERROR, past, sizeof(past));
        check(wire_message_decode(buf, size, &m) == WIRE_E_MALFORMED);
        /* half a field header */
        static const uint8_t half[] = { 15, 0, 9 };
        size = raw_frame(buf, 1, WIRE_REPLY_ERROR, half, sizeof(half));
        check(wire_message_decode(buf, size, &m) == WIRE_E_MALFORMED);
}

static void test_field_limit(void) {
        uint8_t buf[WIRE_HEADER_SIZE + (WIRE_FIELDS_MAX + 1) * 6];
        uint8_t payload[(WIRE_FIELDS_MAX + 1) * 6];
        WireMessage m;
        size_t size;

        /* more fields than any valid frame can carry: refused, whichever limit trips first */
        for (int i = 0; i <= WIRE_FIELDS_MAX; i++)
                memcpy(payload + i * 6, (uint8_t[]){ 13, 0, 0, 0, 0, 0 }, 6);
        size = raw_frame(buf, 1, WIRE_REPLY_PROCESS, payload, sizeof(payload));
        check(wire_message_decode(buf, size, &m) == WIRE_E_MALFORMED);
}

/* A process's facts (text fields) travel as its bytes, whatever they are but NUL; a string stays UTF-8. */
static void test_text_fields_carry_any_bytes(void) {
        static const char exe[] = "/tmp/dir\xff\xfe\x1b[2J\xc0\xaf\xed\xa0\x80/app";
        const uint8_t *frame;
        WireMessage m;
        char *got = NULL;
        size_t size;

        wire_writer_begin(&w, WIRE_REPLY_PROCESS);
        wire_writer_put_u32(&w, WIRE_TAG_PID, 42);
        wire_writer_put_string(&w, WIRE_TAG_EXE, exe);
        wire_writer_put_string(&w, WIRE_TAG_CGROUP, "/user.slice/\xff");
        check(wire_writer_finish(&w, &frame, &size) == 0);
        check(wire_message_decode(frame, size, &m) == 0);
        check(wire_message_get_string(&m, WIRE_TAG_EXE, &got) == 0 && got && strcmp(got, exe) == 0);
        free(got);
        check(wire_tag_kind(WIRE_TAG_EXE) == WIRE_KIND_TEXT && wire_tag_kind(WIRE_TAG_UNIT) == WIRE_KIND_STRING);
        check(wire_tag_kind((WireTag)0) == WIRE_KIND_BYTES && wire_tag_kind(_WIRE_TAG_MAX) == WIRE_KIND_BYTES);

        /* a UNIT, which a request names too, is still a string: refused when it is not UTF-8 */
        wire_writer_begin(&w, WIRE_REPLY_PROCESS);
        wire_writer_put_string(&w, WIRE_TAG_UNIT, "a\xff.service");
        check(wire_writer_finish(&w, &frame, &size) == WIRE_E_MALFORMED);

        /* a NUL is refused in text too: the C string would end there */
        static const uint8_t nul[] = { 5, 0, 3, 0, 0, 0, 'a', 0, 'b' };
        uint8_t buf[64];
        memcpy(buf, "DSAG\x01\x00\x01\x80", 8);
        buf[8] = sizeof(nul), buf[9] = buf[10] = buf[11] = 0;
        memcpy(buf + 12, nul, sizeof(nul));
        check(wire_message_decode(buf, 12 + sizeof(nul), &m) == WIRE_E_MALFORMED);
}

int main(void) {
        run_test(test_info_request_vector);
        run_test(test_round_trip_all_kinds);
        run_test(test_writer_refuses);
        run_test(test_decoder_refuses);
        run_test(test_field_limit);
        run_test(test_progress_and_remove);
        run_test(test_unit_names);
        run_test(test_text_fields_carry_any_bytes);
        return tap_finish();
}
