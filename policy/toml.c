/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A strict TOML 1.0 parser (https://toml.io/en/v1.0.0), written from the
 * spec's ABNF and checked against Python's tomllib (tests/toml/).
 *
 * One forward pass, no backtracking. Every table keeps an AVL tree over its
 * keys, so a table of n keys costs O(n log n) whatever the keys are (a hash
 * could be flooded with colliding keys). Nesting is bounded before each
 * recursion, and positions are computed by a cursor that only moves forward
 * while parsing succeeds.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/text.h"
#include "policy/toml.h"

/* What may still be added to a table or array, by how it was made (TOML 1.0, "Table"). */
typedef enum Origin {
        ORIGIN_IMPLICIT, /* a table named only as a parent in a [header]: [it] may come later */
        ORIGIN_HEADER,   /* [table], [[array]] and the tables of [[array]] */
        ORIGIN_DOTTED,   /* a table made or extended by the dotted keys of TomlNode.section */
        ORIGIN_INLINE,   /* inline tables, static arrays and all within: complete as written */
} Origin;

typedef struct IndexNode {
        uint32_t child[2]; /* entry number + 1, 0 for none */
        uint32_t height;
} IndexNode;

/* Every value is allocated as a TomlNode; the public TomlValue comes first. */
typedef struct TomlNode {
        TomlValue value;
        Origin origin;
        uint32_t section; /* ORIGIN_DOTTED: the section whose dotted keys made the table */
        size_t allocated; /* entries or items */
        IndexNode *index; /* tables: parallel to the entries */
        uint32_t index_root;
} TomlNode;

typedef struct KeyPart {
        size_t offset, end; /* as written, quotes included */
        size_t data, size;  /* the key's bytes: in the text if bare, else in the scratch buffer */
        bool quoted;
} KeyPart;

typedef struct Key {
        KeyPart parts[TOML_DEPTH_MAX + 1]; /* more parts would nest tables deeper than allowed */
        size_t n;
} Key;

typedef struct Parser {
        const char *text;
        size_t size, pos;
        TomlError error;
        TomlError unsupported; /* the first float, date, time or key with U+0000, if any */

        /* position cursor: offset loc_offset is on line loc_line, which starts at loc_line_start */
        size_t loc_offset, loc_line_start;
        unsigned loc_line;

        TomlNode *root, *section; /* keys go into section, the table of the last [header] */
        unsigned section_depth;
        uint32_t section_id;      /* counts headers, for ORIGIN_DOTTED */
        size_t n_values;

        char *scratch; /* decoded strings and quoted keys, reused */
        size_t scratch_size, scratch_allocated;
} Parser;

#define SHOWN_MAX 64 /* bytes of a key or token quoted in a message */
#define DESCRIBE(p, offset) describe((p), (offset), (char[32]){})

static int parse_value(Parser *p, unsigned depth, TomlNode **ret);

static TomlNode *node_of(TomlValue *v) {
        return (TomlNode *)v;
}

static void node_freep(TomlNode **n) {
        if (*n)
                *n = (TomlNode *)toml_value_free(&(*n)->value);
}

static void locate(Parser *p, size_t offset, unsigned *ret_line, unsigned *ret_column) {
        /* only error messages look back, once */
        if (offset < p->loc_offset) {
                p->loc_offset = p->loc_line_start = 0;
                p->loc_line = 1;
        }
        while (p->loc_offset < offset) {
                const char *nl = memchr(p->text + p->loc_offset, '\n', offset - p->loc_offset);
                if (!nl) {
                        p->loc_offset = offset;
                        break;
                }
                p->loc_line++;
                p->loc_offset = p->loc_line_start = (size_t)(nl - p->text) + 1;
        }
        *ret_line = p->loc_line;
        *ret_column = (unsigned)(offset - p->loc_line_start + 1);
}

/* How much of the @n bytes of valid UTF-8 at @s to quote in a message: not all of a long one,
 * and never part of a character. */
static int shown_length(const char *s, size_t n) {
        if (n <= SHOWN_MAX)
                return (int)n;
        n = SHOWN_MAX;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
                n--;
        return (int)n;
}

__attribute__((format(printf, 4, 5)))
static int fail(Parser *p, size_t offset, int code, const char *format, ...) {
        size_t n;
        va_list ap;

        locate(p, offset, &p->error.line, &p->error.column);
        va_start(ap, format);
        (void)vsnprintf(p->error.message, sizeof(p->error.message), format, ap);
        va_end(ap);

        /* a message cut short may end inside a character */
        n = strlen(p->error.message);
        while (n > 0 && !utf8_is_valid(p->error.message, n))
                p->error.message[--n] = '\0';
        return code;
}

/*
 * Floats, dates, times and keys with U+0000 are valid TOML that policies
 * never hold. The first is remembered and reported only if the rest of the
 * document is valid, so that TOML_E_UNSUPPORTED always means valid TOML.
 */
static void note_unsupported(Parser *p, size_t offset, const char *message) {
        if (p->unsupported.message[0] != '\0')
                return;
        locate(p, offset, &p->unsupported.line, &p->unsupported.column);
        (void)snprintf(p->unsupported.message, sizeof(p->unsupported.message), "%s", message);
}

static int byte_at(const Parser *p, size_t i) {
        return i < p->size ? (unsigned char)p->text[i] : -1;
}

static int peek(const Parser *p) {
        return byte_at(p, p->pos);
}

static bool starts_with(const Parser *p, size_t i, const char *s) {
        size_t n = strlen(s);
        return i <= p->size && p->size - i >= n && memcmp(p->text + i, s, n) == 0;
}

/* 1 for LF, 2 for CR LF, 0 for anything else (a lone CR is not a newline) */
static size_t newline_at(const Parser *p, size_t i) {
        if (byte_at(p, i) == '\n')
                return 1;
        if (byte_at(p, i) == '\r' && byte_at(p, i + 1) == '\n')
                return 2;
        return 0;
}

/* Length of the valid UTF-8 sequence at @i (its code point in *@ret_cp), or 0. */
static size_t utf8_at(const Parser *p, size_t i, uint32_t *ret_cp) {
        return utf8_decode(p->text + i, p->size - i, ret_cp);
}

/* The character at @offset, for "found ..." in messages; printable whatever the input holds. */
static const char *describe(const Parser *p, size_t offset, char buf[static 32]) {
        int c = byte_at(p, offset);
        uint32_t cp;

        if (c < 0)
                return "end of file";
        if (newline_at(p, offset) > 0)
                return "end of line";
        if (c == '\r')
                return "a carriage return without a line feed";
        if (c == ' ')
                return "a space";
        if (c == '\t')
                return "a tab";
        if (c > 0x20 && c < 0x7F)
                (void)snprintf(buf, 32, "'%c'", c);
        else if (c < 0x80)
                (void)snprintf(buf, 32, "U+%04X", (unsigned)c);
        else if (utf8_at(p, offset, &cp) > 0)
                (void)snprintf(buf, 32, "U+%04X", (unsigned)cp);
        else
                (void)snprintf(buf, 32, "byte 0x%02X (invalid UTF-8)", (unsigned)c);
        return buf;
}

static void skip_ws(Parser *p) {
        while (peek(p) == ' ' || peek(p) == '\t')
                p->pos++;
}

static int scratch_put(Parser *p, const char *data, size_t n) {
        if (n > p->scratch_allocated - p->scratch_size) {
                size_t m = p->scratch_allocated ? p->scratch_allocated : 256;
                char *grown;

                while (m - p->scratch_size < n)
                        m *= 2;
                grown = realloc(p->scratch, m);
                if (!grown)
                        return -ENOMEM;
                p->scratch = grown;
                p->scratch_allocated = m;
        }
        if (n > 0)
                memcpy(p->scratch + p->scratch_size, data, n);
        p->scratch_size += n;
        return 0;
}

/*
 * One character of comment or string text at p->pos: valid UTF-8 and no
 * control character but tab, which is all TOML asks of both. @where names
 * the place in the error.
 */
static int text_char(Parser *p, const char *where, size_t *ret_len) {
        unsigned char c = (unsigned char)p->text[p->pos];
        size_t len = 1;
        uint32_t cp;

        if (c >= 0x80 && (len = utf8_at(p, p->pos, &cp)) == 0)
                return fail(p, p->pos, TOML_E_SYNTAX, "invalid UTF-8 in %s", where);
        if ((c < 0x20 && c != '\t') || c == 0x7F)
                return fail(p, p->pos, TOML_E_SYNTAX, "control character U+%04X in %s", c, where);
        *ret_len = len;
        return 0;
}

/* A comment, from its '#' to the end of the line (not included). */
static int skip_comment(Parser *p) {
        for (p->pos++; p->pos < p->size && newline_at(p, p->pos) == 0;) {
                size_t len;
                int r = text_char(p, "comment", &len);

                if (r != 0)
                        return r;
                p->pos += len;
        }
        return 0;
}

/* After a key/value pair or a header: whitespace, maybe a comment, then a newline or the end. */
static int expect_line_end(Parser *p, const char *after) {
        int r;

        skip_ws(p);
        if (peek(p) == '#') {
                r = skip_comment(p);
                if (r != 0)
                        return r;
        }
        if (p->pos == p->size)
                return 0;
        if (newline_at(p, p->pos) == 0)
                return fail(p, p->pos, TOML_E_SYNTAX, "expected end of line after %s, found %s", after,
                            DESCRIBE(p, p->pos));
        p->pos += newline_at(p, p->pos);
        return 0;
}

/* ---- strings ---- */

static int hex_digit(int c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* \uXXXX or \UXXXXXXXX at p->pos: a Unicode scalar value, appended as UTF-8 */
static int parse_unicode_escape(Parser *p, unsigned digits) {
        size_t start = p->pos;
        uint32_t cp = 0;
        char utf8[4];

        for (unsigned i = 0; i < digits; i++) {
                int h = hex_digit(byte_at(p, start + 2 + i));
                if (h < 0)
                        return fail(p, start, TOML_E_SYNTAX, "invalid escape '\\%c': expected %u hex digits",
                                    p->text[start + 1], digits);
                cp = cp << 4 | (uint32_t)h;
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                return fail(p, start, TOML_E_SYNTAX, "invalid escape '%.*s': not a Unicode scalar value",
                            (int)digits + 2, p->text + start);
        p->pos = start + 2 + digits;
        return scratch_put(p, utf8, utf8_encode(cp, utf8));
}

static int parse_escape(Parser *p, size_t string_start) {
        int c = byte_at(p, p->pos + 1);
        const char *replacement;

        switch (c) {
        case 'b': replacement = "\b"; break;
        case 't': replacement = "\t"; break;
        case 'n': replacement = "\n"; break;
        case 'f': replacement = "\f"; break;
        case 'r': replacement = "\r"; break;
        case '"': replacement = "\""; break;
        case '\\': replacement = "\\"; break;
        case 'u': return parse_unicode_escape(p, 4);
        case 'U': return parse_unicode_escape(p, 8);
        case -1: return fail(p, string_start, TOML_E_SYNTAX, "unterminated string");
        default:
                if (c > 0x20 && c < 0x7F)
                        return fail(p, p->pos, TOML_E_SYNTAX, "invalid escape '\\%c'", c);
                return fail(p, p->pos, TOML_E_SYNTAX, "invalid escape: '\\' followed by %s",
                            DESCRIBE(p, p->pos + 1));
        }
        p->pos += 2;
        return scratch_put(p, replacement, 1);
}

/* In a multi-line basic string, '\' as the last thing on a line drops all
 * whitespace and newlines up to the next other character. */
static bool at_line_ending_backslash(const Parser *p) {
        size_t i = p->pos + 1;

        while (byte_at(p, i) == ' ' || byte_at(p, i) == '\t')
                i++;
        return newline_at(p, i) > 0;
}

static void skip_line_ending_backslash(Parser *p) {
        for (p->pos++;;) {
                if (peek(p) == ' ' || peek(p) == '\t')
                        p->pos++;
                else if (newline_at(p, p->pos) > 0)
                        p->pos += newline_at(p, p->pos);
                else
                        return;
        }
}

/* At a quote inside a multi-line string: one or two are content; three to
 * five end the string, the last three being the delimiter. */
static int multiline_quotes(Parser *p, char quote, bool *ret_end) {
        size_t n = 0;

        while (n < 6 && byte_at(p, p->pos + n) == quote)
                n++;
        if (n == 6)
                return fail(p, p->pos + 5, TOML_E_SYNTAX, "too many quotes at the end of a multi-line string");
        *ret_end = n >= 3;
        p->pos += n;
        return scratch_put(p, p->text + p->pos - n, n >= 3 ? n - 3 : n);
}

static int string_newline(Parser *p, bool multiline, size_t start) {
        if (!multiline)
                return fail(p, start, TOML_E_SYNTAX, "unterminated string");
        /* CR LF becomes LF, as tomllib and most parsers do */
        p->pos += newline_at(p, p->pos);
        return scratch_put(p, "\n", 1);
}

/*
 * Any of the four kinds of string, from its opening quote: the decoded bytes
 * are appended to the scratch buffer.
 */
static int parse_string(Parser *p) {
        char quote = p->text[p->pos];
        bool multiline = starts_with(p, p->pos, quote == '"' ? "\"\"\"" : "'''");
        size_t start = p->pos, len = 0;
        int r;

        p->pos += multiline ? 3 : 1;
        if (multiline)
                p->pos += newline_at(p, p->pos); /* a newline right after the delimiter is not content */

        for (;;) {
                int c = peek(p);
                bool end = false;

                if (c < 0)
                        return fail(p, start, TOML_E_SYNTAX, "unterminated string");
                if (c == quote && !multiline) {
                        p->pos++;
                        return 0;
                }
                if (c == quote)
                        r = multiline_quotes(p, quote, &end);
                else if (c == '\\' && quote == '"' && multiline && at_line_ending_backslash(p)) {
                        skip_line_ending_backslash(p);
                        r = 0;
                } else if (c == '\\' && quote == '"')
                        r = parse_escape(p, start);
                else if (newline_at(p, p->pos) > 0)
                        r = string_newline(p, multiline, start);
                else {
                        r = text_char(p, "string", &len);
                        if (r != 0)
                                return r;
                        r = scratch_put(p, p->text + p->pos, len);
                        p->pos += len;
                }
                if (r != 0 || end)
                        return r;
        }
}

/* ---- keys ---- */

static bool is_bare_key_char(int c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static const char *part_data(const Parser *p, const KeyPart *k) {
        if (!k->quoted)
                return p->text + k->data;
        return p->scratch ? p->scratch + k->data : ""; /* "" = 1 may be the first string */
}

/* printf arguments for "%s%.*s%s": a key part as written, bare ones in quotes */
#define PART_ARGS(p, k)                                                                         \
        (k)->quoted ? "" : "'", shown_length((p)->text + (k)->offset, (k)->end - (k)->offset),   \
        (p)->text + (k)->offset, (k)->quoted ? "" : "'"

/* printf arguments for "%.*s": a whole key as written */
#define KEY_ARGS(p, key)                                                                        \
        shown_length((p)->text + (key)->parts[0].offset,                                        \
                     (key)->parts[(key)->n - 1].end - (key)->parts[0].offset),                  \
        (p)->text + (key)->parts[0].offset

static int key_dup(const Parser *p, const KeyPart *k, char **ret) {
        char *s = malloc(k->size + 1);

        if (!s)
                return -ENOMEM;
        if (k->size > 0)
                memcpy(s, part_data(p, k), k->size);
        s[k->size] = '\0';
        *ret = s;
        return 0;
}

static int parse_key_part(Parser *p, KeyPart *k) {
        size_t start = p->pos, data = p->scratch_size;
        int c = peek(p), r;

        if (is_bare_key_char(c)) {
                while (is_bare_key_char(peek(p)))
                        p->pos++;
                *k = (KeyPart){ .offset = start, .end = p->pos, .data = start, .size = p->pos - start };
                return 0;
        }
        if (c != '"' && c != '\'')
                return fail(p, start, TOML_E_SYNTAX, "expected a key, found %s", DESCRIBE(p, start));
        if (starts_with(p, start, c == '"' ? "\"\"\"" : "'''"))
                return fail(p, start, TOML_E_SYNTAX, "a multi-line string cannot be a key");

        r = parse_string(p);
        if (r != 0)
                return r;
        *k = (KeyPart){ .offset = start, .end = p->pos, .data = data, .size = p->scratch_size - data, .quoted = true };
        for (size_t i = data; i < p->scratch_size; i++)
                if (p->scratch[i] == '\0') {
                        /* the tree hands keys out as C strings; until the end, 0xFF stands in,
                         * which no UTF-8 key has, so that keys stay distinct */
                        note_unsupported(p, start, "keys containing U+0000 are not supported");
                        p->scratch[i] = (char)0xFF;
                }
        return 0;
}

/* A key, simple or dotted, and the whitespace after it. */
static int parse_key(Parser *p, Key *key) {
        int r;

        key->n = 0;
        p->scratch_size = 0;
        for (;;) {
                if (key->n == ELEMENTSOF(key->parts))
                        return fail(p, p->pos, TOML_E_LIMIT, "key of more than %zu parts", ELEMENTSOF(key->parts));
                r = parse_key_part(p, &key->parts[key->n]);
                if (r != 0)
                        return r;
                key->n++;
                skip_ws(p);
                if (peek(p) != '.')
                        return 0;
                p->pos++;
                skip_ws(p);
        }
}

/* ---- the tree ---- */

/* strcmp() of the @size bytes at @a, which hold no NUL, with the string @b */
static int key_compare(const char *a, size_t size, const char *b) {
        for (size_t i = 0; i < size; i++) {
                if (b[i] == '\0')
                        return 1;
                if (a[i] != b[i])
                        return (unsigned char)a[i] < (unsigned char)b[i] ? -1 : 1;
        }
        return b[size] == '\0' ? 0 : -1;
}

static TomlEntry *table_lookup(const TomlNode *t, const char *key, size_t size) {
        for (uint32_t n = t->index_root; n != 0;) {
                int c = key_compare(key, size, t->value.table.entries[n - 1].key);

                if (c == 0)
                        return &t->value.table.entries[n - 1];
                n = t->index[n - 1].child[c > 0];
        }
        return NULL;
}

static uint32_t index_height(const TomlNode *t, uint32_t n) {
        return n ? t->index[n - 1].height : 0;
}

static void index_update(TomlNode *t, uint32_t n) {
        uint32_t a = index_height(t, t->index[n - 1].child[0]), b = index_height(t, t->index[n - 1].child[1]);

        t->index[n - 1].height = 1 + (a > b ? a : b);
}

/* Makes the child of @n on @side the root of this subtree. */
static uint32_t index_rotate(TomlNode *t, uint32_t n, int side) {
        uint32_t c = t->index[n - 1].child[side];

        t->index[n - 1].child[side] = t->index[c - 1].child[!side];
        t->index[c - 1].child[!side] = n;
        index_update(t, n);
        index_update(t, c);
        return c;
}

static uint32_t index_rebalance(TomlNode *t, uint32_t n) {
        IndexNode *x = &t->index[n - 1];
        int balance = (int)index_height(t, x->child[1]) - (int)index_height(t, x->child[0]);
        int side = balance > 0;
        uint32_t c = x->child[side];

        if (balance >= -1 && balance <= 1) {
                index_update(t, n);
                return n;
        }
        if (index_height(t, t->index[c - 1].child[!side]) > index_height(t, t->index[c - 1].child[side]))
                x->child[side] = index_rotate(t, c, !side);
        return index_rotate(t, n, side);
}

/* Inserts entry number @n (+1) into the subtree at @root; returns the new root. */
static uint32_t index_insert(TomlNode *t, uint32_t root, uint32_t n) {
        int side;

        if (root == 0)
                return n;
        side = strcmp(t->value.table.entries[n - 1].key, t->value.table.entries[root - 1].key) > 0;
        t->index[root - 1].child[side] = index_insert(t, t->index[root - 1].child[side], n);
        return index_rebalance(t, root);
}

/* Adds @key = @value, a new key, to @table; takes both, and frees them if that fails. */
static int table_add(TomlNode *table, char *key, TomlNode *value, unsigned line, unsigned column) {
        size_t n = table->value.table.n_entries;

        if (n == table->allocated) {
                size_t m = n ? n * 2 : 4;
                TomlEntry *entries = reallocarray(table->value.table.entries, m, sizeof(TomlEntry));
                IndexNode *index;

                if (entries)
                        table->value.table.entries = entries;
                index = entries ? reallocarray(table->index, m, sizeof(IndexNode)) : NULL;
                if (!index) {
                        free(key);
                        toml_value_free(&value->value);
                        return -ENOMEM;
                }
                table->index = index;
                table->allocated = m;
        }

        table->value.table.entries[n] =
                (TomlEntry){ .key = key, .line = line, .column = column, .value = &value->value };
        table->index[n] = (IndexNode){ .height = 1 };
        table->value.table.n_entries = n + 1;
        table->index_root = index_insert(table, table->index_root, (uint32_t)n + 1);
        return 0;
}

/* Appends @item to @array; takes it, and frees it if that fails. */
static int array_append(TomlNode *array, TomlNode *item) {
        size_t n = array->value.array.n_items;

        if (n == array->allocated) {
                size_t m = n ? n * 2 : 4;
                TomlValue **items = reallocarray(array->value.array.items, m, sizeof(TomlValue *));

                if (!items) {
                        toml_value_free(&item->value);
                        return -ENOMEM;
                }
                array->value.array.items = items;
                array->allocated = m;
        }
        array->value.array.items[n] = &item->value;
        array->value.array.n_items = n + 1;
        return 0;
}

static int node_new(Parser *p, TomlType type, size_t offset, unsigned depth, Origin origin, TomlNode **ret) {
        TomlNode *n;

        if ((type == TOML_TABLE || type == TOML_ARRAY) && depth > TOML_DEPTH_MAX)
                return fail(p, offset, TOML_E_LIMIT, "tables and arrays nested deeper than %d", TOML_DEPTH_MAX);
        if (p->n_values >= TOML_VALUES_MAX)
                return fail(p, offset, TOML_E_LIMIT, "more than %d values", TOML_VALUES_MAX);
        n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        n->value.type = type;
        n->origin = origin;
        n->section = p->section_id;
        locate(p, offset, &n->value.line, &n->value.column);
        p->n_values++;
        *ret = n;
        return 0;
}

/* Adds a new node of @type named @k to @table; the table owns it, *@ret_node points at it. */
static int add_named_node(Parser *p, TomlNode *table, unsigned depth, const KeyPart *k, TomlType type,
                          Origin origin, TomlNode **ret_node) {
        _cleanup_(node_freep) TomlNode *node = NULL;
        _cleanup_free_ char *name = NULL;
        TomlNode *added;
        int r;

        r = node_new(p, type, k->offset, depth + 1, origin, &node);
        if (r != 0)
                return r;
        r = key_dup(p, k, &name);
        if (r != 0)
                return r;
        added = node;
        r = table_add(table, TAKE_PTR(name), TAKE_PTR(node), added->value.line, added->value.column);
        if (r != 0)
                return r;
        *ret_node = added;
        return 0;
}

/* Adds a new table named @k to *@table, then moves *@table and *@depth into it. */
static int add_table(Parser *p, TomlNode **table, unsigned *depth, const KeyPart *k, Origin origin) {
        TomlNode *added;
        int r;

        r = add_named_node(p, *table, *depth, k, TOML_TABLE, origin, &added);
        if (r != 0)
                return r;
        *table = added;
        (*depth)++;
        return 0;
}

static const char *type_phrase(const TomlValue *v) {
        switch (v->type) {
        case TOML_TABLE: return "a table";
        case TOML_ARRAY:
                return node_of((TomlValue *)v)->origin == ORIGIN_HEADER ? "an array of tables" : "an array";
        case TOML_STRING: return "a string";
        case TOML_INTEGER: return "an integer";
        case TOML_BOOLEAN: return "a boolean";
        }
        return "a value";
}

static TomlNode *lookup_part(const Parser *p, const TomlNode *table, const KeyPart *k) {
        TomlEntry *e = table_lookup(table, part_data(p, k), k->size);

        return e ? node_of(e->value) : NULL;
}

/* One step down a dotted key: into the table that @k names in *@table, made if need be. */
static int descend_dotted(Parser *p, TomlNode **table, unsigned *depth, const KeyPart *k) {
        TomlNode *t = lookup_part(p, *table, k);

        if (!t)
                return add_table(p, table, depth, k, ORIGIN_DOTTED);
        if (t->value.type != TOML_TABLE)
                return fail(p, k->offset, TOML_E_SYNTAX, "key %s%.*s%s is %s, not a table", PART_ARGS(p, k),
                            type_phrase(&t->value));
        if (t->origin == ORIGIN_INLINE)
                return fail(p, k->offset, TOML_E_SYNTAX, "inline table %s%.*s%s cannot be extended",
                            PART_ARGS(p, k));
        if (t->origin == ORIGIN_HEADER)
                return fail(p, k->offset, TOML_E_SYNTAX,
                            "table %s%.*s%s has a [header]; dotted keys cannot extend it", PART_ARGS(p, k));
        if (t->origin == ORIGIN_DOTTED && t->section != p->section_id)
                return fail(p, k->offset, TOML_E_SYNTAX,
                            "table %s%.*s%s was defined by dotted keys in another section", PART_ARGS(p, k));

        /* from now on it is this section's: no [header] may define it again */
        t->origin = ORIGIN_DOTTED;
        t->section = p->section_id;
        *table = t;
        (*depth)++;
        return 0;
}

/* A key = value pair, into @table at @depth: the current section, or an inline table being read. */
static int parse_keyval(Parser *p, TomlNode *table, unsigned depth) {
        _cleanup_(node_freep) TomlNode *value = NULL;
        _cleanup_free_ char *name = NULL;
        const KeyPart *last;
        unsigned line, column;
        Key key;
        int r;

        r = parse_key(p, &key);
        if (r != 0)
                return r;
        if (peek(p) != '=')
                return fail(p, p->pos, TOML_E_SYNTAX, "expected '=' after key, found %s", DESCRIBE(p, p->pos));
        p->pos++;
        skip_ws(p);

        for (size_t i = 0; i + 1 < key.n; i++) {
                r = descend_dotted(p, &table, &depth, &key.parts[i]);
                if (r != 0)
                        return r;
        }
        last = &key.parts[key.n - 1];
        if (lookup_part(p, table, last))
                return fail(p, last->offset, TOML_E_SYNTAX, "duplicate key %s%.*s%s", PART_ARGS(p, last));
        r = key_dup(p, last, &name);
        if (r != 0)
                return r;
        locate(p, last->offset, &line, &column);

        r = parse_value(p, depth + 1, &value);
        if (r != 0)
                return r;
        return table_add(table, TAKE_PTR(name), TAKE_PTR(value), line, column);
}

/* ---- headers ---- */

/* One step down a [header] path: into the table that @k names in *@table, made if need be. */
static int descend_header(Parser *p, TomlNode **table, unsigned *depth, const KeyPart *k) {
        TomlNode *t = lookup_part(p, *table, k);

        if (!t)
                return add_table(p, table, depth, k, ORIGIN_IMPLICIT);
        if (t->value.type == TOML_ARRAY && t->origin == ORIGIN_HEADER) {
                /* [a.b] after [[a]]: b goes into the last table of a */
                t = node_of(t->value.array.items[t->value.array.n_items - 1]);
                (*depth)++;
        } else if (t->value.type != TOML_TABLE)
                return fail(p, k->offset, TOML_E_SYNTAX, "key %s%.*s%s is %s, not a table", PART_ARGS(p, k),
                            type_phrase(&t->value));
        else if (t->origin == ORIGIN_INLINE)
                return fail(p, k->offset, TOML_E_SYNTAX, "inline table %s%.*s%s cannot be extended",
                            PART_ARGS(p, k));
        *table = t;
        (*depth)++;
        return 0;
}

/* [key]: the table @key names in *@table, which no earlier line may have defined */
static int define_table(Parser *p, TomlNode **table, unsigned *depth, const Key *key, size_t start) {
        const KeyPart *k = &key->parts[key->n - 1];
        TomlNode *t = lookup_part(p, *table, k);

        if (!t)
                return add_table(p, table, depth, k, ORIGIN_HEADER);
        if (t->value.type != TOML_TABLE)
                return fail(p, k->offset, TOML_E_SYNTAX, "key %s%.*s%s is %s, not a table", PART_ARGS(p, k),
                            type_phrase(&t->value));
        switch (t->origin) {
        case ORIGIN_HEADER:
                return fail(p, start, TOML_E_SYNTAX, "table [%.*s] defined twice", KEY_ARGS(p, key));
        case ORIGIN_DOTTED:
                return fail(p, start, TOML_E_SYNTAX, "table [%.*s] is already defined by dotted keys",
                            KEY_ARGS(p, key));
        case ORIGIN_INLINE:
                return fail(p, start, TOML_E_SYNTAX, "table [%.*s] is already defined as an inline table",
                            KEY_ARGS(p, key));
        case ORIGIN_IMPLICIT:
                break;
        }
        t->origin = ORIGIN_HEADER;
        *table = t;
        (*depth)++;
        return 0;
}

/* [[key]] at @line:@column: a new table at the end of the array of tables @key names in *@table */
static int define_array_table(Parser *p, TomlNode **table, unsigned *depth, const Key *key, unsigned line,
                              unsigned column) {
        _cleanup_(node_freep) TomlNode *element = NULL;
        const KeyPart *k = &key->parts[key->n - 1];
        TomlNode *a = lookup_part(p, *table, k), *added;
        int r;

        if (!a) {
                r = add_named_node(p, *table, *depth, k, TOML_ARRAY, ORIGIN_HEADER, &a);
                if (r != 0)
                        return r;
                a->value.line = line;
                a->value.column = column;
        } else if (a->value.type != TOML_ARRAY)
                return fail(p, k->offset, TOML_E_SYNTAX, "key %s%.*s%s is %s, not an array of tables",
                            PART_ARGS(p, k), type_phrase(&a->value));
        else if (a->origin != ORIGIN_HEADER)
                return fail(p, k->offset, TOML_E_SYNTAX, "static array %s%.*s%s cannot be extended",
                            PART_ARGS(p, k));

        r = node_new(p, TOML_TABLE, k->offset, *depth + 2, ORIGIN_HEADER, &element);
        if (r != 0)
                return r;
        added = element;
        r = array_append(a, TAKE_PTR(element));
        if (r != 0)
                return r;
        *table = added;
        *depth += 2;
        return 0;
}

/* [key] or [[key]]: the keys that follow go into the table it names */
static int parse_header(Parser *p) {
        size_t start = p->pos;
        bool array = byte_at(p, start + 1) == '[';
        const char *close = array ? "]]" : "]";
        TomlNode *t = p->root;
        unsigned depth = 0, line, column;
        Key key;
        int r;

        locate(p, start, &line, &column);
        p->section_id++;
        p->pos += array ? 2 : 1;
        skip_ws(p);
        r = parse_key(p, &key);
        if (r != 0)
                return r;
        if (!starts_with(p, p->pos, close))
                return fail(p, p->pos, TOML_E_SYNTAX, "expected '%s' after the table name, found %s", close,
                            DESCRIBE(p, p->pos));
        p->pos += strlen(close);

        for (size_t i = 0; i + 1 < key.n; i++) {
                r = descend_header(p, &t, &depth, &key.parts[i]);
                if (r != 0)
                        return r;
        }
        if (array)
                r = define_array_table(p, &t, &depth, &key, line, column);
        else
                r = define_table(p, &t, &depth, &key, start);
        if (r != 0)
                return r;

        /* a table is where its header is, wherever its name was first mentioned */
        t->value.line = line;
        t->value.column = column;
        p->section = t;
        p->section_depth = depth;
        return 0;
}

/* ---- values ---- */

static int parse_string_value(Parser *p, TomlNode **ret) {
        _cleanup_(node_freep) TomlNode *n = NULL;
        size_t start = p->pos;
        int r;

        p->scratch_size = 0;
        r = parse_string(p);
        if (r != 0)
                return r;
        r = node_new(p, TOML_STRING, start, 0, ORIGIN_INLINE, &n);
        if (r != 0)
                return r;
        n->value.string.data = malloc(p->scratch_size + 1);
        if (!n->value.string.data)
                return -ENOMEM;
        if (p->scratch_size > 0)
                memcpy(n->value.string.data, p->scratch, p->scratch_size);
        n->value.string.data[p->scratch_size] = '\0';
        n->value.string.size = p->scratch_size;
        *ret = TAKE_PTR(n);
        return 0;
}

static bool is_digit(int c) {
        return c >= '0' && c <= '9';
}

/* DIGIT *( ["_"] DIGIT ) in @base at *@i, accumulated into *@value; *@overflow past UINT64_MAX */
static bool scan_digits(const char *s, size_t n, size_t *i, unsigned base, uint64_t *value, bool *overflow) {
        bool digit_before = false;

        for (; *i < n; (*i)++) {
                int d = hex_digit(s[*i]);

                if (s[*i] == '_' && digit_before && *i + 1 < n && hex_digit(s[*i + 1]) >= 0 &&
                    (unsigned)hex_digit(s[*i + 1]) < base) {
                        digit_before = false;
                        continue;
                }
                if (d < 0 || (unsigned)d >= base)
                        break;
                if (*value > (UINT64_MAX - (uint64_t)d) / base)
                        *overflow = true;
                *value = *value * base + (uint64_t)d;
                digit_before = true;
        }
        return digit_before;
}

/* Return: 0, -EINVAL if not a TOML integer, -ERANGE if one beyond 64 bits (signed). */
static int parse_integer(const char *s, size_t n, int64_t *ret) {
        uint64_t v = 0, max = INT64_MAX;
        bool overflow = false, negative = false;
        unsigned base = 10;
        size_t i = 0;

        if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o' || s[1] == 'b')) {
                base = s[1] == 'x' ? 16 : s[1] == 'o' ? 8 : 2;
                i = 2;
        } else {
                negative = s[0] == '-';
                if (s[0] == '-' || s[0] == '+')
                        i = 1;
                if (i < n && s[i] == '0' && i + 1 < n)
                        return -EINVAL; /* leading zero */
                if (negative)
                        max = (uint64_t)INT64_MAX + 1;
        }
        if (!scan_digits(s, n, &i, base, &v, &overflow) || i != n)
                return -EINVAL;
        if (overflow || v > max)
                return -ERANGE;
        if (!negative)
                *ret = (int64_t)v;
        else
                *ret = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
        return 0;
}

/* float = [sign] (inf | nan | dec-int (frac [exp] | exp)), which TOML has and policies do not */
static bool is_float(const char *s, size_t n) {
        uint64_t ignored = 0;
        bool overflow = false, fraction_or_exponent = false;
        size_t i = s[0] == '+' || s[0] == '-';

        if ((n - i == 3 && memcmp(s + i, "inf", 3) == 0) || (n - i == 3 && memcmp(s + i, "nan", 3) == 0))
                return true;
        if (i < n && s[i] == '0')
                i++;
        else if (!(i < n && is_digit(s[i]) && scan_digits(s, n, &i, 10, &ignored, &overflow)))
                return false;
        if (i < n && s[i] == '.') {
                i++;
                if (!(i < n && is_digit(s[i]) && scan_digits(s, n, &i, 10, &ignored, &overflow)))
                        return false;
                fraction_or_exponent = true;
        }
        if (i < n && (s[i] == 'e' || s[i] == 'E')) {
                i++;
                if (i < n && (s[i] == '+' || s[i] == '-'))
                        i++;
                if (!(i < n && is_digit(s[i]) && scan_digits(s, n, &i, 10, &ignored, &overflow)))
                        return false;
                fraction_or_exponent = true;
        }
        return i == n && fraction_or_exponent;
}

/* @count digits at @s as a number in [@min, @max], or -1 */
static int digits_in_range(const char *s, size_t count, int min, int max) {
        int v = 0;

        for (size_t i = 0; i < count; i++) {
                if (!is_digit(s[i]))
                        return -1;
                v = v * 10 + (s[i] - '0');
        }
        return v >= min && v <= max ? v : -1;
}

/* YYYY-MM-DD: 10, or 0 if @s does not start with a valid date */
static size_t scan_date(const char *s, size_t n) {
        static const int days[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
        int year, month, day;

        if (n < 10 || s[4] != '-' || s[7] != '-')
                return 0;
        year = digits_in_range(s, 4, 0, 9999);
        month = digits_in_range(s + 5, 2, 1, 12);
        if (year < 0 || month < 0)
                return 0;
        day = digits_in_range(s + 8, 2, 1, days[month - 1]);
        if (day < 0 || (month == 2 && day == 29 && (year % 4 != 0 || (year % 100 == 0 && year % 400 != 0))))
                return 0;
        return 10;
}

/* HH:MM:SS[.fraction]: its length, or 0 */
static size_t scan_time(const char *s, size_t n) {
        size_t i = 8;

        if (n < 8 || s[2] != ':' || s[5] != ':' || digits_in_range(s, 2, 0, 23) < 0 ||
            digits_in_range(s + 3, 2, 0, 59) < 0 || digits_in_range(s + 6, 2, 0, 60) < 0)
                return 0;
        if (i < n && s[i] == '.') {
                for (i++; i < n && is_digit(s[i]); i++)
                        ;
                if (i == 9)
                        return 0;
        }
        return i;
}

/* Z or +HH:MM: its length, or 0 */
static size_t scan_offset(const char *s, size_t n) {
        if (n >= 1 && (s[0] == 'Z' || s[0] == 'z'))
                return 1;
        if (n >= 6 && (s[0] == '+' || s[0] == '-') && s[3] == ':' && digits_in_range(s + 1, 2, 0, 23) >= 0 &&
            digits_in_range(s + 4, 2, 0, 59) >= 0)
                return 6;
        return 0;
}

/* An offset or local date-time, a local date or a local time (RFC 3339 as TOML restricts it) */
static bool is_date_time(const char *s, size_t n) {
        size_t i = scan_date(s, n), t;

        if (i == 0)
                return scan_time(s, n) == n;
        if (i == n)
                return true;
        if (s[i] != 'T' && s[i] != 't' && s[i] != ' ')
                return false;
        t = scan_time(s + i + 1, n - i - 1);
        if (t == 0)
                return false;
        i += 1 + t;
        return i == n || i + scan_offset(s + i, n - i) == n;
}

static bool is_value_char(int c) {
        return is_bare_key_char(c) || c == '+' || c == '.' || c == ':';
}

/* Numbers, booleans, dates and times run until a character none of them has;
 * a date may be followed by a space and a time. */
static size_t value_token_end(const Parser *p, size_t start) {
        size_t end = start;

        while (is_value_char(byte_at(p, end)))
                end++;
        if (end - start == 10 && scan_date(p->text + start, 10) == 10 && byte_at(p, end) == ' ' &&
            is_digit(byte_at(p, end + 1)) && is_digit(byte_at(p, end + 2)) && byte_at(p, end + 3) == ':')
                for (end++; is_value_char(byte_at(p, end));)
                        end++;
        return end;
}

static bool looks_like_date_time(const char *s, size_t n) {
        return (n >= 5 && is_digit(s[0]) && is_digit(s[1]) && is_digit(s[2]) && is_digit(s[3]) && s[4] == '-') ||
               (n >= 3 && is_digit(s[0]) && is_digit(s[1]) && s[2] == ':');
}

/* A token that is neither an integer nor a boolean: 0 for a float, date or
 * time, which is noted (an integer stands in for it), else the error. */
static int not_an_integer(Parser *p, const char *s, size_t n) {
        size_t start = (size_t)(s - p->text), i = s[0] == '+' || s[0] == '-';
        int shown = shown_length(s, n);

        if (looks_like_date_time(s, n)) {
                if (!is_date_time(s, n))
                        return fail(p, start, TOML_E_SYNTAX, "invalid date or time '%.*s'", shown, s);
                note_unsupported(p, start, "dates and times are not supported in policy files");
                return 0;
        }
        if (is_float(s, n)) {
                note_unsupported(p, start, "floats are not supported in policy files");
                return 0;
        }
        if (i + 1 < n && s[i] == '0' && (is_digit(s[i + 1]) || s[i + 1] == '_'))
                return fail(p, start, TOML_E_SYNTAX, "leading zeros are not allowed in '%.*s'", shown, s);
        if (i < n && is_digit(s[i]))
                return fail(p, start, TOML_E_SYNTAX, "invalid number '%.*s'", shown, s);
        return fail(p, start, TOML_E_SYNTAX, "invalid value '%.*s'", shown, s);
}

/* An integer or a boolean (or a stand-in), or the error that fits the token best. */
static int parse_bare_value(Parser *p, TomlNode **ret) {
        size_t start = p->pos, end = value_token_end(p, start), n = end - start;
        const char *s = p->text + start;
        TomlNode *v;
        int64_t i = 0;
        bool is_bool;
        int r;

        if (n == 0)
                return fail(p, start, TOML_E_SYNTAX, "expected a value, found %s", DESCRIBE(p, start));
        is_bool = (n == 4 && memcmp(s, "true", 4) == 0) || (n == 5 && memcmp(s, "false", 5) == 0);
        if (!is_bool) {
                r = parse_integer(s, n, &i);
                if (r == -ERANGE)
                        return fail(p, start, TOML_E_SYNTAX, "integer '%.*s' out of range",
                                    shown_length(s, n), s);
                if (r < 0)
                        r = not_an_integer(p, s, n);
                if (r != 0)
                        return r;
        }

        r = node_new(p, is_bool ? TOML_BOOLEAN : TOML_INTEGER, start, 0, ORIGIN_INLINE, &v);
        if (r != 0)
                return r;
        if (is_bool)
                v->value.boolean = n == 4;
        else
                v->value.integer = i;
        p->pos = end;
        *ret = v;
        return 0;
}

/* Whitespace, newlines and comments, as arrays allow between their values. */
static int skip_array_space(Parser *p) {
        for (;;) {
                int r;

                skip_ws(p);
                if (peek(p) == '#') {
                        r = skip_comment(p);
                        if (r != 0)
                                return r;
                }
                if (newline_at(p, p->pos) == 0)
                        return 0;
                p->pos += newline_at(p, p->pos);
        }
}

static int parse_array(Parser *p, unsigned depth, TomlNode **ret) {
        _cleanup_(node_freep) TomlNode *a = NULL;
        size_t start = p->pos;
        int r;

        r = node_new(p, TOML_ARRAY, start, depth, ORIGIN_INLINE, &a);
        if (r != 0)
                return r;
        p->pos++;
        for (;;) {
                _cleanup_(node_freep) TomlNode *item = NULL;

                r = skip_array_space(p);
                if (r != 0)
                        return r;
                if (peek(p) == ']')
                        break;
                if (peek(p) < 0)
                        return fail(p, start, TOML_E_SYNTAX, "unterminated array");
                r = parse_value(p, depth + 1, &item);
                if (r != 0)
                        return r;
                r = array_append(a, TAKE_PTR(item));
                if (r != 0)
                        return r;
                r = skip_array_space(p);
                if (r != 0)
                        return r;
                if (peek(p) == ']')
                        break;
                if (peek(p) < 0)
                        return fail(p, start, TOML_E_SYNTAX, "unterminated array");
                if (peek(p) != ',')
                        return fail(p, p->pos, TOML_E_SYNTAX, "expected ',' or ']' in array, found %s",
                                    DESCRIBE(p, p->pos));
                p->pos++;
        }
        p->pos++;
        *ret = TAKE_PTR(a);
        return 0;
}

static int inline_table_separator(Parser *p, size_t start, bool *ret_end) {
        size_t comma;

        skip_ws(p);
        if (peek(p) == '}') {
                p->pos++;
                *ret_end = true;
                return 0;
        }
        if (peek(p) < 0)
                return fail(p, start, TOML_E_SYNTAX, "unterminated inline table");
        if (newline_at(p, p->pos) > 0)
                return fail(p, p->pos, TOML_E_SYNTAX, "newline in inline table");
        if (peek(p) != ',')
                return fail(p, p->pos, TOML_E_SYNTAX, "expected ',' or '}' in inline table, found %s",
                            DESCRIBE(p, p->pos));
        comma = p->pos++;
        skip_ws(p);
        if (peek(p) == '}')
                return fail(p, comma, TOML_E_SYNTAX, "trailing comma in inline table");
        *ret_end = false;
        return 0;
}

static int parse_inline_table(Parser *p, unsigned depth, TomlNode **ret) {
        _cleanup_(node_freep) TomlNode *t = NULL;
        size_t start = p->pos;
        bool end = false;
        int r;

        r = node_new(p, TOML_TABLE, start, depth, ORIGIN_INLINE, &t);
        if (r != 0)
                return r;
        p->pos++;
        skip_ws(p);
        if (peek(p) == '}') {
                p->pos++;
                end = true;
        }
        while (!end) {
                r = parse_keyval(p, t, depth);
                if (r == 0)
                        r = inline_table_separator(p, start, &end);
                if (r != 0)
                        return r;
        }
        *ret = TAKE_PTR(t);
        return 0;
}

/* A value whose tables and arrays would be at @depth. */
static int parse_value(Parser *p, unsigned depth, TomlNode **ret) {
        switch (peek(p)) {
        case '"':
        case '\'':
                return parse_string_value(p, ret);
        case '[':
                return parse_array(p, depth, ret);
        case '{':
                return parse_inline_table(p, depth, ret);
        default:
                return parse_bare_value(p, ret);
        }
}

/* ---- the document ---- */

static int parse_document(Parser *p) {
        while (p->pos < p->size) {
                const char *what = "the comment";
                int c, r = 0;

                skip_ws(p);
                c = peek(p);
                if (c == '[') {
                        r = parse_header(p);
                        what = "the table header";
                } else if (c >= 0 && c != '#' && newline_at(p, p->pos) == 0) {
                        r = parse_keyval(p, p->section, p->section_depth);
                        what = "the value";
                }
                if (r == 0)
                        r = expect_line_end(p, what);
                if (r != 0)
                        return r;
        }
        return 0;
}

static void parser_done(Parser *p) {
        free(p->scratch);
        node_freep(&p->root);
}

/**
 * toml_parse() - parse a whole document
 *
 * @text need not be NUL-terminated. A byte order mark is refused, as tomllib
 * refuses it: TOML 1.0 does not allow one.
 *
 * Return: 0 with the root table in *@ret_root; TOML_E_SYNTAX,
 * TOML_E_UNSUPPORTED or TOML_E_LIMIT with *@ret_error filled; -ENOMEM.
 */
int toml_parse(const char *text, size_t size, TomlValue **ret_root, TomlError *ret_error) {
        _cleanup_(parser_done) Parser p = {
                .text = text ? text : "",
                .size = text ? size : 0,
                .loc_line = 1,
                .section_id = 1,
        };
        int r;

        if (size > TOML_INPUT_MAX)
                r = fail(&p, 0, TOML_E_LIMIT, "document larger than %d bytes", TOML_INPUT_MAX);
        else if (starts_with(&p, 0, "\xEF\xBB\xBF"))
                r = fail(&p, 0, TOML_E_SYNTAX, "byte order mark (U+FEFF) at the start of the document");
        else {
                p.root = calloc(1, sizeof(TomlNode));
                if (!p.root)
                        return -ENOMEM;
                p.root->value = (TomlValue){ .type = TOML_TABLE, .line = 1, .column = 1 };
                p.root->origin = ORIGIN_HEADER;
                p.section = p.root;
                r = parse_document(&p);
        }
        if (r == 0 && p.unsupported.message[0] != '\0') {
                p.error = p.unsupported;
                r = TOML_E_UNSUPPORTED;
        }
        if (r > 0 && ret_error)
                *ret_error = p.error;
        if (r != 0)
                return r;

        *ret_root = &TAKE_PTR(p.root)->value;
        return 0;
}

/**
 * toml_table_find() - the entry named @key in @table
 *
 * A linear search, so that it works on any TomlValue; callers that look up
 * many keys in one table should walk its entries instead.
 *
 * Return: the entry, or NULL if there is none or @table is not a table.
 */
const TomlEntry *toml_table_find(const TomlValue *table, const char *key) {
        if (!table || table->type != TOML_TABLE || !key)
                return NULL;
        for (size_t i = 0; i < table->table.n_entries; i++)
                if (strcmp(table->table.entries[i].key, key) == 0)
                        return &table->table.entries[i];
        return NULL;
}

/**
 * toml_value_free() - free a value that toml_parse() returned, and all within
 *
 * Return: NULL.
 */
TomlValue *toml_value_free(TomlValue *v) {
        TomlNode *n = (TomlNode *)v;

        if (!v)
                return NULL;
        switch (v->type) {
        case TOML_TABLE:
                for (size_t i = 0; i < v->table.n_entries; i++) {
                        free(v->table.entries[i].key);
                        toml_value_free(v->table.entries[i].value);
                }
                free(v->table.entries);
                free(n->index);
                break;
        case TOML_ARRAY:
                for (size_t i = 0; i < v->array.n_items; i++)
                        toml_value_free(v->array.items[i]);
                free(v->array.items);
                break;
        case TOML_STRING:
                free(v->string.data);
                break;
        case TOML_INTEGER:
        case TOML_BOOLEAN:
                break;
        }
        free(n);
        return NULL;
}

/**
 * toml_type_to_string() - the TOML name of a type, for messages
 *
 * Return: "table", "array", "string", "integer", "boolean", or NULL.
 */
const char *toml_type_to_string(TomlType t) {
        switch (t) {
        case TOML_TABLE: return "table";
        case TOML_ARRAY: return "array";
        case TOML_STRING: return "string";
        case TOML_INTEGER: return "integer";
        case TOML_BOOLEAN: return "boolean";
        }
        return NULL;
}
