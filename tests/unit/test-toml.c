/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* policy/toml.c: every construct, every class of rejection with its position, and the limits */
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "tests/unit/tap.h"
#include "common/text.h"
#include "policy/toml.h"

static TomlValue *parse_ok(const char *text) {
        TomlValue *root = NULL;
        TomlError e = {};
        int r = toml_parse(text, strlen(text), &root, &e);

        if (r != 0) {
                printf("# unexpected error %d at %u:%u: %s\n# in: %s\n", r, e.line, e.column, e.message, text);
                return NULL;
        }
        return root;
}

/* Does @text fail with @code at @line:@column, with @message in the message? */
static bool fails_n(const char *text, size_t size, int code, unsigned line, unsigned column, const char *message) {
        TomlValue *root = NULL;
        TomlError e = {};
        int r = toml_parse(text, size, &root, &e);

        if (r == code && e.line == line && e.column == column && strstr(e.message, message))
                return true;
        printf("# in: %.*s\n", (int)(size < 200 ? size : 200), text);
        printf("#   want %d at %u:%u \"%s\", got %d at %u:%u \"%s\"\n", code, line, column, message, r, e.line,
               e.column, r > 0 ? e.message : "");
        toml_value_free(root);
        return false;
}

static bool fails(const char *text, int code, unsigned line, unsigned column, const char *message) {
        return fails_n(text, strlen(text), code, line, column, message);
}

#define syntax_error(text, line, column, message) fails(text, TOML_E_SYNTAX, line, column, message)

static const TomlValue *get(const TomlValue *table, const char *key) {
        const TomlEntry *e = toml_table_find(table, key);
        return e ? e->value : NULL;
}

/* The value at a path of keys, one key per argument, through tables only. */
static const TomlValue *at(const TomlValue *v, const char *path) {
        char buf[256], *save = NULL;

        snprintf(buf, sizeof(buf), "%s", path);
        for (char *k = strtok_r(buf, "/", &save); k && v; k = strtok_r(NULL, "/", &save))
                v = get(v, k);
        return v;
}

static bool is_string(const TomlValue *v, const char *s, size_t size) {
        return v && v->type == TOML_STRING && v->string.size == size && memcmp(v->string.data, s, size) == 0 &&
               v->string.data[size] == '\0';
}

static bool is_str(const TomlValue *v, const char *s) {
        return is_string(v, s, strlen(s));
}

static bool is_int(const TomlValue *v, int64_t i) {
        return v && v->type == TOML_INTEGER && v->integer == i;
}

static bool is_bool(const TomlValue *v, bool b) {
        return v && v->type == TOML_BOOLEAN && v->boolean == b;
}

static bool is_table(const TomlValue *v, size_t n) {
        return v && v->type == TOML_TABLE && v->table.n_entries == n;
}

static bool is_array(const TomlValue *v, size_t n) {
        return v && v->type == TOML_ARRAY && v->array.n_items == n;
}

static bool placed(const TomlValue *v, unsigned line, unsigned column) {
        if (v && v->line == line && v->column == column)
                return true;
        printf("#   value at %u:%u, want %u:%u\n", v ? v->line : 0, v ? v->column : 0, line, column);
        return false;
}

static void test_empty_and_comments(void) {
        TomlValue *root;

        root = parse_ok("");
        check(is_table(root, 0) && placed(root, 1, 1));
        toml_value_free(root);
        root = parse_ok("# only a comment");
        check(is_table(root, 0));
        toml_value_free(root);
        root = parse_ok("\n\n  \t\n# c\n  # c \t é ☃\n\r\n");
        check(is_table(root, 0));
        toml_value_free(root);
        check(toml_parse(NULL, 0, &root, NULL) == 0 && is_table(root, 0));
        toml_value_free(root);
        check(toml_value_free(NULL) == NULL);
}

