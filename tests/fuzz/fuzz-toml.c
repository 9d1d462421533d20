/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes the TOML parser (policy/toml.h). Policy files are read by the agent,
 * which runs as root; whoever can write one must not be able to crash it,
 * make it read out of bounds or spin.
 *
 * Input: a TOML document.
 *
 * Invariants: the result is success or one of the three errors; an error has
 * a position inside the input and a message in valid UTF-8; a tree holds only valid UTF-8,
 * keys without NUL and unique within their table, integers, booleans, and no
 * more nesting or values than the limits allow; and writing the tree back as
 * TOML (inline tables only, keys always quoted) and parsing that gives the
 * same tree, which written again gives the same bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "common/text.h"
#include "policy/toml.h"

typedef struct Buffer {
        char *data;
        size_t size, allocated;
} Buffer;

static void put(Buffer *b, const char *s, size_t n) {
        if (b->allocated - b->size < n + 1) {
                b->allocated = (b->size + n + 1) * 2;
                b->data = realloc(b->data, b->allocated);
                fuzz_assert(b->data);
        }
        memcpy(b->data + b->size, s, n);
        b->size += n;
        b->data[b->size] = '\0';
}

static void put_string(Buffer *b, const char *s, size_t n) {
        put(b, "\"", 1);
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                char escaped[8];

                if (c == '"' || c == '\\') {
                        put(b, "\\", 1);
                        put(b, s + i, 1);
                } else if ((c < 0x20 && c != '\t') || c == 0x7F) {
                        snprintf(escaped, sizeof(escaped), "\\u%04X", c);
                        put(b, escaped, 6);
                } else
                        put(b, s + i, 1);
        }
        put(b, "\"", 1);
}

/* The canonical spelling: every table inline, every key quoted, decimal integers. */
static void put_value(Buffer *b, const TomlValue *v) {
        char number[32];

        switch (v->type) {
        case TOML_TABLE:
                put(b, "{", 1);
                for (size_t i = 0; i < v->table.n_entries; i++) {
                        if (i > 0)
                                put(b, ", ", 2);
                        put_string(b, v->table.entries[i].key, strlen(v->table.entries[i].key));
                        put(b, " = ", 3);
                        put_value(b, v->table.entries[i].value);
                }
                put(b, "}", 1);
                break;
        case TOML_ARRAY:
                put(b, "[", 1);
                for (size_t i = 0; i < v->array.n_items; i++) {
                        if (i > 0)
                                put(b, ", ", 2);
                        put_value(b, v->array.items[i]);
                }
                put(b, "]", 1);
                break;
        case TOML_STRING:
                put_string(b, v->string.data, v->string.size);
                break;
        case TOML_INTEGER:
                put(b, number, (size_t)snprintf(number, sizeof(number), "%" PRId64, v->integer));
                break;
        case TOML_BOOLEAN:
                put(b, v->boolean ? "true" : "false", v->boolean ? 4 : 5);
                break;
        default:
                fuzz_assert(!"unknown value type");
        }
}

static void write_document(Buffer *b, const TomlValue *root) {
        for (size_t i = 0; i < root->table.n_entries; i++) {
                put_string(b, root->table.entries[i].key, strlen(root->table.entries[i].key));
                put(b, " = ", 3);
                put_value(b, root->table.entries[i].value);
                put(b, "\n", 1);
        }
}

