/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A strict TOML 1.0 parser for policy files: pure, bounded, no I/O, no logging */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Supported: everything TOML 1.0 has except floats and date/time values,
 * which a policy never holds: tables, arrays of tables, dotted and quoted
 * keys, inline tables, basic and literal strings (single- and multi-line,
 * all escapes), integers (decimal, hex, octal, binary, underscores),
 * booleans, arrays, comments. Floats and date/times are refused with
 * TOML_E_UNSUPPORTED, at their position.
 *
 * Everything TOML rejects is rejected: duplicate keys, redefined tables,
 * extending inline tables or static arrays, bad escapes, invalid UTF-8,
 * control characters, integers out of range, leading zeros...
 */

/* limits on untrusted input; exceeding one is TOML_E_LIMIT */
#define TOML_INPUT_MAX (1024 * 1024)
#define TOML_DEPTH_MAX 32        /* nesting of tables and arrays */
#define TOML_VALUES_MAX 100000   /* values in the whole document */

enum {
        _TOML_E_SUCCESS,
        TOML_E_SYNTAX,      /* not TOML */
        TOML_E_UNSUPPORTED, /* valid TOML, but a float or a date/time */
        TOML_E_LIMIT,       /* too large, too deep, too many values */
};

typedef enum TomlType {
        TOML_TABLE,
        TOML_ARRAY,
        TOML_STRING,
        TOML_INTEGER,
        TOML_BOOLEAN,
} TomlType;

typedef struct TomlValue TomlValue;

typedef struct TomlEntry {
        char *key;          /* UTF-8, NUL-terminated; may not contain NUL (a key with \u0000 is refused) */
        unsigned line, column; /* of the key's first character, 1-based; column counts bytes */
        TomlValue *value;
} TomlEntry;

struct TomlValue {
        TomlType type;
        unsigned line, column; /* where the value starts; for a table, where it was first defined */
        union {
                struct {
                        char *data; /* UTF-8, NUL-terminated; may contain NUL from \u0000, so use size */
                        size_t size;
                } string;
                int64_t integer;
                bool boolean;
                struct {
                        TomlValue **items;
                        size_t n_items;
                } array;
                struct {
                        TomlEntry *entries; /* in document order */
                        size_t n_entries;
                } table;
        };
};

typedef struct TomlError {
        unsigned line, column; /* 1-based; column counts bytes from the line's start */
        char message[128];
} TomlError;

/*
 * toml_parse() - parse a whole document
 *
 * Return: 0 with the root table in *@ret_root; TOML_E_SYNTAX,
 * TOML_E_UNSUPPORTED or TOML_E_LIMIT with *@ret_error filled; -ENOMEM.
 */
int toml_parse(const char *text, size_t size, TomlValue **ret_root, TomlError *ret_error);

/* The entry named @key in @table, or NULL. */
const TomlEntry *toml_table_find(const TomlValue *table, const char *key);

TomlValue *toml_value_free(TomlValue *v);
const char *toml_type_to_string(TomlType t);