static void test_strings(void) {
        TomlValue *root = parse_ok(
                "basic = \"a\\tb \\\"q\\\" \\\\ \\b\\f\\n\\r\"\n"
                "unicode = \"\\u00e9\\U0001F600\\uFFFF\\U0010ffff\"\n"
                "raw = \"é\t😀\"\n"
                "literal = 'C:\\path\\'\n"
                "nul = \"a\\u0000b\"\n"
                "empty = \"\"\n"
                "ml = \"\"\"\nline1\n  line2\"\"\"\n"
                "ml_cont = \"\"\"a \\\n    \n   b \\   \n c\"\"\"\n"
                "ml_quotes = \"\"\"\"q\" \"\"\"\"\"\n"
                "ml_literal = '''\n\\raw ''quoted'' '''\n"
                "ml_literal_end = '''x'''''\n");

        check(is_str(at(root, "basic"), "a\tb \"q\" \\ \b\f\n\r"));
        check(is_str(at(root, "unicode"), "\xc3\xa9\xf0\x9f\x98\x80\xef\xbf\xbf\xf4\x8f\xbf\xbf"));
        check(is_str(at(root, "raw"), "é\t😀"));
        check(is_str(at(root, "literal"), "C:\\path\\"));
        check(is_string(at(root, "nul"), "a\0b", 3));
        check(is_str(at(root, "empty"), ""));
        check(is_str(at(root, "ml"), "line1\n  line2"));
        check(is_str(at(root, "ml_cont"), "a b c"));
        check(is_str(at(root, "ml_quotes"), "\"q\" \"\""));
        check(is_str(at(root, "ml_literal"), "\\raw ''quoted'' "));
        check(is_str(at(root, "ml_literal_end"), "x''"));
        toml_value_free(root);
}

static void test_crlf(void) {
        TomlValue *root = parse_ok("a = \"\"\"\r\nx\r\ny\"\"\"\r\nb = '''\r\n1\r\n'''\r\n"
                                   "c = \"\"\"p \\\r\n  q\"\"\"\r\n[t] # c\r\nd = [\r\n1,\r\n]\r\n");

        check(is_str(at(root, "a"), "x\ny"));
        check(is_str(at(root, "b"), "1\n"));
        check(is_str(at(root, "c"), "p q"));
        check(is_array(at(root, "t/d"), 1) && placed(at(root, "t/d"), 10, 5));
        toml_value_free(root);
}

static void test_integers(void) {
        TomlValue *root = parse_ok("a = 42\nb = -17\nc = +0\nd = -0\ne = 1_000_000\n"
                                   "f = 9223372036854775807\ng = -9223372036854775808\n"
                                   "h = 0xDEAD_beef\ni = 0o755\nj = 0b1101\nk = 0x7FFFFFFFFFFFFFFF\nl = 0x00\n");

        check(is_int(at(root, "a"), 42));
        check(is_int(at(root, "b"), -17));
        check(is_int(at(root, "c"), 0));
        check(is_int(at(root, "d"), 0));
        check(is_int(at(root, "e"), 1000000));
        check(is_int(at(root, "f"), INT64_MAX));
        check(is_int(at(root, "g"), INT64_MIN));
        check(is_int(at(root, "h"), 0xDEADBEEF));
        check(is_int(at(root, "i"), 0755));
        check(is_int(at(root, "j"), 13));
        check(is_int(at(root, "k"), INT64_MAX));
        check(is_int(at(root, "l"), 0));
        toml_value_free(root);
}

static void test_booleans_arrays_inline_tables(void) {
        TomlValue *root = parse_ok("t = true\nf = false\n"
                                   "a = [ 1, 'two', [3, []], { four = 4 }, ]\n"
                                   "m = [ # comment\n  1,\n  # alone\n  2 # after\n  , 3\n]\n"
                                   "i = { x = 1, y.z = 2, y.w = { } }\n"
                                   "e = {}\n");
        const TomlValue *a = at(root, "a");

        check(is_bool(at(root, "t"), true) && is_bool(at(root, "f"), false));
        check(is_array(a, 4));
        if (is_array(a, 4)) {
                check(is_int(a->array.items[0], 1) && is_str(a->array.items[1], "two"));
                check(is_array(a->array.items[2], 2) && is_array(a->array.items[2]->array.items[1], 0));
                check(is_table(a->array.items[3], 1) && is_int(at(a->array.items[3], "four"), 4));
                check(placed(a->array.items[3], 3, 26));
        }
        check(is_array(at(root, "m"), 3) && is_int(at(root, "m")->array.items[2], 3));
        check(is_table(at(root, "i"), 2) && is_int(at(root, "i/y/z"), 2) && is_table(at(root, "i/y/w"), 0));
        check(is_table(at(root, "e"), 0));
        toml_value_free(root);
}

