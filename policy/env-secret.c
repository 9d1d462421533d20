/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Heuristics for "this environment variable looks like it carries a secret", for names and for
 * values (env-secret.h). Pure and bounded: every check is a pass, or a few, over the string.
 */
#include <stddef.h>
#include <string.h>

#include "cleanup.h"
#include "env-secret.h"

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
        "credentials", "auth", "authorization",
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

bool env_value_looks_secret(const char *value) {
        return has_secret_pair(value) || has_url_user(value) || has_host_password(value) || has_jwt(value) ||
               strstr(value, "-----BEGIN") || has_http_credentials(value) || has_key_shape(value) ||
               has_random_run(value);
}
