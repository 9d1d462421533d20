/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Heuristics for "this environment variable looks like it carries a secret", for names and for
 * values (env-secret.h). Pure and bounded: every check is a pass, or a few, over the string.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/cleanup.h"
#include "policy/env-secret.h"

static char lower(char c) {
        return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static bool is_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Does @s begin with @prefix, ASCII case ignored? */
static bool has_prefix_ci(const char *s, const char *prefix) {
        for (; *prefix; s++, prefix++)
                if (lower(*s) != lower(*prefix))
                        return false;
        return true;
}

/* Does s[0..@n) end with @suffix, ASCII case ignored? */
static bool has_suffix_ci(const char *s, size_t n, const char *suffix) {
        size_t m = strlen(suffix);

        return m <= n && has_prefix_ci(s + n - m, suffix);
}

/* Does @s hold @needle, ASCII case ignored? @needle is short: strlen(s) x strlen(needle) steps. */
static bool contains_ci(const char *s, const char *needle) {
        for (; *s; s++)
                if (has_prefix_ci(s, needle))
                        return true;
        return false;
}

/* ---- names ---- */

static bool is_name_separator(char c) {
        return c == '_' || c == '.' || c == '-' || c == ':';
}

/* Words that name a secret wherever they stand in a name. */
static const char *const secret_name_words[] = {
        "PASSW", "PASSPHRASE", "SECRET", "TOKEN", "KEY", "CRED", "AUTH", "PRIVATE", "CERT", "CONNSTR",
        "CONNECTION", "DSN", "SALT", "JWT", "BEARER", "COOKIE", "SIGNING",
};

/* A component of a name, s[0..@n), that names a secret on its own; @alone when it is the whole name. */
static bool secret_name_component(const char *s, size_t n, bool alone) {
        static const char *const whole[] = { "SIG", "SAS" };

        for (size_t i = 0; i < ELEMENTSOF(whole); i++)
                if (n == strlen(whole[i]) && has_prefix_ci(s, whole[i]))
                        return true;
        /* ends: a camel-cased compound (SmtpPw, DbPin) names its secret in its last word */
        return has_suffix_ci(s, n, "PASS") || has_suffix_ci(s, n, "PW") || has_suffix_ci(s, n, "PIN") ||
               (!alone && has_suffix_ci(s, n, "PWD"));
}

bool env_name_looks_secret(const char *name) {
        size_t n = strlen(name);

        for (size_t i = 0; i < ELEMENTSOF(secret_name_words); i++)
                if (contains_ci(name, secret_name_words[i]))
                        return true;
        for (size_t start = 0, end; start <= n; start = end + 1) {
                for (end = start; end < n && !is_name_separator(name[end]); end++)
                        ;
                if (end > start && secret_name_component(name + start, end - start, start == 0 && end == n))
                        return true;
        }
        return false;
}

/* ---- values ---- */

/* Keys whose value is a secret, as the end of the word before '=' (or a quoted key's ':'). */
static const char *const secret_keys[] = {
        "password", "pwd", "passwd", "pass", "secret", "key", "token", "sig", "signature", "credential",
        "credentials", "auth", "authorization", "code", "pin", "otp", "hmac", "session", "sessionid", "sid",
        "ticket",
};

static bool is_key_char(char c) {
        return is_alnum(c) || c == '_' || c == '-' || c == '.';
}

static bool is_blank(char c) {
        return c == ' ' || c == '\t';
}

/*
 * The word before value[@at] ('=' or ':') names a secret: "Password=", "AccountKey =",
 * "\"token\":", "\"token\" :" (Jackson's pretty printer). Blanks before '=' or the quote are skipped.
 */
static bool secret_key_before(const char *value, size_t at) {
        size_t end = at, start;

        if (value[at] == ':') {
                while (end > 0 && is_blank(value[end - 1]))
                        end--;
                /* only a quoted key: "host:port" and "scheme:" are not keys */
                if (end == 0 || (value[end - 1] != '"' && value[end - 1] != '\''))
                        return false;
                end--;
        }
        while (end > 0 && is_blank(value[end - 1]))
                end--;
        for (start = end; start > 0 && is_key_char(value[start - 1]); start--)
                ;
        for (size_t i = 0; i < ELEMENTSOF(secret_keys); i++)
                if (has_suffix_ci(value + start, end - start, secret_keys[i]))
                        return true;
        return false;
}

static bool has_secret_pair(const char *value) {
        for (size_t i = 0; value[i]; i++)
                if ((value[i] == '=' || value[i] == ':') && secret_key_before(value, i))
                        return true;
        return false;
}

static bool ends_authority(char c) {
        return c == '\0' || c == '/' || c == '?' || c == '#' || c == ' ' || c == ',' || c == ';' || c == '"' ||
               c == '\'';
}

/* A user part in a URL's authority (scheme://user@host, scheme://user:pass@host). */
static bool has_url_user(const char *value) {
        for (const char *s = strstr(value, "://"); s; s = strstr(s, "://")) {
                for (s += 3; !ends_authority(*s); s++)
                        if (*s == '@')
                                return true;
        }
        return false;
}

/* user:pass@host without a scheme: a ':' before an '@' within one word. */
static bool has_host_password(const char *value) {
        bool colon = false;

        for (const char *s = value; *s; s++) {
                if (*s == '@' && colon)
                        return true;
                if (*s == ':')
                        colon = true;
                else if (ends_authority(*s) || *s == '=')
                        colon = false;
        }
        return false;
}

static bool is_base64url(char c) {
        return is_alnum(c) || c == '-' || c == '_';
}

static size_t base64url_run(const char *s) {
        size_t n = 0;

        while (is_base64url(s[n]))
                n++;
        return n;
}

/* Are there @k base64url characters at @s? At most @k steps, wherever the run ends. */
static bool base64url_at_least(const char *s, size_t k) {
        for (size_t i = 0; i < k; i++)
                if (!is_base64url(s[i]))
                        return false;
        return true;
}

/*
 * A JSON Web Token: a header "eyJ..." and a payload, base64url, joined by '.'. The search goes
 * on past the run it looked at: another "eyJ" inside it ends at the same place.
 */
static bool has_jwt(const char *value) {
        for (const char *s = strstr(value, "eyJ"); s; s = strstr(s, "eyJ")) {
                size_t header = base64url_run(s);

                if (header >= 10 && s[header] == '.' && base64url_at_least(s + header + 1, 10))
                        return true;
                s += header;
        }
        return false;
}

/* Prefixes that begin the keys of cloud and SaaS services, followed by this many key characters at least. */
static const struct {
        const char *prefix;
        size_t rest;
} key_shapes[] = {
        { "AKIA", 12 }, { "ASIA", 12 }, { "AIza", 20 }, { "sk_live_", 8 }, { "sk_test_", 8 }, { "rk_live_", 8 },
        { "rk_test_", 8 }, { "whsec_", 8 }, { "ghp_", 8 }, { "gho_", 8 }, { "ghu_", 8 }, { "ghs_", 8 },
        { "ghr_", 8 }, { "github_pat_", 8 }, { "glpat-", 8 }, { "xoxb-", 8 }, { "xoxp-", 8 }, { "xoxa-", 8 },
        { "xoxs-", 8 }, { "xoxr-", 8 }, { "SG.", 16 }, { "npm_", 16 },
};

/* One of key_shapes at s, where a word begins. */
static bool key_shape_at(const char *s) {
        for (size_t i = 0; i < ELEMENTSOF(key_shapes); i++) {
                size_t m = strlen(key_shapes[i].prefix);

                if (strncmp(s, key_shapes[i].prefix, m) == 0 && base64url_at_least(s + m, key_shapes[i].rest))
                        return true;
        }
        return false;
}

static bool has_key_shape(const char *value) {
        for (size_t i = 0; value[i]; i++)
                if ((i == 0 || !is_alnum(value[i - 1])) && key_shape_at(value + i))
                        return true;
        return false;
}

/* "Bearer x", "Basic x", as in an Authorization header. */
static bool has_http_credentials(const char *value) {
        for (size_t i = 0; value[i]; i++)
                if ((i == 0 || !is_alnum(value[i - 1])) &&
                    (has_prefix_ci(value + i, "bearer ") || has_prefix_ci(value + i, "basic ")))
                        return true;
        return false;
}

typedef struct RunClasses {
        size_t length;
        bool upper, lower, digit;
} RunClasses;

static void run_add(RunClasses *r, char c) {
        r->length++;
        r->upper |= c >= 'A' && c <= 'Z';
        r->lower |= c >= 'a' && c <= 'z';
        r->digit |= c >= '0' && c <= '9';
}

static bool run_is_random(const RunClasses *r) {
        return (r->length >= 16 && r->upper && r->lower && r->digit) ||
               (r->length >= 32 && (r->upper || r->lower) && r->digit);
}

/* A random-looking run of [A-Za-z0-9+=]; or the whole value base64, '/' included, not a path. */
static bool has_random_run(const char *value) {
        RunClasses run = {}, whole = {};
        bool base64 = value[0] != '/';

        for (const char *s = value;; s++) {
                if (is_alnum(*s) || *s == '+' || *s == '=') {
                        run_add(&run, *s);
                        run_add(&whole, *s);
                        continue;
                }
                if (run_is_random(&run))
                        return true;
                run = (RunClasses){};
                if (*s == '\0')
                        break;
                if (*s == '/')
                        whole.length++;
                else
                        base64 = false;
        }
        return base64 && whole.length >= 20 && whole.upper && whole.lower && whole.digit;
}

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

static bool is_letter(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_hex(char c) {
        return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* @n hex digits at @s, then @end ('\0' for "whatever follows"). At most @n + 1 steps. */
static bool hex_group_at(const char *s, size_t n, char end) {
        for (size_t i = 0; i < n; i++)
                if (!is_hex(s[i]))
                        return false;
        return end == '\0' || s[n] == end;
}

/*
 * A UUID's shape, 8-4-4-4-12 hex digits, anywhere: API keys, SDK keys (sdk-<uuid>), client ids
 * and secrets, webhook paths. Wherever it stands, whatever stands around it.
 */
static bool has_uuid(const char *value) {
        for (const char *s = value; *s; s++)
                if (hex_group_at(s, 8, '-') && hex_group_at(s + 9, 4, '-') && hex_group_at(s + 14, 4, '-') &&
                    hex_group_at(s + 19, 4, '-') && hex_group_at(s + 24, 12, '\0'))
                        return true;
        return false;
}

/* Is s[0..@n), all digits, a round number: a multiple of 1000 or 1024 (a size, a limit, a duration)? */
static bool is_round_number(const char *s, size_t n) {
        uint64_t v = 0;

        if (n > 19)
                return false; /* past 2^63: no size a setting takes */
        for (size_t i = 0; i < n; i++)
                v = v * 10 + (uint64_t)(s[i] - '0');
        return v % 1000 == 0 || v % 1024 == 0;
}

/*
 * Eight digits or more in a row (passcodes, PINs, account and card numbers, phone numbers, the
 * numeric ids of webhook paths), unless they are a number written in hex after "0x"
 * (0x10000000, a GC heap limit) or a round one (16777216, 100000000: sizes and limits); or a
 * whole value of ten digits or more in groups (4111 1111 1111 1111, +49 170 1234567; a date's
 * eight are not).
 */
static bool has_long_digits(const char *value) {
        size_t run = 0, digits = 0;
        bool hex_number = false, grouped = true;

        for (size_t i = 0;; i++) {
                char c = value[i];

                if (is_digit(c)) {
                        run++;
                        digits++;
                } else {
                        if (run >= 8 && !hex_number && !is_round_number(value + i - run, run))
                                return true;
                        run = 0;
                }
                if (c == '\0')
                        break;
                if (c == '0' && (value[i + 1] == 'x' || value[i + 1] == 'X') && (i == 0 || !is_alnum(value[i - 1])))
                        hex_number = true;
                else if (!is_hex(c) && !((c == 'x' || c == 'X') && i > 0 && value[i - 1] == '0'))
                        hex_number = false;
                if (!is_digit(c) && !((c == ' ' || c == '-') && i > 0 && is_digit(value[i - 1])) &&
                    !(c == '+' && i == 0))
                        grouped = false;
        }
        return grouped && digits >= 10;
}

static bool is_user_char(char c) {
        return is_alnum(c) || c == '.' || c == '_' || c == '-';
}

/* Where a word may begin: the value's start, or after a blank or one of the characters that part words. */
static bool begins_word(const char *value, size_t at) {
        return at == 0 || is_blank(value[at - 1]) || strchr(",;=\"'({[<\n", value[at - 1]);
}

/*
 * user:password, as in a login, an FTP or SMTP account, a basic-auth pair. The user: a word
 * ([A-Za-z0-9._@-], a letter first) that begins the value or follows a blank, a quote, '=' or a
 * separator (not a '/' or ':': paths, URLs, chains as Provider:Keywords:Level). The password:
 * what follows up to a blank, a quote, ',' or ';', at least six characters, not a number (a
 * port), nor hex after 0x, nor a path, with a letter and a digit or a character that is no
 * letter, digit, '.', '_' or '-' (Winter2025!, hunter2, P@ss). One that holds ':' or '/' is
 * something else (a time, an IPv6 address, a URL's rest). Each character is looked at at most
 * twice.
 */
static bool has_user_password(const char *value) {
        for (size_t i = 0; value[i]; i++) {
                size_t start = i, end;
                bool letter = false, digit = false, symbol = false;

                if (value[i] != ':')
                        continue;
                while (start > 0 && (is_user_char(value[start - 1]) || value[start - 1] == '@'))
                        start--;
                if (start == i || !is_letter(value[start]) || !begins_word(value, start))
                        continue;
                for (end = i + 1; value[end] && !is_blank(value[end]) && !strchr(",;\"':/@\n", value[end]); end++) {
                        letter |= is_letter(value[end]);
                        digit |= is_digit(value[end]);
                        symbol |= !is_user_char(value[end]);
                }
                if (value[end] == ':' || value[end] == '/' || value[end] == '@' || end - (i + 1) < 6 ||
                    (value[i + 1] == '0' && (value[i + 2] == 'x' || value[i + 2] == 'X')) || value[i + 1] == '\\')
                        continue;
                if (letter && (digit || symbol))
                        return true;
        }
        return false;
}

/*
 * "Header: value", as in a list of HTTP headers handed to a client (x-api-key: ...,
 * Authorization: ..., X-Auth-Token: ...): a name of letters, digits and '-' (a letter first, two
 * characters or more) that begins a word, a ':', blanks, and something.
 */
static bool has_header_pair(const char *value) {
        for (size_t i = 0; value[i]; i++) {
                size_t start = i;

                if (value[i] != ':' || !is_blank(value[i + 1]))
                        continue;
                while (start > 0 && (is_alnum(value[start - 1]) || value[start - 1] == '-'))
                        start--;
                if (i - start < 2 || !is_letter(value[start]) || !begins_word(value, start))
                        continue;
                for (size_t k = i + 1; value[k] && value[k] != '\n'; k++)
                        if (!is_blank(value[k]))
                                return true;
        }
        return false;
}

static bool is_base32_upper(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= '2' && c <= '7');
}

static bool is_base32_lower(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '2' && c <= '7');
}

/*
 * A one-time-password seed, base32 (RFC 4648; what an authenticator app is given): 16 or more
 * of [A-Z2-7] in a row with a digit among them, or of [a-z2-7] with two; or the whole value in
 * four groups or more of four of one case separated by single spaces or single dashes, as apps
 * display seeds (jbsw y3dp ehpk 3pxp) and app passwords (abcd efgh ijkl mnop, abcd-efgh-ijkl-mnop).
 */
static bool has_base32_seed(const char *value) {
        size_t upper = 0, upper_digits = 0, lower = 0, lower_digits = 0, group = 0, groups = 0;
        bool spaced = true, any_upper = false, any_lower = false;
        char separator = '\0'; /* the groups' own: ' ' or '-', the same throughout */

        for (size_t i = 0;; i++) {
                char c = value[i];

                upper = is_base32_upper(c) ? upper + 1 : 0;
                upper_digits = is_base32_upper(c) ? upper_digits + is_digit(c) : 0;
                lower = is_base32_lower(c) ? lower + 1 : 0;
                lower_digits = is_base32_lower(c) ? lower_digits + is_digit(c) : 0;
                if ((upper >= 16 && upper_digits >= 1) || (lower >= 16 && lower_digits >= 2))
                        return true;
                if (c == '\0' || c == ' ' || c == '-') {
                        if (c != '\0' && separator != '\0' && c != separator)
                                spaced = false;
                        if (c != '\0')
                                separator = c;
                        spaced &= group == 4 || (c == '\0' && group > 0 && group < 4 && groups >= 4);
                        groups++;
                        group = 0;
                        if (c == '\0')
                                break;
                        continue;
                }
                if (!is_base32_upper(c) && !is_base32_lower(c))
                        spaced = false;
                any_upper |= c >= 'A' && c <= 'Z';
                any_lower |= c >= 'a' && c <= 'z';
                group++;
        }
        return spaced && groups >= 4 && !(any_upper && any_lower);
}

/*
 * A run of letters and digits, s[0..@n), that mixes them as random tokens do: its characters
 * change between letter and digit at least @changes times (3f9a2b7c1d5e4f60, k3j5h6g7), which
 * words, versions and architectures (dotnet8, x86, win10, v2) do not.
 */
static bool run_alternates(const char *s, size_t n, size_t changes) {
        size_t k = 0;

        for (size_t i = 1; i < n; i++)
                k += is_digit(s[i]) != is_digit(s[i - 1]);
        return k >= changes;
}

/*
 * A token that mixes letters and digits: anywhere, a run of 16 or more of [A-Za-z0-9] with four
 * changes between them or more (hex and base36 keys of one case: Pusher's, Mattermost's,
 * Netlify's build hooks); within a URL's path and query (after its authority), a run of 7 or
 * more with two changes (webhook tokens: /hooks/catch/123/abcd12e/).
 */
static bool has_mixed_token(const char *value) {
        bool in_path = false;
        size_t run = 0;

        for (size_t i = 0;; i++) {
                char c = value[i];

                if (is_alnum(c)) {
                        run++;
                        continue;
                }
                if ((run >= 16 && run_alternates(value + i - run, run, 4)) ||
                    (in_path && run >= 7 && run_alternates(value + i - run, run, 2)))
                        return true;
                run = 0;
                if (c == '\0')
                        return false;
                /* a URL's path begins at the first '/', '?' or '#' after its "://" and the authority */
                if (c == ':' && value[i + 1] == '/' && value[i + 2] == '/') {
                        for (i += 3; !ends_authority(value[i]); i++)
                                ;
                        in_path = value[i] == '/' || value[i] == '?' || value[i] == '#';
                        if (value[i] == '\0')
                                return false;
                } else if (is_blank(c) || c == ',' || c == ';' || c == '"' || c == '\'')
                        in_path = false;
        }
}

bool env_value_looks_secret(const char *value) {
        return has_secret_pair(value) || has_url_user(value) || has_host_password(value) || has_jwt(value) ||
               strstr(value, "-----BEGIN") || has_http_credentials(value) || has_key_shape(value) ||
               has_random_run(value) || has_uuid(value) || has_long_digits(value) || has_user_password(value) ||
               has_header_pair(value) || has_base32_seed(value) || has_mixed_token(value);
}