static void test_keys(void) {
        TomlValue *root = parse_ok("bare-key_1 = 1\n1234 = 2\n\"a b\" = 3\n'lit \\' = 4\n\"\" = 5\n"
                                   "3.14 = 6\n\"x.y\" = 7\nx . y = 8\ntrue = 9\n\"\\u00e9\" = 10\n");

        check(is_int(at(root, "bare-key_1"), 1));
        check(is_int(at(root, "1234"), 2));
        check(is_int(at(root, "a b"), 3));
        check(is_int(at(root, "lit \\"), 4));
        check(is_int(get(root, ""), 5));
        check(is_int(at(root, "3/14"), 6));
        check(is_int(get(root, "x.y"), 7));
        check(is_int(at(root, "x/y"), 8));
        check(is_int(at(root, "true"), 9));
        check(is_int(at(root, "é"), 10));
        check(toml_table_find(root, "missing") == NULL);
        check(toml_table_find(at(root, "true"), "x") == NULL); /* not a table */
        toml_value_free(root);
}

static void test_tables_in_document_order(void) {
        TomlValue *root = parse_ok("z = 1\n[b.c]\nx = 1\n[a]\ny = 2\n[b]\nw = 3\n");

        check(is_table(root, 3));
        if (is_table(root, 3)) {
                check(strcmp(root->table.entries[0].key, "z") == 0);
                check(strcmp(root->table.entries[1].key, "b") == 0);
                check(strcmp(root->table.entries[2].key, "a") == 0);
        }
        check(is_table(at(root, "b"), 2) && is_int(at(root, "b/c/x"), 1) && is_int(at(root, "b/w"), 3));
        toml_value_free(root);
}

static void test_tables_and_dotted_keys(void) {
        TomlValue *root = parse_ok("[fruit]\napple.color = \"red\"\napple.taste.sweet = true\n"
                                   "[fruit.apple.texture]\nsmooth = true\n"
                                   "[x.y.z]\n[x]\ny.w = 1\n"
                                   "[ 'q' . \"r s\" ]\nt = 1\n");

        check(is_str(at(root, "fruit/apple/color"), "red"));
        check(is_bool(at(root, "fruit/apple/taste/sweet"), true));
        check(is_bool(at(root, "fruit/apple/texture/smooth"), true));
        check(is_table(at(root, "x/y/z"), 0) && is_int(at(root, "x/y/w"), 1));
        check(is_int(at(root, "q/r s/t"), 1));
        toml_value_free(root);
}

static void test_arrays_of_tables(void) {
        TomlValue *root = parse_ok("[[fruits]]\nname = \"apple\"\n[fruits.physical]\ncolor = \"red\"\n"
                                   "[[fruits.varieties]]\nname = \"red delicious\"\n"
                                   "[[fruits.varieties]]\nname = \"granny smith\"\n"
                                   "[[fruits]]\nname = \"banana\"\n[[fruits.varieties]]\nname = \"plantain\"\n"
                                   "[[a.b]]\n[a]\nc = 1\n[[a.b]]\n");
        const TomlValue *fruits = at(root, "fruits");

        check(is_array(fruits, 2));
        if (is_array(fruits, 2)) {
                check(is_str(at(fruits->array.items[0], "name"), "apple"));
                check(is_str(at(fruits->array.items[0], "physical/color"), "red"));
                check(is_array(at(fruits->array.items[0], "varieties"), 2));
                check(is_array(at(fruits->array.items[1], "varieties"), 1));
                check(placed(fruits->array.items[1], 9, 1));
        }
        check(is_array(at(root, "a/b"), 2) && is_int(at(root, "a/c"), 1));
        toml_value_free(root);
}

static void test_positions(void) {
        TomlValue *root = parse_ok("# c\nkey = 1\n  [t.u]\n\tx.y = 'v'\n[t]\narr = [\n  true,\n]\n[[aot]]\n");
        const TomlEntry *e;

        e = toml_table_find(root, "key");
        check(e && e->line == 2 && e->column == 1 && placed(e->value, 2, 7));
        e = toml_table_find(root, "t");
        /* the entry is where the key was first written; the table where [t] defined it */
        check(e && e->line == 3 && e->column == 4 && placed(e->value, 5, 1));
        e = toml_table_find(at(root, "t"), "u");
        check(e && e->line == 3 && e->column == 6 && placed(e->value, 3, 3));
        e = toml_table_find(at(root, "t/u"), "x");
        check(e && e->line == 4 && e->column == 2 && placed(e->value, 4, 2));
        e = toml_table_find(at(root, "t/u/x"), "y");
        check(e && e->line == 4 && e->column == 4 && placed(e->value, 4, 8));
        check(placed(at(root, "t/arr"), 6, 7));
        check(is_array(at(root, "t/arr"), 1) && placed(at(root, "t/arr")->array.items[0], 7, 3));
        check(is_array(at(root, "aot"), 1) && placed(at(root, "aot"), 9, 1));
        check(is_array(at(root, "aot"), 1) && placed(at(root, "aot")->array.items[0], 9, 1));
        e = toml_table_find(root, "aot");
        check(e && e->line == 9 && e->column == 3);
        toml_value_free(root);
}

