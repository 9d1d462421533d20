/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * toml-dump: prints what policy/toml.c makes of TOML files, for differential
 * testing (tests/toml/differential.py) and for looking at a policy by hand.
 *
 *   toml-dump FILE             the document as JSON, or the error; exit 0 or 1
 *   toml-dump --batch FILE...  one line per file, in order; exit 0
 *
 * The JSON is the tagged format of toml-test, on one line: tables are
 * objects (keys in document order), arrays are arrays, and scalars are
 * {"type":"string","value":"..."}, {"type":"integer","value":"123"} or
 * {"type":"bool","value":"true"}. An error is the line
 * "error LINE:COLUMN KIND: MESSAGE", KIND being syntax, unsupported or limit.
 * Exit status 2: usage, or a file that could not be read.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "policy/toml.h"

/* One byte more than the parser takes, so that a larger file reaches its limit check. */
static int read_file(const char *path, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, allocated = TOML_INPUT_MAX + 1;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        buf = malloc(allocated);
        if (!buf)
                return -ENOMEM;
        while (size < allocated) {
                ssize_t n = read(fd, buf + size, allocated - size);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                size += (size_t)n;
        }
        *ret = TAKE_PTR(buf);
        *ret_size = size;
        return 0;
}

static void print_json_string(const char *s, size_t size) {
        putchar('"');
        for (size_t i = 0; i < size; i++) {
                unsigned char c = (unsigned char)s[i];

                if (c == '"' || c == '\\')
                        printf("\\%c", c);
                else if (c == '\n')
                        fputs("\\n", stdout);
                else if (c < 0x20 || c == 0x7F)
                        printf("\\u%04x", c);
                else
                        putchar(c); /* the parser hands out valid UTF-8 only */
        }
        putchar('"');
}

static void print_scalar(const char *type, const char *value, size_t size) {
        printf("{\"type\":\"%s\",\"value\":", type);
        print_json_string(value, size);
        putchar('}');
}

static void print_value(const TomlValue *v) {
        char number[32];

        switch (v->type) {
        case TOML_TABLE:
                putchar('{');
                for (size_t i = 0; i < v->table.n_entries; i++) {
                        if (i > 0)
                                putchar(',');
                        print_json_string(v->table.entries[i].key, strlen(v->table.entries[i].key));
                        putchar(':');
                        print_value(v->table.entries[i].value);
                }
                putchar('}');
                break;
        case TOML_ARRAY:
                putchar('[');
                for (size_t i = 0; i < v->array.n_items; i++) {
                        if (i > 0)
                                putchar(',');
                        print_value(v->array.items[i]);
                }
                putchar(']');
                break;
        case TOML_STRING:
                print_scalar("string", v->string.data, v->string.size);
                break;
        case TOML_INTEGER:
                (void)snprintf(number, sizeof(number), "%" PRId64, v->integer);
                print_scalar("integer", number, strlen(number));
                break;
        case TOML_BOOLEAN:
                print_scalar("bool", v->boolean ? "true" : "false", v->boolean ? 4 : 5);
                break;
        }
}

static const char *error_kind(int r) {
        switch (r) {
        case TOML_E_SYNTAX: return "syntax";
        case TOML_E_UNSUPPORTED: return "unsupported";
        case TOML_E_LIMIT: return "limit";
        default: return "unknown";
        }
}

/* Prints one line for @path. Return: 0 parsed, 1 refused, negative errno. */
static int dump(const char *path) {
        _cleanup_free_ char *text = NULL;
        TomlValue *root = NULL;
        TomlError error = {};
        size_t size = 0;
        int r;

        r = read_file(path, &text, &size);
        if (r < 0) {
                fprintf(stderr, "toml-dump: %s: %s\n", path, strerror(-r));
                return r;
        }
        r = toml_parse(text, size, &root, &error);
        if (r < 0) {
                fprintf(stderr, "toml-dump: %s: %s\n", path, strerror(-r));
                return r;
        }
        if (r > 0) {
                /* one line per file, whatever the message quotes */
                for (char *c = error.message; *c; c++)
                        if ((unsigned char)*c < 0x20)
                                *c = '?';
                printf("error %u:%u %s: %s\n", error.line, error.column, error_kind(r), error.message);
                return 1;
        }
        print_value(root);
        putchar('\n');
        toml_value_free(root);
        return 0;
}

int main(int argc, char *argv[]) {
        int r;

        if (argc >= 2 && strcmp(argv[1], "--batch") == 0) {
                for (int i = 2; i < argc; i++)
                        if (dump(argv[i]) < 0)
                                return 2;
                return fflush(stdout) == 0 ? EXIT_SUCCESS : 2;
        }
        if (argc != 2 || argv[1][0] == '-') {
                fprintf(stderr, "usage: %s FILE | --batch FILE...\n", argv[0]);
                return 2;
        }
        r = dump(argv[1]);
        if (fflush(stdout) != 0)
                return 2;
        return r < 0 ? 2 : r;
}