static int compare_keys(const void *a, const void *b) {
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void check_unique_keys(const TomlValue *t) {
        const char **keys = malloc((t->table.n_entries + 1) * sizeof(char *));

        fuzz_assert(keys);
        for (size_t i = 0; i < t->table.n_entries; i++)
                keys[i] = t->table.entries[i].key;
        qsort(keys, t->table.n_entries, sizeof(char *), compare_keys);
        for (size_t i = 1; i < t->table.n_entries; i++)
                fuzz_assert(strcmp(keys[i - 1], keys[i]) != 0);
        free(keys);
}

/* Where a position may be: on a line of the input, at most one past its end. */
static void check_position(const uint8_t *data, size_t size, unsigned line, unsigned column) {
        size_t start = 0;

        fuzz_assert(line >= 1 && column >= 1);
        for (unsigned l = 1; l < line; l++) {
                const uint8_t *nl = memchr(data + start, '\n', size - start);
                fuzz_assert(nl);
                start = (size_t)(nl - data) + 1;
        }
        fuzz_assert(column - 1 <= size - start);
        fuzz_assert(!memchr(data + start, '\n', column - 1));
}

static size_t check_tree(const TomlValue *v, unsigned depth, const uint8_t *data, size_t size) {
        size_t n = 1;

        check_position(data, size, v->line, v->column);
        switch (v->type) {
        case TOML_TABLE:
                fuzz_assert(depth <= TOML_DEPTH_MAX);
                check_unique_keys(v);
                for (size_t i = 0; i < v->table.n_entries; i++) {
                        const TomlEntry *e = &v->table.entries[i];
                        fuzz_assert(utf8_is_valid(e->key, strlen(e->key)));
                        fuzz_assert(toml_table_find(v, e->key) == e);
                        check_position(data, size, e->line, e->column);
                        n += check_tree(e->value, depth + 1, data, size);
                }
                break;
        case TOML_ARRAY:
                fuzz_assert(depth <= TOML_DEPTH_MAX);
                for (size_t i = 0; i < v->array.n_items; i++)
                        n += check_tree(v->array.items[i], depth + 1, data, size);
                break;
        case TOML_STRING:
                fuzz_assert(v->string.data[v->string.size] == '\0');
                fuzz_assert(utf8_is_valid(v->string.data, v->string.size));
                break;
        case TOML_INTEGER:
                break;
        case TOML_BOOLEAN:
                fuzz_assert(v->boolean == true || v->boolean == false);
                break;
        default:
                fuzz_assert(!"unknown value type");
        }
        return n;
}

static bool same_tree(const TomlValue *a, const TomlValue *b) {
        if (a->type != b->type)
                return false;
        switch (a->type) {
        case TOML_TABLE:
                if (a->table.n_entries != b->table.n_entries)
                        return false;
                for (size_t i = 0; i < a->table.n_entries; i++)
                        if (strcmp(a->table.entries[i].key, b->table.entries[i].key) != 0 ||
                            !same_tree(a->table.entries[i].value, b->table.entries[i].value))
                                return false;
                return true;
        case TOML_ARRAY:
                if (a->array.n_items != b->array.n_items)
                        return false;
                for (size_t i = 0; i < a->array.n_items; i++)
                        if (!same_tree(a->array.items[i], b->array.items[i]))
                                return false;
                return true;
        case TOML_STRING:
                return a->string.size == b->string.size && memcmp(a->string.data, b->string.data, a->string.size) == 0;
        case TOML_INTEGER:
                return a->integer == b->integer;
        case TOML_BOOLEAN:
                return a->boolean == b->boolean;
        }
        return false;
}

static void check_round_trip(const TomlValue *root) {
        Buffer first = {}, second = {};
        TomlValue *again = NULL;
        TomlError e;
        int r;

        write_document(&first, root);
        r = toml_parse(first.data ? first.data : "", first.size, &again, &e);
        if (r == TOML_E_LIMIT && first.size > TOML_INPUT_MAX) {
                free(first.data);
                return;
        }
        if (r != 0)
                fprintf(stderr, "re-parse: error %d at %u:%u: %s\n", r, e.line, e.column, e.message);
        fuzz_assert(r == 0);
        fuzz_assert(same_tree(root, again));

        write_document(&second, again);
        fuzz_assert(first.size == second.size);
        fuzz_assert(first.size == 0 || memcmp(first.data, second.data, first.size) == 0);
        toml_value_free(again);
        free(first.data);
        free(second.data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        TomlValue *root = NULL;
        TomlError e;
        int r;

        memset(&e, 0xAA, sizeof(e));
        r = toml_parse((const char *)data, size, &root, &e);
        fuzz_assert(r == 0 || r == TOML_E_SYNTAX || r == TOML_E_UNSUPPORTED || r == TOML_E_LIMIT || r == -ENOMEM);
        if (r > 0) {
                fuzz_assert(!root);
                fuzz_assert(memchr(e.message, '\0', sizeof(e.message)) && e.message[0] != '\0');
                fuzz_assert(utf8_is_valid(e.message, strlen(e.message)));
                check_position(data, size, e.line, e.column);
                fuzz_assert(r != TOML_E_LIMIT || size > TOML_INPUT_MAX || strstr(e.message, "deeper") ||
                            strstr(e.message, "values") || strstr(e.message, "parts"));
        }
        if (r != 0)
                return 0;

        fuzz_assert(root && root->type == TOML_TABLE);
        fuzz_assert(check_tree(root, 0, data, size) <= TOML_VALUES_MAX + 1);
        check_round_trip(root);
        toml_value_free(root);
        return 0;
}