static void test_unsupported(void) {
        check(fails("a = 1\nb = 3.14\n", TOML_E_UNSUPPORTED, 2, 5, "floats are not supported"));
        check(fails("a = [1, 5e3]\n", TOML_E_UNSUPPORTED, 1, 9, "floats"));
        check(fails("a = -inf\n", TOML_E_UNSUPPORTED, 1, 5, "floats"));
        check(fails("a = nan\n", TOML_E_UNSUPPORTED, 1, 5, "floats"));
        check(fails("a = 1979-05-27T07:32:00Z\n", TOML_E_UNSUPPORTED, 1, 5, "dates and times"));
        check(fails("a = 1979-05-27 07:32:00.5+01:00\n", TOML_E_UNSUPPORTED, 1, 5, "dates and times"));
        check(fails("a = { b = 07:32:00 }\n", TOML_E_UNSUPPORTED, 1, 11, "dates and times"));
        check(fails("a = 2000-02-29\n", TOML_E_UNSUPPORTED, 1, 5, "dates and times"));
        check(fails("\"a\\u0000\" = 1\n", TOML_E_UNSUPPORTED, 1, 1, "U+0000"));
        check(fails("[x.\"\\u0000\"]\n", TOML_E_UNSUPPORTED, 1, 4, "U+0000"));
        /* the first is reported */
        check(fails("a = 1.5\nb = 1979-05-27\n", TOML_E_UNSUPPORTED, 1, 5, "floats"));
        /* unsupported means valid TOML: an error anywhere else wins */
        check(syntax_error("a = 1.5\nb = yes\n", 2, 5, "invalid value 'yes'"));
        check(syntax_error("a = 1.5\na = 2\n", 2, 1, "duplicate key 'a'"));
        check(syntax_error("\"\\u0000\" = 1\n\"\\u0000\" = 2\n", 2, 1, "duplicate key"));
        check(syntax_error("a = 1979-05-27 x\n", 1, 16, "expected end of line"));
        check(syntax_error("a = 1.\n", 1, 5, "invalid number '1.'"));
        check(syntax_error("a = 1979-02-30\n", 1, 5, "invalid date or time"));
        check(syntax_error("a = 07:32:00Z\n", 1, 5, "invalid date or time"));
}

static void test_lexical_errors(void) {
        check(syntax_error("\xef\xbb\xbf" "a = 1\n", 1, 1, "byte order mark"));
        check(syntax_error("a = \"x\xffy\"\n", 1, 7, "invalid UTF-8 in string"));
        check(syntax_error("a = \"\xed\xa0\x80\"\n", 1, 6, "invalid UTF-8"));
        check(syntax_error("a = \"\xc0\xaf\"\n", 1, 6, "invalid UTF-8"));
        check(syntax_error("a = 1 # \xe2\x98", 1, 9, "invalid UTF-8 in comment"));
        check(syntax_error("# ok\n# bell \a\n", 2, 8, "control character U+0007 in comment"));
        check(syntax_error("# del \x7f\n", 1, 7, "control character U+007F in comment"));
        check(fails_n("# nul \0\n", 8, TOML_E_SYNTAX, 1, 7, "control character U+0000 in comment"));
        check(syntax_error("a = \"\a\"\n", 1, 6, "control character U+0007 in string"));
        check(syntax_error("a = 'x\x1b'\n", 1, 7, "control character U+001B in string"));
        check(syntax_error("a = \"\"\"\n\x7f\"\"\"\n", 2, 1, "control character U+007F in string"));
        check(syntax_error("a = '''a\rb'''\n", 1, 9, "control character U+000D"));
        check(syntax_error("a = 1\rb = 2\n", 1, 6, "carriage return without a line feed"));
        check(syntax_error("a = 1\r", 1, 6, "carriage return"));
        check(syntax_error("a =\f1\n", 1, 4, "expected a value, found U+000C"));
        check(syntax_error("a =\xc2\xa0" "1\n", 1, 4, "found U+00A0"));
}

static void test_string_errors(void) {
        check(syntax_error("a = \"\\q\"\n", 1, 6, "invalid escape '\\q'"));
        check(syntax_error("a = \"\\x41\"\n", 1, 6, "invalid escape '\\x'"));
        check(syntax_error("a = \"\\e\"\n", 1, 6, "invalid escape '\\e'"));
        check(syntax_error("a = \"\\ \"\n", 1, 6, "invalid escape: '\\' followed by a space"));
        check(syntax_error("a = \"\\u12\"\n", 1, 6, "expected 4 hex digits"));
        check(syntax_error("a = \"\\U0001F60\"\n", 1, 6, "expected 8 hex digits"));
        check(syntax_error("a = \"\\uD800\"\n", 1, 6, "invalid escape '\\uD800': not a Unicode scalar value"));
        check(syntax_error("a = \"ok \\uDFFF\"\n", 1, 9, "not a Unicode scalar value"));
        check(syntax_error("a = \"\\U00110000\"\n", 1, 6, "'\\U00110000': not a Unicode scalar value"));
        check(syntax_error("x = 1\na = \"abc\n", 2, 5, "unterminated string"));
        check(syntax_error("a = 'abc", 1, 5, "unterminated string"));
        check(syntax_error("a = \"abc\\", 1, 5, "unterminated string"));
        check(syntax_error("a = \"\"\"abc\"\"\n", 1, 5, "unterminated string"));
        check(syntax_error("a = '''abc\n", 1, 5, "unterminated string"));
        check(syntax_error("a = \"\"\"a\"\"\"\"\"\"\n", 1, 14, "too many quotes"));
        check(syntax_error("a = '''a''''''\n", 1, 14, "too many quotes"));
        check(syntax_error("a = \"\"\"a\\ b\"\"\"\n", 1, 9, "invalid escape"));
        check(syntax_error("a = \"a\"b\n", 1, 8, "expected end of line after the value, found 'b'"));
}

static void test_integer_errors(void) {
        check(syntax_error("a = 01\n", 1, 5, "leading zeros are not allowed in '01'"));
        check(syntax_error("a = -0_1\n", 1, 5, "leading zeros"));
        check(syntax_error("a = 1__2\n", 1, 5, "invalid number '1__2'"));
        check(syntax_error("a = 1_\n", 1, 5, "invalid number"));
        check(syntax_error("a = _1\n", 1, 5, "invalid value '_1'"));
        check(syntax_error("a = +0x1\n", 1, 5, "invalid number"));
        check(syntax_error("a = 0X1\n", 1, 5, "invalid number"));
        check(syntax_error("a = 0x_1\n", 1, 5, "invalid number"));
        check(syntax_error("a = 0b102\n", 1, 5, "invalid number"));
        check(syntax_error("a = 0o8\n", 1, 5, "invalid number"));
        check(syntax_error("a = 9223372036854775808\n", 1, 5, "out of range"));
        check(syntax_error("a = -9223372036854775809\n", 1, 5, "out of range"));
        check(syntax_error("a = 0x8000000000000000\n", 1, 5, "out of range"));
        check(syntax_error("a = 99999999999999999999999\n", 1, 5, "out of range"));
        check(syntax_error("a = True\n", 1, 5, "invalid value 'True'"));
        check(syntax_error("a = truex\n", 1, 5, "invalid value 'truex'"));
        check(syntax_error("a = 1 2\n", 1, 7, "expected end of line after the value, found '2'"));
}

static void test_key_errors(void) {
        check(syntax_error("= 1\n", 1, 1, "expected a key, found '='"));
        check(syntax_error("a =\nb = 1\n", 1, 4, "expected a value, found end of line"));
        check(syntax_error("a = # c\n", 1, 5, "expected a value, found '#'"));
        check(syntax_error("a\n= 1\n", 1, 2, "expected '=' after key, found end of line"));
        check(syntax_error("a b = 1\n", 1, 3, "expected '=' after key, found 'b'"));
        check(syntax_error("a. = 1\n", 1, 4, "expected a key, found '='"));
        check(syntax_error("a..b = 1\n", 1, 3, "expected a key, found '.'"));
        check(syntax_error("é = 1\n", 1, 1, "expected a key, found U+00E9"));
        check(syntax_error("\"\"\"a\"\"\" = 1\n", 1, 1, "a multi-line string cannot be a key"));
        check(syntax_error("a = 1 b = 2\n", 1, 7, "expected end of line"));
        check(syntax_error("a = 1\nb = 2\na = 3\n", 3, 1, "duplicate key 'a'"));
        check(syntax_error("a = 1\n\"a\" = 2\n", 2, 1, "duplicate key \"a\""));
        check(syntax_error("\"é\" = 1\n\"\\u00e9\" = 2\n", 2, 1, "duplicate key"));
        check(syntax_error("'' = 1\n\"\" = 2\n", 2, 1, "duplicate key \"\""));
        check(syntax_error("[t]\nx.y = 1\nx.y = 2\n", 3, 3, "duplicate key 'y'"));
}

static void test_long_keys_in_messages(void) {
        char text[512] = "\"", *o = text + 1;
        TomlValue *root = NULL;
        TomlError e;

        /* a key of 100 two-byte characters, twice: the message quotes part of it, in whole characters */
        for (int i = 0; i < 100; i++)
                o = mempcpy(o, "é", 2);
        o = mempcpy(o, "\" = 1\n", 6);
        memcpy(o, text, (size_t)(o - text));
        o += o - text;
        check(toml_parse(text, (size_t)(o - text), &root, &e) == TOML_E_SYNTAX);
        check(e.line == 2 && e.column == 1 && strstr(e.message, "duplicate key \"éé"));
        check(strlen(e.message) < sizeof(e.message) && utf8_is_valid(e.message, strlen(e.message)));
}

static void test_table_errors(void) {
        check(syntax_error("[a]\nx = 1\n[a]\n", 3, 1, "table [a] defined twice"));
        check(syntax_error("[a]\n[a.b]\n  [ a ]\n", 3, 3, "table [a] defined twice"));
        check(syntax_error("[a.b]\n[\"a\".'b']\n", 2, 1, "table [\"a\".'b'] defined twice"));
        check(syntax_error("a.b = 1\n[a]\n", 2, 1, "table [a] is already defined by dotted keys"));
        check(syntax_error("[a]\nb.c = 1\n[a.b]\n", 3, 1, "table [a.b] is already defined by dotted keys"));
        check(syntax_error("a = {}\n[a]\n", 2, 1, "table [a] is already defined as an inline table"));
        check(syntax_error("a = {}\n[a.b]\n", 2, 2, "inline table 'a' cannot be extended"));
        check(syntax_error("a = 1\n[a]\n", 2, 2, "key 'a' is an integer, not a table"));
        check(syntax_error("a = 'x'\n[a.b]\n", 2, 2, "key 'a' is a string, not a table"));
        check(syntax_error("a = [{}]\n[a.b]\n", 2, 2, "key 'a' is an array, not a table"));
        check(syntax_error("[[a]]\n[a]\n", 2, 2, "key 'a' is an array of tables, not a table"));
        check(syntax_error("[]\n", 1, 2, "expected a key, found ']'"));
        check(syntax_error("[a\n", 1, 3, "expected ']' after the table name, found end of line"));
        check(syntax_error("[a]]\n", 1, 4, "expected end of line after the table header, found ']'"));
        check(syntax_error("[ [a] ]\n", 1, 3, "expected a key, found '['"));
        check(syntax_error("[a] b = 1\n", 1, 5, "expected end of line after the table header"));
        check(syntax_error("[a]\n[[a]]\n", 2, 3, "key 'a' is a table, not an array of tables"));
        check(syntax_error("a = []\n[[a]]\n", 2, 3, "static array 'a' cannot be extended"));
        check(syntax_error("a = true\n[[a]]\n", 2, 3, "key 'a' is a boolean, not an array of tables"));
        check(syntax_error("[[a] ]\n", 1, 4, "expected ']]' after the table name"));
        check(syntax_error("[[a]]\n[a.b]\n[a.b]\n", 3, 1, "table [a.b] defined twice"));
}

static void test_dotted_key_errors(void) {
        check(syntax_error("a = 1\na.b = 2\n", 2, 1, "key 'a' is an integer, not a table"));
        check(syntax_error("a.b = 1\na = 2\n", 2, 1, "duplicate key 'a'"));
        check(syntax_error("a = {b = 1}\na.c = 2\n", 2, 1, "inline table 'a' cannot be extended"));
        check(syntax_error("[a.b.c]\nz = 9\n[a]\nb.c.t = 1\n", 4, 3, "table 'c' has a [header]"));
        check(syntax_error("[[a.b]]\n[a]\nb.c = 1\n", 3, 1, "key 'b' is an array of tables, not a table"));
        check(syntax_error("a = [1]\na.b = 1\n", 2, 1, "key 'a' is an array, not a table"));
}

static void test_inline_table_and_array_errors(void) {
        check(syntax_error("a = {b = 1,}\n", 1, 11, "trailing comma in inline table"));
        check(syntax_error("a = {b = 1\n}\n", 1, 11, "newline in inline table"));
        check(syntax_error("a = {\nb = 1}\n", 1, 6, "expected a key, found end of line"));
        check(syntax_error("a = {b = 1 c = 2}\n", 1, 12, "expected ',' or '}' in inline table, found 'c'"));
        check(syntax_error("a = {b = 1", 1, 5, "unterminated inline table"));
        check(syntax_error("a = {b = 1, b = 2}\n", 1, 13, "duplicate key 'b'"));
        check(syntax_error("a = {b = {c = 1}, b.d = 2}\n", 1, 19, "inline table 'b' cannot be extended"));
        check(syntax_error("a = [1 2]\n", 1, 8, "expected ',' or ']' in array, found '2'"));
        check(syntax_error("a = [1,,2]\n", 1, 8, "expected a value, found ','"));
        check(syntax_error("a = [,]\n", 1, 6, "expected a value, found ','"));
        check(syntax_error("x = 1\na = [1,\n2\n", 2, 5, "unterminated array"));
        check(syntax_error("a = [1 # ]\n", 1, 5, "unterminated array"));
}

/* @head, @unit @n times, @middle, @close @n times: a nest of @n levels */
static char *nest(const char *head, const char *unit, size_t n, const char *middle, const char *close) {
        size_t h = strlen(head), u = strlen(unit), m = strlen(middle), c = strlen(close);
        char *s = malloc(h + (u + c) * n + m + 1), *o = s;

        if (!s)
                abort();
        o = mempcpy(o, head, h);
        for (size_t i = 0; i < n; i++)
                o = mempcpy(o, unit, u);
        o = mempcpy(o, middle, m);
        for (size_t i = 0; i < n; i++)
                o = mempcpy(o, close, c);
        *o = '\0';
        return s;
}

static bool parses(const char *text) {
        TomlValue *root = NULL;
        TomlError e;
        int r = toml_parse(text, strlen(text), &root, &e);

        toml_value_free(root);
        if (r != 0)
                printf("#   error %d at %u:%u: %s\n", r, e.line, e.column, e.message);
        return r == 0;
}

static void test_depth_limit(void) {
        char *s;

        /* TOML_DEPTH_MAX levels of tables and arrays are fine, one more is not, however they nest */
        s = nest("a = ", "[", TOML_DEPTH_MAX, "1", "]");
        check(parses(s));
        free(s);
        s = nest("a = ", "[", TOML_DEPTH_MAX + 1, "1", "]");
        check(fails(s, TOML_E_LIMIT, 1, 37, "nested deeper than 32"));
        free(s);
        s = nest("a = ", "{b = ", TOML_DEPTH_MAX, "1", "}");
        check(parses(s));
        free(s);
        s = nest("a = ", "{b = ", TOML_DEPTH_MAX + 1, "1", "}");
        check(fails(s, TOML_E_LIMIT, 1, 165, "nested deeper than 32"));
        free(s);
        s = nest("", "k.", TOML_DEPTH_MAX, "k = 1\n", "");
        check(parses(s));
        free(s);
        s = nest("[a]\n", "k.", TOML_DEPTH_MAX, "k = 1\n", "");
        check(fails(s, TOML_E_LIMIT, 2, 63, "nested deeper than 32"));
        free(s);
        /* a key of more parts than could ever fit is refused as soon as it is read */
        s = nest("", "k.", 1000, "k = 1\n", "");
        check(fails(s, TOML_E_LIMIT, 1, 67, "key of more than 33 parts"));
        free(s);
        s = nest("[k", ".k", TOML_DEPTH_MAX - 1, "]\n", "");
        check(parses(s));
        free(s);
        s = nest("[[k", ".k", TOML_DEPTH_MAX - 1, "]]\n", "");
        check(fails(s, TOML_E_LIMIT, 1, 65, "nested deeper than 32"));
        free(s);
}

static void test_value_and_size_limits(void) {
        TomlValue *root = NULL;
        TomlError e;
        char *s, *big;
        size_t n = 0;
        clock_t t0;

        s = nest("a = [", "0,", TOML_VALUES_MAX - 1, "]\n", "");
        check(parses(s));
        free(s);
        s = nest("a = [", "0,", TOML_VALUES_MAX, "]\n", "");
        check(fails(s, TOML_E_LIMIT, 1, 6 + 2 * (TOML_VALUES_MAX - 1), "more than 100000 values"));
        free(s);

        big = malloc(TOML_INPUT_MAX + 1);
        if (!big)
                abort();
        memset(big, '\n', TOML_INPUT_MAX + 1);
        check(toml_parse(big, TOML_INPUT_MAX, &root, &e) == 0);
        root = toml_value_free(root);
        check(fails_n(big, TOML_INPUT_MAX + 1, TOML_E_LIMIT, 1, 1, "larger than 1048576 bytes"));

        /* as many keys as values may be in one table, in sorted order (the worst for an unbalanced
         * tree), then a duplicate: no quadratic work */
        t0 = clock();
        for (unsigned i = 0; i < TOML_VALUES_MAX - 1; i++)
                n += (size_t)sprintf(big + n, "k%05x=1\n", i);
        n += (size_t)sprintf(big + n, "k%05x=1\n", 5u);
        check(n <= TOML_INPUT_MAX);
        check(fails_n(big, n, TOML_E_SYNTAX, TOML_VALUES_MAX, 1, "duplicate key 'k00005'"));
        check((double)(clock() - t0) / CLOCKS_PER_SEC < 2.0);
        free(big);
}

static void test_no_read_past_end(void) {
        /* every prefix of a document that uses every construct, from a buffer of exactly its size */
        static const char doc[] = "a = \"\\u00e9\"\nb = '''x'''\n[t.u]\nc = [1, {d = 0x1F}]\n[[e]]\nf = true # c\n";
        size_t n = sizeof(doc) - 1;
        int ok = 0;

        for (size_t i = 0; i <= n; i++) {
                char *copy = malloc(i ? i : 1);
                TomlValue *root = NULL;
                TomlError e;
                int r;

                if (!copy)
                        abort();
                memcpy(copy, doc, i);
                r = toml_parse(copy, i, &root, &e);
                ok += r == 0 || r == TOML_E_SYNTAX;
                toml_value_free(root);
                free(copy);
        }
        check(ok == (int)n + 1);
}

static void test_type_names(void) {
        check(strcmp(toml_type_to_string(TOML_TABLE), "table") == 0);
        check(strcmp(toml_type_to_string(TOML_ARRAY), "array") == 0);
        check(strcmp(toml_type_to_string(TOML_STRING), "string") == 0);
        check(strcmp(toml_type_to_string(TOML_INTEGER), "integer") == 0);
        check(strcmp(toml_type_to_string(TOML_BOOLEAN), "boolean") == 0);
        check(toml_type_to_string((TomlType)99) == NULL);
}

int main(void) {
        run_test(test_empty_and_comments);
        run_test(test_strings);
        run_test(test_crlf);
        run_test(test_integers);
        run_test(test_booleans_arrays_inline_tables);
        run_test(test_keys);
        run_test(test_tables_in_document_order);
        run_test(test_tables_and_dotted_keys);
        run_test(test_arrays_of_tables);
        run_test(test_positions);
        run_test(test_unsupported);
        run_test(test_lexical_errors);
        run_test(test_string_errors);
        run_test(test_integer_errors);
        run_test(test_key_errors);
        run_test(test_long_keys_in_messages);
        run_test(test_table_errors);
        run_test(test_dotted_key_errors);
        run_test(test_inline_table_and_array_errors);
        run_test(test_depth_limit);
        run_test(test_value_and_size_limits);
        run_test(test_no_read_past_end);
        run_test(test_type_names);
        return tap_finish();
}
