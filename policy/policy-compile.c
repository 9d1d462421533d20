/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Parsed TOML documents compiled into an immutable Policy (policy.h): pure; policy-load.c calls it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/cleanup.h"
#include "common/duration.h"
#include "policy/policy-compile.h"
#include "policy/policy-rule.h"
#include "eventpipe/session-config.h"
#include "common/text.h"

#define RULE_NAME_MAX 64
#define DURATION_MAX_USEC (30ULL * 24 * 3600 * USEC_PER_SEC)

typedef struct Compiler {
        const PolicySource *source;
        const PolicyResolver *resolver;
        PolicyDiagnostics *diagnostics;
        int oom;
} Compiler;

int policy_diagnostics_add(PolicyDiagnostics *d, const char *path, unsigned line, unsigned column,
                           const char *format, ...) {
        _cleanup_free_ char *text = NULL;
        char **grown, *message;
        va_list ap;
        int n;

        va_start(ap, format);
        n = vasprintf(&text, format, ap);
        va_end(ap);
        if (n < 0)
                return -ENOMEM;
        if (asprintf(&message, "%s:%u:%u: %s", path, line, column, text) < 0)
                return -ENOMEM;
        grown = realloc(d->messages, (d->n + 1) * sizeof(char *));
        if (!grown) {
                free(message);
                return -ENOMEM;
        }
        d->messages = grown;
        d->messages[d->n++] = message;
        return 0;
}

void policy_diagnostics_done(PolicyDiagnostics *d) {
        for (size_t i = 0; i < d->n; i++)
                free(d->messages[i]);
        free(d->messages);
        d->messages = NULL;
        d->n = 0;
}

static void error_at(Compiler *c, unsigned line, unsigned column, const char *format, ...)
        __attribute__((format(printf, 4, 5)));
static void error_at(Compiler *c, unsigned line, unsigned column, const char *format, ...) {
        char text[512];
        va_list ap;

        va_start(ap, format);
        vsnprintf(text, sizeof(text), format, ap);
        va_end(ap);
        if (policy_diagnostics_add(c->diagnostics, c->source->path, line, column, "%s", text) < 0)
                c->oom = -ENOMEM;
}

/* --- durations and rates --- */

/**
 * policy_parse_duration() - a duration (duration_parse(): "90s", "5m", "1h30m", "2d", ...) that a
 * policy may set: more than zero and at most 30 days
 *
 * Return: 0, or -EINVAL for anything else.
 */
int policy_parse_duration(const char *s, uint64_t *ret_usec) {
        uint64_t usec;

        if (duration_parse(s, &usec) < 0 || usec == 0 || usec > DURATION_MAX_USEC)
                return -EINVAL;
        *ret_usec = usec;
        return 0;
}

/* "6/1h": at most 6 requests in any hour. */
int policy_parse_rate(const char *s, PolicyRateLimit *ret) {
        const char *slash = strchr(s, '/');
        _cleanup_free_ char *count = NULL;
        uint64_t n, period;

        if (!slash)
                return -EINVAL;
        count = strndup(s, (size_t)(slash - s));
        if (!count)
                return -ENOMEM;
        if (parse_u64(count, &n) < 0 || n == 0 || n > POLICY_RATE_COUNT_MAX)
                return -EINVAL;
        if (policy_parse_duration(slash + 1, &period) < 0)
                return -EINVAL;
        *ret = (PolicyRateLimit){ .count = (unsigned)n, .period_usec = period };
        return 0;
}

/**
 * policy_parse_size() - "500M", "2G", "1T" (powers of 1024), a plain byte count, or "10%"
 *
 * Return: 0, or -EINVAL (also for 0% or more than 100%).
 */
int policy_parse_size(const char *s, PolicySize *ret) {
        _cleanup_free_ char *digits = NULL;
        size_t n = strlen(s);
        uint64_t v, unit = 1;
        char last;

        if (n == 0)
                return -EINVAL;
        last = s[n - 1];
        if (last == '%' || last == 'K' || last == 'M' || last == 'G' || last == 'T')
                n--;
        digits = strndup(s, n);
        if (!digits || parse_u64(digits, &v) < 0)
                return -EINVAL;
        switch (last) {
        case '%':
                if (v == 0 || v > 100)
                        return -EINVAL;
                *ret = (PolicySize){ .percent = (unsigned)v };
                return 0;
        case 'K': unit = 1ULL << 10; break;
        case 'M': unit = 1ULL << 20; break;
        case 'G': unit = 1ULL << 30; break;
        case 'T': unit = 1ULL << 40; break;
        }
        if (v == 0 || v > UINT64_MAX / unit)
                return -EINVAL;
        *ret = (PolicySize){ .bytes = v * unit };
        return 0;
}

/* --- typed access with errors at the right place --- */

static bool expect_type(Compiler *c, const TomlEntry *e, TomlType type) {
        if (e->value->type == type)
                return true;
        error_at(c, e->value->line, e->value->column, "'%s' must be a %s, not a %s", e->key,
                 type == TOML_ARRAY ? "list" : toml_type_to_string(type), toml_type_to_string(e->value->type));
        return false;
}

static bool expect_string(Compiler *c, const TomlEntry *e) {
        if (!expect_type(c, e, TOML_STRING))
                return false;
        if (e->value->string.size == 0 || strlen(e->value->string.data) != e->value->string.size) {
                error_at(c, e->value->line, e->value->column, "'%s' must not be empty or contain NUL", e->key);
                return false;
        }
        return true;
}

/* A non-empty list of distinct, non-empty strings. */
static bool expect_string_list(Compiler *c, const TomlEntry *e) {
        const TomlValue *a = e->value;

        if (!expect_type(c, e, TOML_ARRAY))
                return false;
        if (a->array.n_items == 0) {
                error_at(c, a->line, a->column, "'%s' must not be an empty list", e->key);
                return false;
        }
        for (size_t i = 0; i < a->array.n_items; i++) {
                const TomlValue *v = a->array.items[i];
                if (v->type != TOML_STRING || v->string.size == 0 || strlen(v->string.data) != v->string.size) {
                        error_at(c, v->line, v->column, "'%s' must list non-empty strings", e->key);
                        return false;
                }
                for (size_t j = 0; j < i; j++)
                        if (strcmp(a->array.items[j]->string.data, v->string.data) == 0) {
                                error_at(c, v->line, v->column, "'%s' lists \"%s\" twice", e->key,
                                         v->string.data);
                                return false;
                        }
        }
        return true;
}

static int id_list_append(PolicyIdList *l, uint32_t id) {
        uint32_t *grown = realloc(l->ids, (l->n + 1) * sizeof(uint32_t));

        if (!grown)
                return -ENOMEM;
        l->ids = grown;
        l->ids[l->n++] = id;
        return 0;
}

static int string_list_take(PolicyStringList *l, const TomlValue *array) {
        l->items = calloc(array->array.n_items, sizeof(char *));
        if (!l->items)
                return -ENOMEM;
        for (size_t i = 0; i < array->array.n_items; i++) {
                l->items[i] = strdup(array->array.items[i]->string.data);
                if (!l->items[i])
                        return -ENOMEM;
                l->n++;
        }
        return 0;
}

/* "uid:N" (or "gid:N") is a number; anything else is a name for the resolver. */
static bool resolve_id(Compiler *c, const TomlValue *v, const char *key, bool group, uint32_t *ret) {
        const char *prefix = group ? "gid:" : "uid:", *s = v->string.data;
        uint64_t n;
        int r;

        if (strncmp(s, prefix, 4) == 0) {
                if (parse_u64(s + 4, &n) < 0 || n >= UINT32_MAX) {
                        error_at(c, v->line, v->column, "'%s': \"%s\" is not a valid %s", key, s, prefix);
                        return false;
                }
                *ret = (uint32_t)n;
                return true;
        }
        if (group) {
                gid_t gid;
                r = c->resolver->group(s, &gid, c->resolver->userdata);
                *ret = gid;
        } else {
                uid_t uid;
                r = c->resolver->user(s, &uid, c->resolver->userdata);
                *ret = uid;
        }
        if (r < 0) {
                error_at(c, v->line, v->column, "'%s': unknown %s \"%s\"", key, group ? "group" : "user", s);
                return false;
        }
        return true;
}

static bool compile_id_list(Compiler *c, const TomlEntry *e, bool group, PolicyIdList *out) {
        bool ok = expect_string_list(c, e);

        for (size_t i = 0; ok && i < e->value->array.n_items; i++) {
                uint32_t id;
                if (!resolve_id(c, e->value->array.items[i], e->key, group, &id))
                        ok = false;
                else if (id_list_append(out, id) < 0)
                        c->oom = -ENOMEM;
        }
        return ok;
}

/* Readers are "user", "uid:N", "group:NAME" or "gid:N"; of a [[rule]] or an [[on_start]]. */
static bool compile_readers(Compiler *c, const TomlEntry *e, PolicyIdList *users, PolicyIdList *groups) {
        if (!expect_string_list(c, e))
                return false;
        for (size_t i = 0; i < e->value->array.n_items; i++) {
                TomlValue v = *e->value->array.items[i];
                bool group = strncmp(v.string.data, "group:", 6) == 0 || strncmp(v.string.data, "gid:", 4) == 0;
                uint32_t id;

                if (strncmp(v.string.data, "group:", 6) == 0) {
                        v.string.data += 6;
                        v.string.size -= 6;
                }
                if (!resolve_id(c, &v, e->key, group, &id))
                        return false;
                if (id_list_append(group ? groups : users, id) < 0)
                        c->oom = -ENOMEM;
        }
        return true;
}

static bool compile_commands(Compiler *c, const TomlEntry *e, PolicyRule *r) {
        if (!expect_string_list(c, e))
                return false;
        for (size_t i = 0; i < e->value->array.n_items; i++) {
                const TomlValue *v = e->value->array.items[i];
                PolicyCommand cmd = policy_command_from_string(v->string.data);

                if (cmd == _POLICY_COMMAND_INVALID) {
                        error_at(c, v->line, v->column, "unknown command \"%s\"", v->string.data);
                        return false;
                }
                r->commands |= 1u << cmd;
        }
        return true;
}

static bool compile_dump_types(Compiler *c, const TomlEntry *e, PolicyRule *r) {
        if (!expect_string_list(c, e))
                return false;
        for (size_t i = 0; i < e->value->array.n_items; i++) {
                const TomlValue *v = e->value->array.items[i];
                PolicyDumpType t = policy_dump_type_from_string(v->string.data);

                if (t == _POLICY_DUMP_INVALID) {
                        error_at(c, v->line, v->column, "unknown dump type \"%s\" (mini, heap, triage, full)",
                                 v->string.data);
                        return false;
                }
                r->dump_types |= 1u << t;
        }
        return true;
}

static bool compile_trace_profiles(Compiler *c, const TomlEntry *e, PolicyRule *r) {
        if (!expect_string_list(c, e))
                return false;
        for (size_t i = 0; i < e->value->array.n_items; i++) {
                const TomlValue *v = e->value->array.items[i];
                if (!policy_trace_profile_is_known(v->string.data)) {
                        error_at(c, v->line, v->column, "unknown trace profile \"%s\"", v->string.data);
                        return false;
                }
        }
        if (string_list_take(&r->trace_profiles, e->value) < 0)
                c->oom = -ENOMEM;
        return true;
}

/* "Name" (every keyword) or "Name:0xMASK" (keywords within the mask); of a [[rule]] or an [[on_start]]. */
static bool compile_trace_providers(Compiler *c, const TomlEntry *e, PolicyProviderGrant **grants, size_t *n) {
        if (!expect_string_list(c, e))
                return false;
        *grants = calloc(e->value->array.n_items, sizeof(PolicyProviderGrant));
        if (!*grants) {
                c->oom = -ENOMEM;
                return true;
        }
        for (size_t i = 0; i < e->value->array.n_items; i++) {
                const TomlValue *v = e->value->array.items[i];
                const char *colon = strchr(v->string.data, ':');
                PolicyProviderGrant *g = &(*grants)[*n];
                char *end;

                g->keywords = UINT64_MAX;
                if (colon) {
                        errno = 0;
                        g->keywords = strtoull(colon + 1, &end, 16);
                        if (errno != 0 || end == colon + 1 || *end != '\0' || colon[1] == '-' ||
                            strncasecmp(colon + 1, "0x", 2) != 0) {
                                error_at(c, v->line, v->column,
                                         "bad provider \"%s\" (like \"Name\" or \"Name:0x8003\")", v->string.data);
                                return false;
                        }
                }
                g->name = strndup(v->string.data, colon ? (size_t)(colon - v->string.data) : strlen(v->string.data));
                if (!g->name) {
                        c->oom = -ENOMEM;
                        return true;
                }
                (*n)++;
                if (!eventpipe_provider_name_is_valid(g->name)) {
                        error_at(c, v->line, v->column, "bad provider name \"%s\" (letters, digits, . - _)", g->name);
                        return false;
                }
        }
        return true;
}

static bool compile_counter_providers(Compiler *c, const TomlEntry *e, PolicyRule *r) {
        if (!expect_string_list(c, e))
                return false;
        for (size_t i = 0; i < e->value->array.n_items; i++) {
                const TomlValue *v = e->value->array.items[i];
                if (!eventpipe_provider_name_is_valid(v->string.data)) {
                        error_at(c, v->line, v->column, "bad provider name \"%s\" (letters, digits, . - _)",
                                 v->string.data);
                        return false;
                }
        }
        if (string_list_take(&r->counter_providers, e->value) < 0)
                c->oom = -ENOMEM;
        return true;
}

/* targets.*: the same selectors for a [[rule]] and an [[on_start]], matched the same way. */
/* targets.cgroups and targets.containers: lists whose every entry @valid accepts, at most @max. */
static bool compile_target_patterns(Compiler *c, const TomlEntry *e, size_t max, bool (*valid)(const char *),
                                    const char *what, PolicyStringList *ret) {
        const TomlValue *v = e->value;

        if (!expect_string_list(c, e))
                return false;
        if (v->array.n_items > max) {
                error_at(c, v->line, v->column, "'targets.%s' takes at most %zu entries", e->key, max);
                return false;
        }
        for (size_t i = 0; i < v->array.n_items; i++) {
                const TomlValue *item = v->array.items[i];

                if (!valid(item->string.data)) {
                        error_at(c, item->line, item->column, "bad entry \"%s\" in 'targets.%s' (%s)",
                                 item->string.data, e->key, what);
                        return false;
                }
        }
        if (string_list_take(ret, v) < 0)
                c->oom = -ENOMEM;
        return true;
}

static bool compile_target_selector(Compiler *c, const TomlEntry *t, PolicyTargets *ret) {
        if (strcmp(t->key, "users") == 0)
                return compile_id_list(c, t, false, &ret->users);
        if (strcmp(t->key, "units") == 0 || strcmp(t->key, "names") == 0) {
                if (!expect_string_list(c, t))
                        return false;
                if (string_list_take(strcmp(t->key, "units") == 0 ? &ret->units : &ret->names, t->value) < 0)
                        c->oom = -ENOMEM;
                return true;
        }
        if (strcmp(t->key, "cgroups") == 0)
                return compile_target_patterns(c, t, POLICY_CGROUP_PATTERNS_MAX, policy_cgroup_pattern_is_valid,
                                               "an absolute cgroup path like \"/machine.slice/libpod-*.scope\": "
                                               "'*' and '?' within a component, \"**\" for any components, "
                                               "no empty, '.' or '..' component, no '[', ']' or backslash",
                                               &ret->cgroups);
        if (strcmp(t->key, "containers") == 0)
                return compile_target_patterns(c, t, POLICY_CONTAINERS_MAX, policy_container_selector_is_valid,
                                               "a container id: 12 to 64 lowercase hexadecimal digits",
                                               &ret->containers);
        error_at(c, t->line, t->column,
                 "unknown key 'targets.%s' (users, units, names, cgroups, containers, any)", t->key);
        return false;
}

/* targets.*: the same selectors for a [[rule]] and an [[on_start]], matched the same way. */
static bool compile_targets(Compiler *c, const TomlEntry *e, PolicyTargets *ret) {
        bool ok = true, any_selector = false;
        const TomlEntry *any = NULL;

        if (!expect_type(c, e, TOML_TABLE))
                return false;
        for (size_t i = 0; i < e->value->table.n_entries; i++) {
                const TomlEntry *t = &e->value->table.entries[i];

                if (strcmp(t->key, "any") == 0) {
                        any = t;
                        if (!expect_type(c, t, TOML_BOOLEAN))
                                ok = false;
                        else if (!t->value->boolean) {
                                error_at(c, t->line, t->column, "'targets.any = false' means nothing; leave it out");
                                ok = false;
                        } else
                                ret->any = true;
                } else {
                        ok = compile_target_selector(c, t, ret) && ok;
                        any_selector = true;
                }
        }
        if (any && any_selector) {
                error_at(c, any->line, any->column, "'targets.any' cannot be combined with other target selectors");
                ok = false;
        }
        if (!any && !any_selector) {
                error_at(c, e->line, e->column,
                         "'targets' selects nothing: give users, units, names, cgroups or containers, or any = true");
                ok = false;
        }
        return ok;
}

static bool valid_rule_name(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > RULE_NAME_MAX)
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                      *p == '-' || *p == '_' || *p == '.'))
                        return false;
        return true;
}

/*
 * The patterns of env_redact or env_show, an array of strings: checked here, so that the engine
 * matches only what it can match cheaply.
 */
static bool check_env_patterns(Compiler *c, const TomlEntry *e) {
        const TomlValue *v = e->value;

        if (v->array.n_items > POLICY_ENV_REDACT_MAX) {
                error_at(c, v->line, v->column, "'%s' takes at most %d patterns", e->key, POLICY_ENV_REDACT_MAX);
                return false;
        }
        for (size_t i = 0; i < v->array.n_items; i++) {
                const TomlValue *item = v->array.items[i];

                if (!policy_env_pattern_is_valid(item->string.data)) {
                        error_at(c, item->line, item->column,
                                 "bad pattern \"%s\" in '%s' (like \"%s\": at most %d bytes, "
                                 "'*' and '?' as wildcards, no '=', space, '[', ']' or backslash)",
                                 item->string.data, e->key,
                                 strcmp(e->key, "env_show") == 0 ? "Logging__*" : "*PASSWORD*",
                                 POLICY_ENV_PATTERN_MAX);
                        return false;
                }
        }
        return true;
}

/* env_show: names a rule adds to the built-in allow list of env (policy_env_value_hidden()). */
static bool compile_env_show(Compiler *c, const TomlEntry *e, PolicyRule *r) {
        if (!expect_string_list(c, e) || !check_env_patterns(c, e))
                return false;
        if (string_list_take(&r->env_show, e->value) < 0)
                c->oom = -ENOMEM;
        return true;
}

/* --- [egress.NAME]: S3-compatible stores artifacts are uploaded to (docs/egress-plan.md) --- */

/* 127.0.0.0/8, ::1, localhost: the only hosts an http: endpoint may name without allow_http */
static bool egress_host_is_loopback(const char *host, size_t n) {
        unsigned a, b, c, d;
        char tail;
        char buf[64];

        if (n >= sizeof(buf))
                return false;
        memcpy(buf, host, n);
        buf[n] = '\0';
        if (strcasecmp(buf, "localhost") == 0 || strcmp(buf, "[::1]") == 0)
                return true;
        return sscanf(buf, "%3u.%3u.%3u.%3u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b <= 255 && c <= 255 &&
               d <= 255;
}

/*
 * "http[s]://HOST[:PORT]": HOST a name of letters, digits, '-' and '.', or an IPv6 address in brackets; no user,
 * path, query or fragment (the bucket and the key make the path). Return: NULL, or what is wrong.
 */
static const char *egress_endpoint_problem(const char *s, bool *ret_http, bool *ret_loopback) {
        const char *host, *end;
        bool http = strncmp(s, "http://", 7) == 0;

        if (!http && strncmp(s, "https://", 8) != 0)
                return "must begin with https:// (or http://)";
        host = s + (http ? 7 : 8);
        if (*host == '[') {
                end = host + 1 + strspn(host + 1, "0123456789abcdefABCDEF:.");
                if (*end != ']' || end == host + 1)
                        return "has a bad IPv6 address: [ADDRESS]";
                end++;
        } else {
                end = host + strspn(host, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-.");
                if (end == host || *host == '.' || *host == '-' || end[-1] == '.' || end - host > 253)
                        return "needs a host name of letters, digits, '-' and '.'";
        }
        *ret_loopback = egress_host_is_loopback(host, (size_t)(end - host));
        if (*end == ':') {
                const char *port = end + 1;
                size_t digits = strspn(port, "0123456789");
                unsigned long value = digits > 0 && digits <= 5 ? strtoul(port, NULL, 10) : 0;

                if (value < 1 || value > 65535)
                        return "has a bad port (1 to 65535)";
                end = port + digits;
        }
        if (*end != '\0')
                return "must be scheme://host[:port] alone, without a user, path, query or fragment";
        *ret_http = http;
        return NULL;
}

/* S3's bucket names: 3-63 of a-z 0-9 . -, beginning and ending with a letter or digit, no "..". */
static bool egress_bucket_valid(const char *s) {
        size_t n = strlen(s);

        if (n < 3 || n > 63 || strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789.-") != n || strstr(s, ".."))
                return false;
        return strchr(".-", s[0]) == NULL && strchr(".-", s[n - 1]) == NULL;
}

/* The SigV4 scope's region, which also goes into libcurl's "aws:amz:REGION:s3": no ':' nor anything odd. */
static bool egress_region_valid(const char *s) {
        size_t n = strlen(s);

        return n >= 1 && n <= 64 &&
               strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

/* An absolute path without "//", "." or ".." components and not ending in '/'. */
static bool egress_path_valid(const char *s) {
        size_t n = strlen(s);

        return s[0] == '/' && n > 1 && n < 4096 && s[n - 1] != '/' && !strstr(s, "//") && !strstr(s, "/./") &&
               !strstr(s, "/../") && strcmp(s + n - 2, "/.") != 0 && (n < 3 || strcmp(s + n - 3, "/..") != 0);
}

/* A systemd credential's name, a file name in $CREDENTIALS_DIRECTORY: no '/', not "." or "..". */
static bool egress_credential_name_valid(const char *s) {
        size_t n = strlen(s);

        return n >= 1 && n <= POLICY_EGRESS_CREDENTIAL_NAME_MAX && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 &&
               strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.@") == n;
}

static bool egress_strdup(Compiler *c, char **ret, const char *s) {
        free(*ret);
        if (!(*ret = strdup(s)))
                c->oom = -ENOMEM;
        return true;
}

/*
 * credentials = "file:PATH" or "systemd:NAME". The value is never echoed in a message: a policy that
 * pasted a secret here must not have it printed by --check-policy or put in the journal.
 */
static bool compile_egress_credentials(Compiler *c, const TomlEntry *e, PolicyEgress *eg) {
        const char *s = e->value->string.data;

        eg->credentials_line = e->value->line;
        eg->credentials_column = e->value->column;
        if (strncmp(s, "file:", 5) == 0 && egress_path_valid(s + 5)) {
                eg->credentials_kind = POLICY_EGRESS_CREDENTIALS_FILE;
                return egress_strdup(c, &eg->credentials, s + 5);
        }
        if (strncmp(s, "systemd:", 8) == 0 && egress_credential_name_valid(s + 8)) {
                eg->credentials_kind = POLICY_EGRESS_CREDENTIALS_SYSTEMD;
                return egress_strdup(c, &eg->credentials, s + 8);
        }
        error_at(c, e->value->line, e->value->column,
                 "'credentials' says where the keys are, never what they are: \"file:/ABSOLUTE/PATH\" (a file of "
                 "root's, mode 0600 or 0400) or \"systemd:NAME\" (the unit's LoadCredential=NAME:PATH); the value "
                 "given is neither and is not shown here");
        return false;
}

/* A size of bytes ("16M", "64K"), never a share of a file system. */
static bool compile_egress_bytes(Compiler *c, const TomlEntry *e, uint64_t min, uint64_t max, uint64_t *ret) {
        PolicySize size;

        if (!expect_string(c, e))
                return false;
        if (policy_parse_size(e->value->string.data, &size) < 0 || size.bytes == 0 || size.bytes < min ||
            size.bytes > max) {
                error_at(c, e->value->line, e->value->column,
                         "bad '%s' \"%s\" (bytes like \"16M\", \"64K\"; %llu to %llu bytes)", e->key,
                         e->value->string.data, (unsigned long long)min, (unsigned long long)max);
                return false;
        }
        *ret = size.bytes;
        return true;
}

static bool compile_egress_duration(Compiler *c, const TomlEntry *e, uint64_t max, uint64_t *ret) {
        if (!expect_string(c, e))
                return false;
        if (policy_parse_duration(e->value->string.data, ret) < 0 || *ret > max) {
                error_at(c, e->value->line, e->value->column,
                         "bad '%s' \"%s\" (like \"90s\", \"30m\"; at most %llus)", e->key, e->value->string.data,
                         (unsigned long long)(max / USEC_PER_SEC));
                return false;
        }
        return true;
}

/* An integer key of [egress.NAME], @min to @max. */
static bool compile_egress_count(Compiler *c, const TomlEntry *e, int min, int max, unsigned *ret) {
        if (!expect_type(c, e, TOML_INTEGER))
                return false;
        if (e->value->integer < min || e->value->integer > max) {
                error_at(c, e->value->line, e->value->column, "'%s' must be %d to %d", e->key, min, max);
                return false;
        }
        *ret = (unsigned)e->value->integer;
        return true;
}

static bool compile_egress_flag(Compiler *c, const TomlEntry *e, bool *ret) {
        if (!expect_type(c, e, TOML_BOOLEAN))
                return false;
        *ret = e->value->boolean;
        return true;
}

static bool compile_egress_string(Compiler *c, const TomlEntry *e, bool (*valid)(const char *), const char *rule,
                                  char **ret) {
        if (!expect_string(c, e))
                return false;
        if (!valid(e->value->string.data)) {
                error_at(c, e->value->line, e->value->column, "bad '%s' \"%s\": %s", e->key, e->value->string.data,
                         rule);
                return false;
        }
        return egress_strdup(c, ret, e->value->string.data);
}

static bool egress_prefix_valid(const char *s) {
        return strlen(s) <= 256 && policy_egress_prefix_is_valid(s);
}

static bool compile_egress_entry(Compiler *c, const TomlEntry *e, PolicyEgress *eg) {
        const TomlValue *v = e->value;

        if (strcmp(e->key, "endpoint") == 0)
                return expect_string(c, e) && egress_strdup(c, &eg->endpoint, v->string.data); /* checked whole below */
        if (strcmp(e->key, "bucket") == 0)
                return compile_egress_string(c, e, egress_bucket_valid,
                                             "S3's bucket names are 3-63 of a-z 0-9 . -, a letter or digit at each end",
                                             &eg->bucket);
        if (strcmp(e->key, "region") == 0)
                return compile_egress_string(c, e, egress_region_valid, "1-64 of A-Z a-z 0-9 _ -", &eg->region);
        if (strcmp(e->key, "prefix") == 0) {
                /* "" is a prefix too: none */
                if (!expect_type(c, e, TOML_STRING))
                        return false;
                if (strlen(v->string.data) != v->string.size || !egress_prefix_valid(v->string.data)) {
                        error_at(c, v->line, v->column,
                                 "bad 'prefix': at most 256 bytes of segments of A-Z a-z 0-9 . _ -, each ending in "
                                 "'/', none \".\" or \"..\" (like \"prod/\")");
                        return false;
                }
                return egress_strdup(c, &eg->prefix, v->string.data);
        }
        if (strcmp(e->key, "ca_file") == 0) {
                eg->ca_file_line = e->value->line;
                eg->ca_file_column = e->value->column;
                return compile_egress_string(c, e, egress_path_valid, "an absolute path to the store's CA certificates",
                                             &eg->ca_file);
        }
        if (strcmp(e->key, "credentials") == 0)
                return expect_string(c, e) && compile_egress_credentials(c, e, eg);
        if (strcmp(e->key, "path_style") == 0)
                return compile_egress_flag(c, e, &eg->path_style);
        if (strcmp(e->key, "allow_http") == 0)
                return compile_egress_flag(c, e, &eg->allow_http);
        if (strcmp(e->key, "keep_local") == 0)
                return compile_egress_flag(c, e, &eg->keep_local);
        if (strcmp(e->key, "part_size") == 0)
                return compile_egress_bytes(c, e, POLICY_EGRESS_PART_MIN, POLICY_EGRESS_PART_MAX, &eg->part_size);
        if (strcmp(e->key, "min_speed") == 0)
                return compile_egress_bytes(c, e, 1, UINT32_MAX, &eg->min_speed);
        if (strcmp(e->key, "timeout") == 0)
                return compile_egress_duration(c, e, DURATION_MAX_USEC, &eg->timeout_usec);
        if (strcmp(e->key, "url_max_age") == 0)
                return compile_egress_duration(c, e, POLICY_EGRESS_URL_MAX_AGE_MAX_USEC, &eg->url_max_age_usec);
        if (strcmp(e->key, "attempts") == 0)
                return compile_egress_count(c, e, 1, POLICY_EGRESS_ATTEMPTS_MAX, &eg->attempts);
        if (strcmp(e->key, "retries") == 0)
                return compile_egress_count(c, e, 0, POLICY_EGRESS_RETRIES_MAX, &eg->retries);
        if (strcmp(e->key, "retry_delay") == 0) {
                if (!compile_egress_duration(c, e, POLICY_EGRESS_RETRY_DELAY_MAX_USEC, &eg->retry_delay_usec))
                        return false;
                if (eg->retry_delay_usec < 1000000) {
                        error_at(c, e->value->line, e->value->column, "'retry_delay' must be at least 1s");
                        return false;
                }
                return true;
        }
        if (strcmp(e->key, "verify") == 0) {
                if (!expect_string(c, e))
                        return false;
                if (strcmp(v->string.data, "signed") != 0 && strcmp(v->string.data, "read-back") != 0) {
                        error_at(c, v->line, v->column, "'verify' is \"signed\" or \"read-back\"");
                        return false;
                }
                eg->verify = strcmp(v->string.data, "signed") == 0 ? POLICY_EGRESS_VERIFY_SIGNED
                                                                    : POLICY_EGRESS_VERIFY_READ_BACK;
                return true;
        }
        /* keys named as a store's secrets: say where they belong, and never echo the value */
        if (strcasestr(e->key, "secret") || strcasestr(e->key, "access_key") || strcasestr(e->key, "token") ||
            strcasestr(e->key, "password")) {
                error_at(c, e->line, e->column,
                         "'%s' in [egress.%s]: keys never go in the policy; put them in a file of root's named by "
                         "credentials = \"file:PATH\" or \"systemd:NAME\"",
                         e->key, eg->name ? eg->name : "");
                return false;
        }
        error_at(c, e->line, e->column,
                 "unknown key '%s' in [egress.%s] (endpoint, bucket, region, credentials, prefix, path_style, "
                 "ca_file, part_size, attempts, timeout, min_speed, keep_local, verify, allow_http, url_max_age, "
                 "retries, retry_delay)",
                 e->key, eg->name ? eg->name : "");
        return false;
}

/* What a whole [egress.NAME] must have, and the endpoint's scheme against allow_http. */
static bool check_egress(Compiler *c, const TomlEntry *t, PolicyEgress *eg) {
        static const char *const required[] = { "endpoint", "bucket", "region", "credentials" };
        const TomlEntry *endpoint = toml_table_find(t->value, "endpoint");
        bool ok = true, http = false, loopback = false;
        const char *why;

        for (size_t i = 0; i < ELEMENTSOF(required); i++)
                if (!toml_table_find(t->value, required[i])) {
                        error_at(c, t->line, t->column, "[egress.%s] needs '%s'", eg->name, required[i]);
                        ok = false;
                }
        if (!endpoint || !eg->endpoint)
                return false;
        why = egress_endpoint_problem(eg->endpoint, &http, &loopback);
        if (why) {
                error_at(c, endpoint->value->line, endpoint->value->column, "bad 'endpoint' \"%s\": it %s",
                         eg->endpoint, why);
                return false;
        }
        if (http && !loopback && !eg->allow_http) {
                error_at(c, endpoint->value->line, endpoint->value->column,
                         "'endpoint' \"%s\" is http: on a host that is not loopback: the artifacts would cross the "
                         "network in clear; use https://, or say allow_http = true",
                         eg->endpoint);
                return false;
        }
        return ok;
}

static bool compile_egress(Compiler *c, const Policy *p, const TomlEntry *t, PolicyEgress *eg) {
        const PolicyEgress *other;
        bool ok = true;

        *eg = (PolicyEgress){
                .line = t->line,
                .column = t->column,
                .path_style = true,
                .part_size = POLICY_EGRESS_PART_DEFAULT,
                .attempts = POLICY_EGRESS_ATTEMPTS_DEFAULT,
                .timeout_usec = POLICY_EGRESS_TIMEOUT_DEFAULT_USEC,
                .min_speed = POLICY_EGRESS_MIN_SPEED_DEFAULT,
                .keep_local = true,
                .url_max_age_usec = POLICY_EGRESS_URL_MAX_AGE_DEFAULT_USEC,
                .retries = POLICY_EGRESS_RETRIES_DEFAULT,
                .retry_delay_usec = POLICY_EGRESS_RETRY_DELAY_DEFAULT_USEC,
        };
        egress_strdup(c, &eg->file, c->source->path);
        egress_strdup(c, &eg->prefix, "");
        egress_strdup(c, &eg->name, t->key);
        if (!valid_rule_name(t->key)) {
                error_at(c, t->line, t->column, "egress name must be 1-64 of A-Z a-z 0-9 . _ -");
                ok = false;
        }
        if (eg->name && (other = policy_egress_find(p, eg->name))) {
                error_at(c, t->line, t->column, "[egress.%s] is already defined at %s:%u", eg->name, other->file,
                         other->line);
                ok = false;
        }
        if (t->value->type != TOML_TABLE) {
                error_at(c, t->line, t->column, "'egress.%s' must be a table: [egress.%s]", t->key, t->key);
                return false;
        }
        for (size_t i = 0; i < t->value->table.n_entries; i++)
                ok = compile_egress_entry(c, &t->value->table.entries[i], eg) && ok;
        return check_egress(c, t, eg) && ok;
}

/* [egress]: a table of tables, [egress.NAME] each; in the main file and in policy.d alike. */
static bool compile_egresses(Compiler *c, const TomlEntry *e, Policy *p) {
        PolicyEgress *grown;
        bool ok = true;

        if (!expect_type(c, e, TOML_TABLE))
                return false;
        if (p->n_egress + e->value->table.n_entries > POLICY_EGRESS_MAX) {
                error_at(c, e->line, e->column, "at most %d [egress.NAME] tables", POLICY_EGRESS_MAX);
                return false;
        }
        grown = realloc(p->egress, (p->n_egress + e->value->table.n_entries) * sizeof(PolicyEgress));
        if (!grown) {
                c->oom = -ENOMEM;
                return false;
        }
        p->egress = grown;
        for (size_t i = 0; i < e->value->table.n_entries; i++) {
                /* counted before it is checked, so that policy_unref() frees what a broken one holds */
                ok = compile_egress(c, p, &e->value->table.entries[i], &p->egress[p->n_egress]) && ok;
                p->n_egress++;
        }
        return ok;
}

/* egress = "NAME" of a rule, then.egress of a [[collect]]: the name, kept until the whole policy is compiled. */
static bool compile_egress_name(Compiler *c, const TomlEntry *e, char **ret_name, unsigned *ret_line,
                                unsigned *ret_column) {
        if (!expect_string(c, e))
                return false;
        if (!valid_rule_name(e->value->string.data)) {
                error_at(c, e->value->line, e->value->column, "'%s' must name an [egress.NAME]: 1-64 of A-Z a-z 0-9 . _ -",
                         e->key);
                return false;
        }
        *ret_line = e->value->line;
        *ret_column = e->value->column;
        return egress_strdup(c, ret_name, e->value->string.data);
}

/* "a, b" of the policy's egress names, or a sentence that there is none, for a name that is not among them */
static void egress_names(const Policy *p, char *buf, size_t size) {
        if (p->n_egress == 0) {
                snprintf(buf, size, "the policy has no [egress.NAME] table");
                return;
        }
        snprintf(buf, size, "the policy has");
        for (size_t i = 0; i < p->n_egress; i++)
                snprintf(buf + strlen(buf), size - strlen(buf), "%s [egress.%s]", i == 0 ? "" : ",",
                         p->egress[i].name ? p->egress[i].name : "");
}

static int resolve_egress(const Policy *p, const char *name, const char *file, unsigned line, unsigned column,
                          const char *who, const PolicyEgress **ret, PolicyDiagnostics *d) {
        char known[512];

        if (!name)
                return 0;
        *ret = policy_egress_find(p, name);
        if (*ret)
                return 0;
        egress_names(p, known, sizeof(known));
        return policy_diagnostics_add(d, file, line, column, "%s names egress \"%s\", which is not defined: %s", who,
                                      name, known) < 0
                       ? -ENOMEM
                       : 1;
}

/*
 * Once every file is compiled (a rule in policy.d may name a store of the main file, and the other way round):
 * each egress name to its [egress.NAME]. Return: 0, 1 when a name is missing, -ENOMEM.
 */
static int resolve_egress_names(Policy *p, PolicyDiagnostics *d) {
        char who[128];
        int r, result = 0;

        for (size_t i = 0; i < p->n_rules; i++) {
                PolicyRule *rule = &p->rules[i];

                snprintf(who, sizeof(who), "rule '%s'", rule->name ? rule->name : "");
                r = resolve_egress(p, rule->egress_name, rule->file, rule->egress_line, rule->egress_column, who,
                                   &rule->egress, d);
                if (r != 0)
                        result = r < 0 || result < 0 ? -ENOMEM : 1;
        }
        for (size_t i = 0; i < p->n_collect; i++) {
                PolicyCollect *col = &p->collect[i];

                snprintf(who, sizeof(who), "[[collect]] '%s' then.egress", col->name ? col->name : "");
                r = resolve_egress(p, col->egress_name, col->file, col->egress_line, col->egress_column, who,
                                   &col->egress, d);
                if (r != 0)
                        result = r < 0 || result < 0 ? -ENOMEM : 1;
        }
        return result;
}

typedef struct RuleKeys {
        const TomlEntry *name, *users, *groups, *commands, *targets, *dump_types, *trace_profiles,
                *trace_providers, *counter_providers, *max_duration, *rate_limit, *readers, *allow_code_injection,
                *env_reveal, *env_show, *egress;
} RuleKeys;

static bool collect_rule_keys(Compiler *c, const TomlValue *table, RuleKeys *k) {
        static const struct { const char *key; size_t offset; } known[] = {
                { "name", offsetof(RuleKeys, name) },
                { "users", offsetof(RuleKeys, users) },
                { "groups", offsetof(RuleKeys, groups) },
                { "commands", offsetof(RuleKeys, commands) },
                { "targets", offsetof(RuleKeys, targets) },
                { "dump_types", offsetof(RuleKeys, dump_types) },
                { "trace_profiles", offsetof(RuleKeys, trace_profiles) },
                { "trace_providers", offsetof(RuleKeys, trace_providers) },
                { "counter_providers", offsetof(RuleKeys, counter_providers) },
                { "max_duration", offsetof(RuleKeys, max_duration) },
                { "rate_limit", offsetof(RuleKeys, rate_limit) },
                { "readers", offsetof(RuleKeys, readers) },
                { "allow_code_injection", offsetof(RuleKeys, allow_code_injection) },
                { "env_reveal", offsetof(RuleKeys, env_reveal) },
                { "env_show", offsetof(RuleKeys, env_show) },
                { "egress", offsetof(RuleKeys, egress) },
        };
        bool ok = true;

        for (size_t i = 0; i < table->table.n_entries; i++) {
                const TomlEntry *e = &table->table.entries[i];
                size_t j;

                for (j = 0; j < ELEMENTSOF(known); j++)
                        if (strcmp(e->key, known[j].key) == 0) {
                                *(const TomlEntry **)((char *)k + known[j].offset) = e;
                                break;
                        }
                if (j == ELEMENTSOF(known)) {
                        error_at(c, e->line, e->column, "unknown key '%s' in [[rule]]", e->key);
                        ok = false;
                }
        }
        return ok;
}

static bool compile_rule_parameters(Compiler *c, const RuleKeys *k, PolicyRule *r) {
        bool ok = true;

        if (k->dump_types)
                ok = compile_dump_types(c, k->dump_types, r) && ok;
        if (k->trace_profiles)
                ok = compile_trace_profiles(c, k->trace_profiles, r) && ok;
        if (k->trace_providers)
                ok = compile_trace_providers(c, k->trace_providers, &r->trace_providers, &r->n_trace_providers) && ok;
        if (k->counter_providers)
                ok = compile_counter_providers(c, k->counter_providers, r) && ok;
        if (k->max_duration && expect_string(c, k->max_duration) &&
            policy_parse_duration(k->max_duration->value->string.data, &r->max_duration_usec) < 0) {
                error_at(c, k->max_duration->value->line, k->max_duration->value->column,
                         "bad duration \"%s\" (like \"90s\", \"5m\", \"1h30m\"; at most 30 days)",
                         k->max_duration->value->string.data);
                ok = false;
        }
        if (k->rate_limit && expect_string(c, k->rate_limit)) {
                if (policy_parse_rate(k->rate_limit->value->string.data, &r->rate_limit) < 0) {
                        error_at(c, k->rate_limit->value->line, k->rate_limit->value->column,
                                 "bad rate \"%s\" (like \"6/1h\": count/duration)",
                                 k->rate_limit->value->string.data);
                        ok = false;
                } else
                        r->has_rate_limit = true;
        }
        if (k->readers)
                ok = compile_readers(c, k->readers, &r->reader_users, &r->reader_groups) && ok;
        /* a flag of the wrong type refuses the policy, as every error does */
        if (k->allow_code_injection) {
                if (expect_type(c, k->allow_code_injection, TOML_BOOLEAN))
                        r->allow_code_injection = k->allow_code_injection->value->boolean;
                else
                        ok = false;
        }
        if (k->env_reveal) {
                if (expect_type(c, k->env_reveal, TOML_BOOLEAN))
                        r->env_reveal = k->env_reveal->value->boolean;
                else
                        ok = false;
        }
        if (k->env_show)
                ok = compile_env_show(c, k->env_show, r) && ok;
        if (k->egress)
                ok = compile_egress_name(c, k->egress, &r->egress_name, &r->egress_line, &r->egress_column) && ok;
        return ok;
}

/* Keys that only make sense with some command must come with it, and the other way round. */
static bool check_rule_coherence(Compiler *c, const TomlValue *table, const RuleKeys *k, const PolicyRule *r) {
        bool ok = true;
        bool dump = r->commands & (1u << POLICY_COMMAND_DUMP), trace = r->commands & (1u << POLICY_COMMAND_TRACE);
        bool counters = r->commands & (1u << POLICY_COMMAND_COUNTERS);
        bool timed = trace || counters || (r->commands & (1u << POLICY_COMMAND_EXCEPTIONS)) ||
                     (r->commands & (1u << POLICY_COMMAND_LOGS));
        bool injects = false;

        for (int cmd = 0; cmd < _POLICY_COMMAND_MAX; cmd++)
                if ((r->commands & (1u << cmd)) && policy_command_runs_code((PolicyCommand)cmd)) {
                        injects = true;
                        if (!r->allow_code_injection) {
                                error_at(c, k->commands->value->line, k->commands->value->column,
                                         "command '%s' runs code in the target: the rule must say "
                                         "allow_code_injection = true", policy_command_to_string((PolicyCommand)cmd));
                                ok = false;
                        }
                }
        if (r->allow_code_injection && !injects) {
                error_at(c, k->allow_code_injection->line, k->allow_code_injection->column,
                         "allow_code_injection is set but the rule grants no command that runs code");
                ok = false;
        }
        if (dump && !k->dump_types) {
                error_at(c, table->line, table->column, "rule grants 'dump': say which dump_types");
                ok = false;
        }
        if (!dump && k->dump_types) {
                error_at(c, k->dump_types->line, k->dump_types->column, "dump_types given, but the rule does not grant 'dump'");
                ok = false;
        }
        if (trace && !k->trace_profiles && !k->trace_providers) {
                error_at(c, table->line, table->column, "rule grants 'trace': say which trace_profiles or trace_providers");
                ok = false;
        }
        if (k->env_show && !(r->commands & (1u << POLICY_COMMAND_ENV))) {
                error_at(c, k->env_show->line, k->env_show->column, "env_show given, but the rule does not grant 'env'");
                ok = false;
        } else if (k->env_show && r->env_reveal) {
                error_at(c, k->env_show->line, k->env_show->column,
                         "env_show given, but env_reveal = true shows every value already");
                ok = false;
        }
        if (!trace && (k->trace_profiles || k->trace_providers)) {
                const TomlEntry *e = k->trace_profiles ? k->trace_profiles : k->trace_providers;
                error_at(c, e->line, e->column, "%s given, but the rule does not grant 'trace'", e->key);
                ok = false;
        }
        if (!counters && k->counter_providers) {
                error_at(c, k->counter_providers->line, k->counter_providers->column,
                         "counter_providers given, but the rule does not grant 'counters'");
                ok = false;
        }
        if (!(r->commands & (1u << POLICY_COMMAND_ENV)) && k->env_reveal) {
                error_at(c, k->env_reveal->line, k->env_reveal->column,
                         "env_reveal given, but the rule does not grant 'env'");
                ok = false;
        }
        /* a rule uploads what dump_dir keeps of it: its dumps, and the copies of its traces and gcdumps */
        if (k->egress && !(r->commands & POLICY_COMMANDS_EGRESS)) {
                error_at(c, k->egress->line, k->egress->column,
                         "egress given, but the rule grants none of 'dump', 'trace', 'gcdump': a rule uploads its "
                         "dumps, traces and gcdumps alone (a [[collect]] table's artifacts go to its then.egress)");
                ok = false;
        }
        if (!timed && k->max_duration) {
                error_at(c, k->max_duration->line, k->max_duration->column,
                         "max_duration given, but the rule grants none of 'trace', 'counters', 'exceptions', 'logs'");
                ok = false;
        }
        return ok;
}

static bool compile_rule(Compiler *c, const TomlValue *table, PolicyRule *r) {
        RuleKeys k = {};
        bool ok;

        r->file = strdup(c->source->path);
        r->line = table->line;
        if (!r->file)
                c->oom = -ENOMEM;

        ok = collect_rule_keys(c, table, &k);
        if (!k.name) {
                error_at(c, table->line, table->column, "[[rule]] needs a name");
                ok = false;
        } else if (expect_string(c, k.name)) {
                if (!valid_rule_name(k.name->value->string.data)) {
                        error_at(c, k.name->value->line, k.name->value->column,
                                 "rule name must be 1-64 of A-Z a-z 0-9 . _ -");
                        ok = false;
                }
                r->name = strdup(k.name->value->string.data);
                if (!r->name)
                        c->oom = -ENOMEM;
        } else
                ok = false;

        if (!k.users && !k.groups) {
                error_at(c, table->line, table->column, "rule needs users or groups: who is it for?");
                ok = false;
        }
        if (k.users)
                ok = compile_id_list(c, k.users, false, &r->users) && ok;
        if (k.groups)
                ok = compile_id_list(c, k.groups, true, &r->groups) && ok;
        if (!k.commands) {
                error_at(c, table->line, table->column, "rule needs commands");
                ok = false;
        } else
                ok = compile_commands(c, k.commands, r) && ok;
        if (!k.targets) {
                error_at(c, table->line, table->column,
                         "rule needs targets (users, units, names, cgroups or containers), or targets.any = true");
                ok = false;
        } else
                ok = compile_targets(c, k.targets, &r->targets) && ok;

        ok = compile_rule_parameters(c, &k, r) && ok;
        if (ok && k.commands)
                ok = check_rule_coherence(c, table, &k, r);
        return ok;
}

static bool compile_agent_count(Compiler *c, const TomlEntry *e, unsigned max, unsigned *ret) {
        if (!expect_type(c, e, TOML_INTEGER))
                return false;
        if (e->value->integer < 1 || e->value->integer > max) {
                error_at(c, e->value->line, e->value->column, "'%s' must be 1 to %u", e->key, max);
                return false;
        }
        *ret = (unsigned)e->value->integer;
        return true;
}

/* env_redact: the globs replace the built-in list whole; an empty list adds nothing to what the allow list hides. */
static bool compile_env_redact(Compiler *c, const TomlEntry *e, PolicyAgentSettings *a) {
        const TomlValue *v = e->value;

        if (!expect_type(c, e, TOML_ARRAY))
                return false;
        if (v->array.n_items > 0 && !expect_string_list(c, e))
                return false;
        if (!check_env_patterns(c, e))
                return false;
        policy_string_list_done(&a->env_redact);
        if (v->array.n_items > 0 && string_list_take(&a->env_redact, v) < 0)
                c->oom = -ENOMEM;
        return true;
}

/* The [agent] keys that bound what one user may set going: sessions, and requests a second. */
static bool compile_agent_session_entry(Compiler *c, const TomlEntry *e, PolicyAgentSettings *a) {
        const TomlValue *v = e->value;
        PolicySize size;

        if (strcmp(e->key, "max_sessions_per_target") == 0)
                return compile_agent_count(c, e, POLICY_SESSIONS_MAX, &a->max_sessions_per_target);
        if (strcmp(e->key, "max_sessions_per_user") == 0)
                return compile_agent_count(c, e, 1024, &a->max_sessions_per_user);
        if (strcmp(e->key, "max_trace_buffer_mb") == 0)
                return compile_agent_count(c, e, EVENTPIPE_BUFFER_MB_MAX, &a->max_trace_buffer_mb);
        if (strcmp(e->key, "max_requests_per_second") == 0)
                return compile_agent_count(c, e, 100000, &a->max_requests_per_second);
        if (strcmp(e->key, "max_request_burst") == 0)
                return compile_agent_count(c, e, 1000000, &a->max_request_burst);
        if (strcmp(e->key, "max_runtimes_per_user") == 0)
                return compile_agent_count(c, e, 4096, &a->max_runtimes_per_user);
        if (strcmp(e->key, "target_cache_ms") == 0) {
                if (!expect_type(c, e, TOML_INTEGER))
                        return false;
                if (v->integer < 0 || v->integer > POLICY_TARGET_CACHE_MS_MAX) {
                        error_at(c, v->line, v->column, "'target_cache_ms' must be 0 to %d",
                                 POLICY_TARGET_CACHE_MS_MAX);
                        return false;
                }
                a->target_cache_ms = (unsigned)v->integer;
                return true;
        }
        if (strcmp(e->key, "max_session_duration") == 0) {
                if (!expect_string(c, e))
                        return false;
                if (policy_parse_duration(v->string.data, &a->max_session_duration_usec) < 0) {
                        error_at(c, v->line, v->column, "bad duration \"%s\" (like \"90s\", \"5m\", \"1h30m\")",
                                 v->string.data);
                        return false;
                }
                return true;
        }
        if (strcmp(e->key, "max_trace_size") == 0) {
                if (!expect_string(c, e))
                        return false;
                if (policy_parse_size(v->string.data, &size) < 0 || size.bytes == 0) {
                        error_at(c, v->line, v->column, "bad size \"%s\" for 'max_trace_size' (like \"1G\", \"500M\")",
                                 v->string.data);
                        return false;
                }
                a->max_trace_size = size.bytes;
                return true;
        }
        error_at(c, e->line, e->column,
                 "unknown key '%s' in [agent] (dump_dir, max_concurrent_dumps, max_dumps_per_user, "
                 "max_concurrent_own_dumps, max_use, keep_free, max_age, max_files, max_use_per_user, "
                 "audit_failure, "
                 "owner_access, pam_service, max_sessions_per_target, max_sessions_per_user, max_session_duration, "
                 "max_trace_size, max_trace_buffer_mb, max_requests_per_second, max_request_burst, env_redact, "
                 "max_runtimes_per_user, target_cache_ms)",
                 e->key);
        return false;
}

/* A size key of a table or of [agent]: "2G", "500M", "10%" (of dump_dir's file system). */
static bool compile_size(Compiler *c, const TomlEntry *e, PolicySize *ret) {
        const TomlValue *v = e->value;

        if (!expect_string(c, e))
                return false;
        if (policy_parse_size(v->string.data, ret) < 0) {
                error_at(c, v->line, v->column, "bad size \"%s\" for '%s' (like \"2G\", \"500M\" or \"10%%\")",
                         v->string.data, e->key);
                return false;
        }
        return true;
}

/*
 * [agent]'s retention: max_age ("0": none goes for its age; at most POLICY_MAX_AGE_MAX_USEC),
 * max_files (1 to POLICY_MAX_FILES_MAX), max_use_per_user (a size).
 */
static bool compile_agent_retention_entry(Compiler *c, const TomlEntry *e, PolicyAgentSettings *a) {
        const TomlValue *v = e->value;
        uint64_t usec;

        if (strcmp(e->key, "max_files") == 0)
                return compile_agent_count(c, e, POLICY_MAX_FILES_MAX, &a->max_files);
        if (strcmp(e->key, "max_use_per_user") == 0)
                return compile_size(c, e, &a->max_use_per_user);
        if (!expect_string(c, e))
                return false;
        if (duration_parse(v->string.data, &usec) < 0 || usec > POLICY_MAX_AGE_MAX_USEC) {
                error_at(c, v->line, v->column, "bad duration \"%s\" for 'max_age' (like \"3d\", \"12h\", at most "
                         "\"3650d\"; \"0\" keeps artifacts whatever their age)", v->string.data);
                return false;
        }
        a->max_age_usec = usec;
        return true;
}

/*
 * What a table says of its artifacts (PolicyTableArtifacts): max_use, yield_to_dumps,
 * readers_may_remove. Return: 1 (not one of them), or whether it compiled.
 */
static int compile_table_artifacts_entry(Compiler *c, const TomlEntry *e, PolicyTableArtifacts *a) {
        if (strcmp(e->key, "max_use") == 0)
                return compile_size(c, e, &a->max_use) ? 0 : -1;
        if (strcmp(e->key, "yield_to_dumps") != 0 && strcmp(e->key, "readers_may_remove") != 0)
                return 1;
        if (!expect_type(c, e, TOML_BOOLEAN))
                return -1;
        if (strcmp(e->key, "yield_to_dumps") == 0)
                a->yield_to_dumps = e->value->boolean;
        else
                a->readers_may_remove = e->value->boolean;
        return 0;
}

static bool compile_agent_entry(Compiler *c, const TomlEntry *e, PolicyAgentSettings *a) {
        const TomlValue *v = e->value;

        if (strcmp(e->key, "dump_dir") == 0) {
                if (!expect_string(c, e))
                        return false;
                if (v->string.data[0] != '/') {
                        error_at(c, v->line, v->column, "'dump_dir' must be an absolute path");
                        return false;
                }
                free(a->dump_dir);
                a->dump_dir = strdup(v->string.data);
                if (!a->dump_dir)
                        c->oom = -ENOMEM;
        } else if (strcmp(e->key, "max_concurrent_dumps") == 0) {
                return compile_agent_count(c, e, POLICY_MAX_CONCURRENT_DUMPS_MAX, &a->max_concurrent_dumps);
        } else if (strcmp(e->key, "max_dumps_per_user") == 0) {
                return compile_agent_count(c, e, POLICY_MAX_CONCURRENT_DUMPS_MAX, &a->max_dumps_per_user);
        } else if (strcmp(e->key, "max_concurrent_own_dumps") == 0) {
                return compile_agent_count(c, e, POLICY_MAX_CONCURRENT_DUMPS_MAX, &a->max_concurrent_own_dumps);
        } else if (strcmp(e->key, "max_use") == 0 || strcmp(e->key, "keep_free") == 0) {
                return compile_size(c, e, strcmp(e->key, "max_use") == 0 ? &a->max_use : &a->keep_free);
        } else if (strcmp(e->key, "audit_failure") == 0) {
                if (!expect_string(c, e))
                        return false;
                if (strcmp(v->string.data, "deny") != 0 && strcmp(v->string.data, "allow") != 0) {
                        error_at(c, v->line, v->column, "'audit_failure' is \"deny\" or \"allow\"");
                        return false;
                }
                a->audit_failure_allow = strcmp(v->string.data, "allow") == 0;
        } else if (strcmp(e->key, "owner_access") == 0) {
                if (!expect_type(c, e, TOML_BOOLEAN))
                        return false;
                a->owner_access = v->boolean;
        } else if (strcmp(e->key, "pam_service") == 0) {
                if (!expect_string(c, e))
                        return false;
                /* it names a file in /etc/pam.d */
                if (strchr(v->string.data, '/') || v->string.data[0] == '.') {
                        error_at(c, v->line, v->column, "'pam_service' must be a plain service name");
                        return false;
                }
                a->pam_service = strdup(v->string.data);
                if (!a->pam_service)
                        c->oom = -ENOMEM;
        } else if (strcmp(e->key, "env_redact") == 0)
                return compile_env_redact(c, e, a);
        else if (strcmp(e->key, "max_age") == 0 || strcmp(e->key, "max_files") == 0 ||
                 strcmp(e->key, "max_use_per_user") == 0)
                return compile_agent_retention_entry(c, e, a);
        else
                return compile_agent_session_entry(c, e, a);
        return true;
}

static bool compile_agent(Compiler *c, const TomlEntry *e, PolicyAgentSettings *a) {
        bool ok = true;

        if (!c->source->is_main) {
                error_at(c, e->line, e->column, "[agent] belongs in the main policy file, not in policy.d");
                return false;
        }
        if (!expect_type(c, e, TOML_TABLE))
                return false;
        for (size_t i = 0; i < e->value->table.n_entries; i++)
                ok = compile_agent_entry(c, &e->value->table.entries[i], a) && ok;
        return ok;
}

static bool check_unique_name(Compiler *c, const Policy *p, const PolicyRule *r, const TomlValue *table) {
        for (size_t i = 0; i < p->n_rules; i++)
                if (p->rules[i].name && r->name && strcmp(p->rules[i].name, r->name) == 0) {
                        error_at(c, table->line, table->column, "rule name '%s' is already used at %s:%u", r->name,
                                 p->rules[i].file, p->rules[i].line);
                        return false;
                }
        return true;
}

/*
 * --- arrays of tables ([[rule]], [[port]], [[on_start]], [[collect]]) ---
 *
 * A policy file's array of tables adds to what the main file and earlier drop-ins gave. Its slots are
 * made in one step: at most @max in the whole policy, @size bytes each after the @n already in @items.
 * On success *@ret_items holds them all (@items moved or not); on failure the error is reported and
 * @items is left as it was.
 */
static bool reserve_tables(Compiler *c, const TomlEntry *e, const char *key, void *items, size_t n, size_t max,
                           size_t size, void **ret_items) {
        void *grown;

        if (!expect_type(c, e, TOML_ARRAY))
                return false;
        if (e->value->array.n_items > max - n) {
                error_at(c, e->line, e->column, "at most %zu [[%s]]s", max, key);
                return false;
        }
        grown = realloc(items, (n + e->value->array.n_items) * size);
        if (!grown) {
                c->oom = -ENOMEM;
                return false;
        }
        *ret_items = grown;
        return true;
}

/*
 * Each of @e's tables to @compile_next, which compiles it into the next slot reserve_tables() made and
 * counts it. An item that is not a table is reported and takes no slot; the others are all compiled, so
 * that one run reports every broken table. Return: whether every one compiled.
 */
static bool compile_tables(Compiler *c, const TomlEntry *e, Policy *p, const char *key,
                           bool (*compile_next)(Compiler *c, Policy *p, const TomlValue *table)) {
        bool ok = true;

        for (size_t i = 0; i < e->value->array.n_items; i++) {
                const TomlValue *table = e->value->array.items[i];

                if (table->type != TOML_TABLE) {
                        error_at(c, table->line, table->column, "'%s' must be an array of tables: [[%s]]", key, key);
                        ok = false;
                        continue;
                }
                ok = compile_next(c, p, table) && ok;
        }
        return ok;
}

/* The next [[rule]]: both checks, so that one run reports a broken rule's duplicate name too. */
static bool compile_next_rule(Compiler *c, Policy *p, const TomlValue *table) {
        PolicyRule *r = &p->rules[p->n_rules];
        bool ok;

        *r = (PolicyRule){};
        ok = compile_rule(c, table, r);
        ok = check_unique_name(c, p, r, table) && ok;
        p->n_rules++;
        return ok;
}

static bool compile_rules(Compiler *c, const TomlEntry *e, Policy *p) {
        void *grown;

        if (!reserve_tables(c, e, "rule", p->rules, p->n_rules, SIZE_MAX, sizeof(PolicyRule), &grown))
                return false;
        p->rules = grown;
        return compile_tables(c, e, p, "rule", compile_next_rule);
}

/* A port's path: where the agent binds, so absolute, plain, and short enough for sun_path. */
static bool compile_port_path(Compiler *c, const TomlEntry *e, PolicyPort *port) {
        const char *s = e->value->string.data;

        if (!expect_string(c, e))
                return false;
        if (s[0] != '/' || strlen(s) > POLICY_PORT_PATH_MAX - 1 || strstr(s, "//") || strstr(s, "/./") ||
            strstr(s, "/../") || s[strlen(s) - 1] == '/' || strcmp(s + strlen(s) - 2, "/.") == 0 ||
            (strlen(s) >= 3 && strcmp(s + strlen(s) - 3, "/..") == 0)) {
                error_at(c, e->value->line, e->value->column,
                         "'path' must be an absolute path to a socket, without '.', '..' or '//', at most %d bytes",
                         POLICY_PORT_PATH_MAX - 1);
                return false;
        }
        port->path = strdup(s);
        if (!port->path)
                c->oom = -ENOMEM;
        return true;
}

static bool compile_port_entry(Compiler *c, const TomlEntry *e, PolicyPort *port) {
        const TomlValue *v = e->value;

        if (strcmp(e->key, "path") == 0)
                return compile_port_path(c, e, port);
        if (strcmp(e->key, "users") == 0)
                return compile_id_list(c, e, false, &port->users);
        if (strcmp(e->key, "groups") == 0)
                return compile_id_list(c, e, true, &port->groups);
        if (strcmp(e->key, "suspend_timeout") == 0) {
                uint64_t usec;

                if (!expect_string(c, e))
                        return false;
                /* "0", "0s": wait; policy_parse_duration() takes no zero */
                if (duration_parse(v->string.data, &usec) == 0 && usec == 0) {
                        port->suspend_timeout_usec = 0;
                        return true;
                }
                if (policy_parse_duration(v->string.data, &port->suspend_timeout_usec) < 0 ||
                    port->suspend_timeout_usec > POLICY_SUSPEND_TIMEOUT_MAX_USEC) {
                        error_at(c, v->line, v->column, "bad duration \"%s\" for 'suspend_timeout' (like \"30s\", "
                                 "at most \"1h\"; \"0\" waits for a resume however long it takes)", v->string.data);
                        return false;
                }
                return true;
        }
        error_at(c, e->line, e->column, "unknown key '%s' in [[port]] (path, users, groups, suspend_timeout)", e->key);
        return false;
}

static bool check_port(Compiler *c, const Policy *p, const PolicyPort *port, const TomlValue *table) {
        if (!port->path) {
                error_at(c, table->line, table->column, "[[port]] needs a 'path'");
                return false;
        }
        if (port->users.n == 0 && port->groups.n == 0) {
                error_at(c, table->line, table->column, "[[port]] needs 'users' or 'groups': whose runtimes connect in");
                return false;
        }
        for (size_t i = 0; i < p->n_ports; i++)
                if (p->ports[i].path && strcmp(p->ports[i].path, port->path) == 0) {
                        error_at(c, table->line, table->column, "port '%s' is already defined at %s:%u", port->path,
                                 p->ports[i].file, p->ports[i].line);
                        return false;
                }
        return true;
}

static bool compile_port(Compiler *c, const Policy *p, const TomlValue *table, PolicyPort *port) {
        bool ok = true;

        port->suspend_timeout_usec = POLICY_SUSPEND_TIMEOUT_DEFAULT_USEC;
        port->line = table->line;
        port->file = strdup(c->source->path);
        if (!port->file)
                c->oom = -ENOMEM;
        for (size_t i = 0; i < table->table.n_entries; i++)
                ok = compile_port_entry(c, &table->table.entries[i], port) && ok;
        return ok && check_port(c, p, port, table);
}

static bool compile_next_port(Compiler *c, Policy *p, const TomlValue *table) {
        PolicyPort *port = &p->ports[p->n_ports];
        bool ok;

        *port = (PolicyPort){};
        ok = compile_port(c, p, table, port);
        p->n_ports++;
        return ok;
}

/* [[port]]: in the main file and in policy.d alike. */
static bool compile_ports(Compiler *c, const TomlEntry *e, Policy *p) {
        void *grown;

        if (!reserve_tables(c, e, "port", p->ports, p->n_ports, POLICY_PORTS_MAX, sizeof(PolicyPort), &grown))
                return false;
        p->ports = grown;
        return compile_tables(c, e, p, "port", compile_next_port);
}

/* [[on_start]]'s duration: a session's, so within what [agent] lets any session last. */
static bool compile_on_start_duration(Compiler *c, const TomlEntry *e, const PolicyAgentSettings *a,
                                      PolicyOnStart *o) {
        const TomlValue *v = e->value;

        if (!expect_string(c, e))
                return false;
        if (policy_parse_duration(v->string.data, &o->duration_usec) < 0) {
                error_at(c, v->line, v->column, "bad duration \"%s\" (like \"90s\", \"5m\", \"1h30m\")",
                         v->string.data);
                return false;
        }
        if (o->duration_usec > a->max_session_duration_usec) {
                error_at(c, v->line, v->column, "'duration' may be at most max_session_duration (%llus), not %llus",
                         (unsigned long long)(a->max_session_duration_usec / USEC_PER_SEC),
                         (unsigned long long)(o->duration_usec / USEC_PER_SEC));
                return false;
        }
        return true;
}

/* [[on_start]]'s max_size: bytes, as max_trace_size, and no more than it. */
static bool compile_on_start_max_size(Compiler *c, const TomlEntry *e, const PolicyAgentSettings *a,
                                      PolicyOnStart *o) {
        const TomlValue *v = e->value;
        PolicySize size;

        if (!expect_string(c, e))
                return false;
        if (policy_parse_size(v->string.data, &size) < 0 || size.bytes == 0) {
                error_at(c, v->line, v->column, "bad size \"%s\" for 'max_size' (like \"1G\", \"500M\")",
                         v->string.data);
                return false;
        }
        if (size.bytes > a->max_trace_size) {
                error_at(c, v->line, v->column, "'max_size' may be at most max_trace_size (%llu bytes), not %llu",
                         (unsigned long long)a->max_trace_size, (unsigned long long)size.bytes);
                return false;
        }
        o->max_size = size.bytes;
        return true;
}

static bool compile_on_start_entry(Compiler *c, const TomlEntry *e, const PolicyAgentSettings *a,
                                   PolicyOnStart *o) {
        const TomlValue *v = e->value;
        int k;

        if (strcmp(e->key, "name") == 0) {
                if (!expect_string(c, e))
                        return false;
                if (!valid_rule_name(v->string.data)) {
                        error_at(c, v->line, v->column, "on_start name must be 1-64 of A-Z a-z 0-9 . _ -");
                        return false;
                }
                o->name = strdup(v->string.data);
                if (!o->name)
                        c->oom = -ENOMEM;
                return true;
        }
        if (strcmp(e->key, "targets") == 0)
                return compile_targets(c, e, &o->targets);
        if (strcmp(e->key, "trace_profile") == 0) {
                if (!expect_string(c, e))
                        return false;
                if (!policy_trace_profile_is_known(v->string.data)) {
                        error_at(c, v->line, v->column, "unknown trace profile \"%s\"", v->string.data);
                        return false;
                }
                o->trace_profile = strdup(v->string.data);
                if (!o->trace_profile)
                        c->oom = -ENOMEM;
                return true;
        }
        if (strcmp(e->key, "trace_providers") == 0)
                return compile_trace_providers(c, e, &o->trace_providers, &o->n_trace_providers);
        if (strcmp(e->key, "duration") == 0)
                return compile_on_start_duration(c, e, a, o);
        if (strcmp(e->key, "max_size") == 0)
                return compile_on_start_max_size(c, e, a, o);
        if (strcmp(e->key, "readers") == 0) {
                /* unlike a rule's: [] says outright that root alone reads the file */
                if (!expect_type(c, e, TOML_ARRAY))
                        return false;
                return v->array.n_items == 0 || compile_readers(c, e, &o->reader_users, &o->reader_groups);
        }
        k = compile_table_artifacts_entry(c, e, &o->artifacts);
        if (k <= 0)
                return k == 0;
        error_at(c, e->line, e->column,
                 "unknown key '%s' in [[on_start]] (name, targets, trace_profile, trace_providers, duration, max_size, "
                 "readers, max_use, yield_to_dumps, readers_may_remove)",
                 e->key);
        return false;
}

/* What no single key can say: the keys an [[on_start]] must have, and the two it must not both have. */
static bool check_on_start(Compiler *c, const TomlValue *table) {
        const TomlEntry *profile = toml_table_find(table, "trace_profile"),
                        *providers = toml_table_find(table, "trace_providers");
        bool ok = true;

        if (!toml_table_find(table, "name")) {
                error_at(c, table->line, table->column, "[[on_start]] needs a name");
                ok = false;
        }
        if (!toml_table_find(table, "targets")) {
                error_at(c, table->line, table->column,
                         "[[on_start]] needs targets (users, units, names, cgroups or containers), or targets.any = true");
                ok = false;
        }
        if (profile && providers) {
                error_at(c, providers->line, providers->column,
                         "[[on_start]] takes trace_profile or trace_providers, not both");
                ok = false;
        } else if (!profile && !providers) {
                error_at(c, table->line, table->column,
                         "[[on_start]] needs a trace_profile or trace_providers: what to trace");
                ok = false;
        }
        if (!toml_table_find(table, "duration")) {
                error_at(c, table->line, table->column, "[[on_start]] needs a duration: how long to trace");
                ok = false;
        }
        return ok;
}

static bool check_unique_on_start_name(Compiler *c, const Policy *p, const PolicyOnStart *o, const TomlValue *table) {
        for (size_t i = 0; i < p->n_on_start; i++)
                if (p->on_start[i].name && o->name && strcmp(p->on_start[i].name, o->name) == 0) {
                        error_at(c, table->line, table->column, "on_start name '%s' is already used at %s:%u",
                                 o->name, p->on_start[i].file, p->on_start[i].line);
                        return false;
                }
        return true;
}

static bool compile_on_start(Compiler *c, const Policy *p, const TomlValue *table, PolicyOnStart *o) {
        bool ok = true;

        o->max_size = p->agent.max_trace_size;
        o->line = table->line;
        o->file = strdup(c->source->path);
        if (!o->file)
                c->oom = -ENOMEM;
        for (size_t i = 0; i < table->table.n_entries; i++)
                ok = compile_on_start_entry(c, &table->table.entries[i], &p->agent, o) && ok;
        return check_on_start(c, table) && ok;
}

/* The next [[on_start]]: both checks, so that one run reports a broken table's duplicate name too. */
static bool compile_next_on_start(Compiler *c, Policy *p, const TomlValue *table) {
        PolicyOnStart *o = &p->on_start[p->n_on_start];
        bool ok;

        *o = (PolicyOnStart){};
        ok = compile_on_start(c, p, table, o);
        ok = check_unique_on_start_name(c, p, o, table) && ok;
        p->n_on_start++;
        return ok;
}

/* [[on_start]]: in the main file and in policy.d alike, after [agent], whose limits bound them. */
static bool compile_on_starts(Compiler *c, const TomlEntry *e, Policy *p) {
        void *grown;

        if (!reserve_tables(c, e, "on_start", p->on_start, p->n_on_start, POLICY_ON_START_MAX, sizeof(PolicyOnStart),
                            &grown))
                return false;
        p->on_start = grown;
        return compile_tables(c, e, p, "on_start", compile_next_on_start);
}

/* --- [[collect]]: collection rules --- */

/* A key of when.counter's tag list or of its instrument name: printable ASCII without the separators. */
static bool counter_text_char(char ch) {
        return ch > ' ' && ch < 0x7F && !strchr(":[],=\"\\", ch);
}

static bool counter_text_valid(const char *s, size_t n) {
        if (n == 0)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!counter_text_char(s[i]))
                        return false;
        return true;
}

/* One "key=value" of when.counter's [...], appended to @col's tags. */
static int parse_counter_tag(const char *s, size_t n, PolicyCollect *col) {
        const char *eq = memchr(s, '=', n);
        PolicyCounterTag *grown;
        char *key, *value;

        if (!eq || !counter_text_valid(s, (size_t)(eq - s)) ||
            !counter_text_valid(eq + 1, n - (size_t)(eq - s) - 1) || col->n_counter_tags >= POLICY_COLLECT_TAGS_MAX)
                return -EINVAL;
        grown = realloc(col->counter_tags, (col->n_counter_tags + 1) * sizeof(PolicyCounterTag));
        if (!grown)
                return -ENOMEM;
        col->counter_tags = grown;
        key = strndup(s, (size_t)(eq - s));
        value = strndup(eq + 1, n - (size_t)(eq - s) - 1);
        if (!key || !value) {
                free(key);
                free(value);
                return -ENOMEM;
        }
        col->counter_tags[col->n_counter_tags++] = (PolicyCounterTag){ .key = key, .value = value };
        return 0;
}

/* "Provider:name" or "Provider:name[key=value,...]" into @col. */
static int parse_counter_selector(const char *s, PolicyCollect *col) {
        const char *colon = strchr(s, ':'), *bracket, *tags;
        size_t n = strlen(s);
        int r;

        if (!colon || n > POLICY_COLLECT_TEXT_MAX)
                return -EINVAL;
        col->counter_provider = strndup(s, (size_t)(colon - s));
        if (!col->counter_provider)
                return -ENOMEM;
        if (!eventpipe_provider_name_is_valid(col->counter_provider))
                return -EINVAL;
        bracket = strchr(colon + 1, '[');
        if (!counter_text_valid(colon + 1, bracket ? (size_t)(bracket - colon - 1) : strlen(colon + 1)))
                return -EINVAL;
        col->counter_name = strndup(colon + 1, bracket ? (size_t)(bracket - colon - 1) : strlen(colon + 1));
        if (!col->counter_name)
                return -ENOMEM;
        if (!bracket)
                return 0;
        if (s[n - 1] != ']' || bracket == s + n - 2) /* "[]" says nothing */
                return -EINVAL;
        for (tags = bracket + 1; tags < s + n - 1;) {
                const char *end = memchr(tags, ',', (size_t)(s + n - 1 - tags));
                size_t len = end ? (size_t)(end - tags) : (size_t)(s + n - 1 - tags);

                r = parse_counter_tag(tags, len, col);
                if (r < 0)
                        return r;
                tags += len + 1;
                if (end && tags == s + n - 1) /* a trailing comma */
                        return -EINVAL;
        }
        return 0;
}

/* when.exception: a type name as the runtime reports it, full ("System.IO.IOException") or short. */
static bool exception_type_valid(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > POLICY_COLLECT_TEXT_MAX || s[0] == '.' || s[n - 1] == '.' || strstr(s, ".."))
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                      *p == '.' || *p == '_' || *p == '+' || *p == '`'))
                        return false;
        return true;
}

typedef struct CollectWhenKeys {
        const TomlEntry *counter, *above, *below, *for_, *exception, *count, *within, *crash;
} CollectWhenKeys;

static bool collect_when_keys(Compiler *c, const TomlEntry *e, CollectWhenKeys *k) {
        static const struct { const char *key; size_t offset; } known[] = {
                { "counter", offsetof(CollectWhenKeys, counter) },
                { "above", offsetof(CollectWhenKeys, above) },
                { "below", offsetof(CollectWhenKeys, below) },
                { "for", offsetof(CollectWhenKeys, for_) },
                { "exception", offsetof(CollectWhenKeys, exception) },
                { "count", offsetof(CollectWhenKeys, count) },
                { "within", offsetof(CollectWhenKeys, within) },
                { "crash", offsetof(CollectWhenKeys, crash) },
        };
        bool ok = true;

        if (!expect_type(c, e, TOML_TABLE))
                return false;
        for (size_t i = 0; i < e->value->table.n_entries; i++) {
                const TomlEntry *w = &e->value->table.entries[i];
                size_t j;

                for (j = 0; j < ELEMENTSOF(known); j++)
                        if (strcmp(w->key, known[j].key) == 0) {
                                *(const TomlEntry **)((char *)k + known[j].offset) = w;
                                break;
                        }
                if (j == ELEMENTSOF(known)) {
                        error_at(c, w->line, w->column,
                                 "unknown key 'when.%s' in [[collect]] (counter, above, below, for; "
                                 "exception, count, within; crash)", w->key);
                        ok = false;
                }
        }
        return ok;
}

/* A duration key of when: more than 0, at most 30 days. */
static bool compile_collect_duration(Compiler *c, const TomlEntry *e, uint64_t *ret) {
        const TomlValue *v = e->value;

        if (!expect_string(c, e))
                return false;
        if (policy_parse_duration(v->string.data, ret) < 0) {
                error_at(c, v->line, v->column, "bad duration \"%s\" for '%s' (like \"2s\", \"5m\"; at most 30 days)",
                         v->string.data, e->key);
                return false;
        }
        return true;
}

/* Keys of one trigger given to a table of the other, named where they stand. */
static bool refuse_when_keys(Compiler *c, const TomlEntry *const *keys, size_t n, const char *trigger) {
        bool ok = true;

        for (size_t i = 0; i < n; i++)
                if (keys[i]) {
                        error_at(c, keys[i]->line, keys[i]->column, "'when.%s' does not go with 'when.%s'",
                                 keys[i]->key, trigger);
                        ok = false;
                }
        return ok;
}

/* when.above, when.below: integers (the TOML reader takes no floats) */
static bool compile_collect_line(Compiler *c, const TomlEntry *e, bool *ret_has, int64_t *ret) {
        if (!expect_type(c, e, TOML_INTEGER))
                return false;
        *ret_has = true;
        *ret = e->value->integer;
        return true;
}

static bool compile_collect_counter(Compiler *c, const CollectWhenKeys *k, PolicyCollect *col) {
        const TomlEntry *others[] = { k->count, k->within };
        bool ok = refuse_when_keys(c, others, ELEMENTSOF(others), "counter");
        int r;

        col->when = POLICY_COLLECT_WHEN_COUNTER;
        if (expect_string(c, k->counter)) {
                r = parse_counter_selector(k->counter->value->string.data, col);
                if (r == -ENOMEM)
                        c->oom = r;
                else if (r < 0) {
                        error_at(c, k->counter->value->line, k->counter->value->column,
                                 "bad counter \"%s\" (like \"System.Runtime:cpu-usage\" or "
                                 "\"Meter:instrument[key=value,...]\": at most %d tags, %d bytes)",
                                 k->counter->value->string.data, POLICY_COLLECT_TAGS_MAX, POLICY_COLLECT_TEXT_MAX);
                        ok = false;
                }
        } else
                ok = false;
        if (!k->above && !k->below) {
                error_at(c, k->counter->line, k->counter->column,
                         "'when.counter' needs 'when.above' or 'when.below' (or both: between): the line to cross");
                ok = false;
        }
        if (k->above)
                ok = compile_collect_line(c, k->above, &col->has_above, &col->above) && ok;
        if (k->below)
                ok = compile_collect_line(c, k->below, &col->has_below, &col->below) && ok;
        if (col->has_above && col->has_below && col->above >= col->below) {
                /* between: nothing is above 10 and below 5 */
                error_at(c, k->below->line, k->below->column,
                         "'when.below' must be more than 'when.above' (between the two), not %lld <= %lld",
                         (long long)col->below, (long long)col->above);
                ok = false;
        }
        if (k->for_)
                ok = compile_collect_duration(c, k->for_, &col->for_usec) && ok;
        return ok;
}

static bool compile_collect_exception(Compiler *c, const CollectWhenKeys *k, PolicyCollect *col) {
        const TomlEntry *others[] = { k->above, k->below, k->for_ };
        bool ok = refuse_when_keys(c, others, ELEMENTSOF(others), "exception");
        const TomlValue *v = k->exception->value;

        col->when = POLICY_COLLECT_WHEN_EXCEPTION;
        col->exception_count = 1;
        if (!expect_string(c, k->exception))
                ok = false;
        else if (!exception_type_valid(v->string.data)) {
                error_at(c, v->line, v->column,
                         "bad exception type \"%s\" (like \"System.TimeoutException\" or \"TimeoutException\")",
                         v->string.data);
                ok = false;
        } else if (!(col->exception_type = strdup(v->string.data)))
                c->oom = -ENOMEM;
        if (k->count) {
                if (!expect_type(c, k->count, TOML_INTEGER))
                        ok = false;
                else if (k->count->value->integer < 1 || k->count->value->integer > POLICY_COLLECT_COUNT_MAX) {
                        error_at(c, k->count->value->line, k->count->value->column, "'when.count' must be 1 to %d",
                                 POLICY_COLLECT_COUNT_MAX);
                        ok = false;
                } else
                        col->exception_count = (unsigned)k->count->value->integer;
        }
        if (k->within)
                ok = compile_collect_duration(c, k->within, &col->within_usec) && ok;
        if (ok && col->exception_count > 1 && !k->within) {
                error_at(c, k->count->line, k->count->column, "'when.count' above 1 needs 'when.within': in what time");
                ok = false;
        } else if (ok && col->exception_count == 1 && k->within) {
                error_at(c, k->within->line, k->within->column,
                         "'when.within' needs 'when.count' above 1: one exception is in any window");
                ok = false;
        }
        return ok;
}

/* when.crash = true: a covered process died and systemd-coredump stored its core (docs/crashes.md). */
static bool compile_collect_crash(Compiler *c, const CollectWhenKeys *k, PolicyCollect *col) {
        const TomlEntry *others[] = { k->above, k->below, k->for_, k->count, k->within };
        bool ok = refuse_when_keys(c, others, ELEMENTSOF(others), "crash");

        if (!expect_type(c, k->crash, TOML_BOOLEAN))
                return false;
        if (!k->crash->value->boolean) {
                error_at(c, k->crash->line, k->crash->column, "'when.crash = false' means nothing; leave it out");
                return false;
        }
        col->when = POLICY_COLLECT_WHEN_CRASH;
        return ok;
}

/* when.*: exactly one trigger, and only its own keys. */
static bool compile_collect_when(Compiler *c, const TomlEntry *e, PolicyCollect *col) {
        CollectWhenKeys k = {};

        if (!collect_when_keys(c, e, &k))
                return false;
        if (!!k.counter + !!k.exception + !!k.crash > 1) {
                const TomlEntry *second = k.counter && k.exception ? k.exception : k.crash;

                error_at(c, second->line, second->column,
                         "'when.counter', 'when.exception' or 'when.crash', one of them: one trigger a table");
                return false;
        }
        if (k.counter)
                return compile_collect_counter(c, &k, col);
        if (k.exception)
                return compile_collect_exception(c, &k, col);
        if (k.crash)
                return compile_collect_crash(c, &k, col);
        error_at(c, e->line, e->column, "'when' needs a trigger: 'when.counter', 'when.exception' or 'when.crash'");
        return false;
}

/*
 * then.counters: true for what dsctl counters shows unless told (System.Runtime), or the providers
 * (EventSources and Meters) as dsctl counters --counters names them, without counter names.
 */
static bool compile_collect_counters(Compiler *c, const TomlEntry *t, PolicyCollect *col) {
        static const char *const fallback[] = { "System.Runtime" };
        const TomlValue *v = t->value;

        col->then = POLICY_COLLECT_THEN_COUNTERS;
        if (v->type == TOML_BOOLEAN) {
                if (!v->boolean) {
                        error_at(c, t->line, t->column, "'then.counters = false' means nothing; leave it out");
                        return false;
                }
                col->counters_providers.items = calloc(1, sizeof(char *));
                if (!col->counters_providers.items || !(col->counters_providers.items[0] = strdup(fallback[0])))
                        c->oom = -ENOMEM;
                else
                        col->counters_providers.n = 1;
                return true;
        }
        if (v->type != TOML_ARRAY) {
                error_at(c, v->line, v->column, "'then.counters' is true or a list of providers "
                         "(like [\"System.Runtime\", \"MyCompany.MyMeter\"])");
                return false;
        }
        if (!expect_string_list(c, t))
                return false;
        if (v->array.n_items > POLICY_COLLECT_COUNTERS_MAX) {
                error_at(c, v->line, v->column, "'then.counters' names at most %d providers", POLICY_COLLECT_COUNTERS_MAX);
                return false;
        }
        for (size_t i = 0; i < v->array.n_items; i++) {
                const TomlValue *item = v->array.items[i];

                /* the Metrics provider is the one the session asks the Meters through: not a provider to name */
                if (!eventpipe_provider_name_is_valid(item->string.data) ||
                    strcmp(item->string.data, EVENTPIPE_METRICS_PROVIDER) == 0) {
                        error_at(c, item->line, item->column, "bad provider name \"%s\" in 'then.counters' "
                                 "(an EventSource or a Meter: letters, digits, . - _)", item->string.data);
                        return false;
                }
        }
        if (string_list_take(&col->counters_providers, v) < 0)
                c->oom = -ENOMEM;
        return true;
}

/* then.*: exactly one action; duration with trace_profile (required), counters and exceptions (optional) only. */
static bool compile_collect_then_entry(Compiler *c, const TomlEntry *t, const PolicyAgentSettings *a,
                                       PolicyCollect *col, const TomlEntry **action) {
        const TomlValue *v = t->value;

        if (strcmp(t->key, "duration") == 0) {
                if (!compile_collect_duration(c, t, &col->duration_usec))
                        return false;
                if (col->duration_usec > a->max_session_duration_usec) {
                        error_at(c, v->line, v->column,
                                 "'then.duration' may be at most max_session_duration (%llus), not %llus",
                                 (unsigned long long)(a->max_session_duration_usec / USEC_PER_SEC),
                                 (unsigned long long)(col->duration_usec / USEC_PER_SEC));
                        return false;
                }
                return true;
        }
        if (strcmp(t->key, "egress") == 0)
                /* not an action: where the action's artifact is uploaded to, resolved once the policy is whole */
                return compile_egress_name(c, t, &col->egress_name, &col->egress_line, &col->egress_column);
        if (strcmp(t->key, "flame") == 0) {
                /* not an action: the trace's flame graph beside it (compile_collect_flame()) */
                if (!expect_type(c, t, TOML_BOOLEAN))
                        return false;
                col->flame = v->boolean;
                return true;
        }
        if (strcmp(t->key, "dump") != 0 && strcmp(t->key, "stacks") != 0 && strcmp(t->key, "trace_profile") != 0 &&
            strcmp(t->key, "counters") != 0 && strcmp(t->key, "gcdump") != 0 && strcmp(t->key, "core") != 0 &&
            strcmp(t->key, "exceptions") != 0) {
                error_at(c, t->line, t->column,
                         "unknown key 'then.%s' in [[collect]] (dump, stacks, gcdump, exceptions, trace_profile, "
                         "counters, duration, flame, core, egress)",
                         t->key);
                return false;
        }
        if (*action) {
                error_at(c, t->line, t->column, "'then.%s' and 'then.%s': one action a table", (*action)->key, t->key);
                return false;
        }
        *action = t;
        if (strcmp(t->key, "stacks") == 0 || strcmp(t->key, "gcdump") == 0 || strcmp(t->key, "core") == 0 ||
            strcmp(t->key, "exceptions") == 0) {
                if (!expect_type(c, t, TOML_BOOLEAN))
                        return false;
                if (!v->boolean) {
                        error_at(c, t->line, t->column, "'then.%s = false' means nothing; leave it out", t->key);
                        return false;
                }
                col->then = strcmp(t->key, "stacks") == 0       ? POLICY_COLLECT_THEN_STACKS
                            : strcmp(t->key, "gcdump") == 0     ? POLICY_COLLECT_THEN_GCDUMP
                            : strcmp(t->key, "exceptions") == 0 ? POLICY_COLLECT_THEN_EXCEPTIONS
                                                                : POLICY_COLLECT_THEN_CORE;
                return true;
        }
        if (strcmp(t->key, "counters") == 0)
                return compile_collect_counters(c, t, col);
        if (!expect_string(c, t))
                return false;
        if (strcmp(t->key, "dump") == 0) {
                col->then = POLICY_COLLECT_THEN_DUMP;
                col->dump_type = policy_dump_type_from_string(v->string.data);
                if (col->dump_type == _POLICY_DUMP_INVALID || col->dump_type == POLICY_DUMP_NONE) {
                        error_at(c, v->line, v->column, "unknown dump type \"%s\" (mini, heap, triage, full)",
                                 v->string.data);
                        return false;
                }
                return true;
        }
        col->then = POLICY_COLLECT_THEN_TRACE;
        if (!policy_trace_profile_is_known(v->string.data)) {
                error_at(c, v->line, v->column, "unknown trace profile \"%s\"", v->string.data);
                return false;
        }
        if (!(col->trace_profile = strdup(v->string.data)))
                c->oom = -ENOMEM;
        return true;
}

/* then.flame = true: the flame graph of the table's trace, so only with a trace_profile that samples CPU. */
static bool compile_collect_flame(Compiler *c, const TomlEntry *flame, const TomlEntry *action,
                                  const PolicyCollect *col) {
        char sampling[128] = "";
        size_t n;
        const EventPipeProfile *profiles = eventpipe_profiles(&n);

        if (!col->flame)
                return true;
        if (!action || strcmp(action->key, "trace_profile") != 0) {
                error_at(c, flame->line, flame->column,
                         "'then.flame' goes with 'then.trace_profile' only: the flame graph is drawn of the table's trace");
                return false;
        }
        if (!col->trace_profile || eventpipe_profile_samples_cpu(col->trace_profile))
                return true;
        for (size_t i = 0; i < n; i++)
                if (eventpipe_profile_samples_cpu(profiles[i].name))
                        snprintf(sampling + strlen(sampling), sizeof(sampling) - strlen(sampling), "%s%s",
                                 sampling[0] ? ", " : "", profiles[i].name);
        error_at(c, flame->line, flame->column,
                 "'then.flame' needs a trace profile that samples CPU: \"%s\" has no %s, so its trace has no "
                 "stacks to draw (these have: %s)",
                 col->trace_profile, EVENTPIPE_SAMPLE_PROFILER, sampling);
        return false;
}

static bool compile_collect_then(Compiler *c, const TomlEntry *e, const PolicyAgentSettings *a, PolicyCollect *col) {
        const TomlEntry *action = NULL, *duration;
        bool ok = true;

        if (!expect_type(c, e, TOML_TABLE))
                return false;
        for (size_t i = 0; i < e->value->table.n_entries; i++)
                ok = compile_collect_then_entry(c, &e->value->table.entries[i], a, col, &action) && ok;
        duration = toml_table_find(e->value, "duration");
        if (!action && ok) {
                error_at(c, e->line, e->column, "'then' needs an action: 'then.dump', 'then.stacks', "
                         "'then.gcdump', 'then.exceptions', 'then.trace_profile', 'then.counters' or (with when.crash) "
                         "'then.core'");
                return false;
        }
        if (action && strcmp(action->key, "trace_profile") == 0 && !duration) {
                error_at(c, action->line, action->column, "'then.trace_profile' needs 'then.duration': how long to trace");
                return false;
        }
        if (action && strcmp(action->key, "trace_profile") != 0 && strcmp(action->key, "counters") != 0 &&
            strcmp(action->key, "exceptions") != 0 && duration) {
                error_at(c, duration->line, duration->column,
                         "'then.duration' goes with 'then.trace_profile', 'then.counters' or 'then.exceptions' only");
                return false;
        }
        if (ok && action && !duration && (strcmp(action->key, "counters") == 0 || strcmp(action->key, "exceptions") == 0)) {
                uint64_t usec = strcmp(action->key, "counters") == 0 ? POLICY_COLLECT_COUNTERS_DEFAULT_USEC
                                                                     : POLICY_COLLECT_EXCEPTIONS_DEFAULT_USEC;

                col->duration_usec = usec < a->max_session_duration_usec ? usec : a->max_session_duration_usec;
        }
        if (ok && toml_table_find(e->value, "flame"))
                ok = compile_collect_flame(c, toml_table_find(e->value, "flame"), action, col);
        return ok;
}

static bool compile_collect_entry(Compiler *c, const TomlEntry *e, const PolicyAgentSettings *a, PolicyCollect *col) {
        const TomlValue *v = e->value;
        int k;

        if (strcmp(e->key, "name") == 0) {
                if (!expect_string(c, e))
                        return false;
                if (!valid_rule_name(v->string.data)) {
                        error_at(c, v->line, v->column, "collect name must be 1-64 of A-Z a-z 0-9 . _ -");
                        return false;
                }
                if (!(col->name = strdup(v->string.data)))
                        c->oom = -ENOMEM;
                return true;
        }
        if (strcmp(e->key, "targets") == 0)
                return compile_targets(c, e, &col->targets);
        if (strcmp(e->key, "when") == 0)
                return compile_collect_when(c, e, col);
        if (strcmp(e->key, "then") == 0)
                return compile_collect_then(c, e, a, col);
        if (strcmp(e->key, "readers") == 0) {
                /* as [[on_start]]'s: [] says outright that root alone reads the files */
                if (!expect_type(c, e, TOML_ARRAY))
                        return false;
                return v->array.n_items == 0 || compile_readers(c, e, &col->reader_users, &col->reader_groups);
        }
        if (strcmp(e->key, "limit") == 0) {
                if (!expect_string(c, e))
                        return false;
                if (policy_parse_rate(v->string.data, &col->limit) < 0 || col->limit.count > POLICY_COLLECT_LIMIT_MAX) {
                        error_at(c, v->line, v->column,
                                 "bad limit \"%s\" (like \"1/1h\": count/duration, per process; at most %d a period)",
                                 v->string.data, POLICY_COLLECT_LIMIT_MAX);
                        return false;
                }
                return true;
        }
        if (strcmp(e->key, "limit_total") == 0) {
                if (!expect_string(c, e))
                        return false;
                if (policy_parse_rate(v->string.data, &col->limit_total) < 0 ||
                    col->limit_total.count > POLICY_COLLECT_LIMIT_TOTAL_MAX) {
                        error_at(c, v->line, v->column,
                                 "bad limit_total \"%s\" (like \"10/1h\": count/duration, for the table over all the "
                                 "processes it covers; at most %d a period)",
                                 v->string.data, POLICY_COLLECT_LIMIT_TOTAL_MAX);
                        return false;
                }
                return true;
        }
        k = compile_table_artifacts_entry(c, e, &col->artifacts);
        if (k <= 0)
                return k == 0;
        error_at(c, e->line, e->column,
                 "unknown key '%s' in [[collect]] (name, targets, when, then, readers, limit, limit_total, max_use, "
                 "yield_to_dumps, readers_may_remove)",
                 e->key);
        return false;
}

/* The keys a [[collect]] must have. */
static bool check_collect(Compiler *c, const TomlValue *table) {
        static const struct { const char *key, *message; } required[] = {
                { "name", "[[collect]] needs a name" },
                { "targets", "[[collect]] needs targets (users, units, names, cgroups or containers), "
                             "or targets.any = true" },
                { "when", "[[collect]] needs a trigger: when.counter, when.exception or when.crash" },
                { "then", "[[collect]] needs an action: then.dump, then.stacks, then.gcdump, then.exceptions, "
                          "then.counters or then.trace_profile" },
        };
        bool ok = true;

        for (size_t i = 0; i < ELEMENTSOF(required); i++)
                if (!toml_table_find(table, required[i].key)) {
                        error_at(c, table->line, table->column, "%s", required[i].message);
                        ok = false;
                }
        return ok;
}

static bool check_unique_collect_name(Compiler *c, const Policy *p, const PolicyCollect *col, const TomlValue *table) {
        for (size_t i = 0; i < p->n_collect; i++)
                if (p->collect[i].name && col->name && strcmp(p->collect[i].name, col->name) == 0) {
                        error_at(c, table->line, table->column, "collect name '%s' is already used at %s:%u",
                                 col->name, p->collect[i].file, p->collect[i].line);
                        return false;
                }
        return true;
}

static bool compile_collect(Compiler *c, const Policy *p, const TomlValue *table, PolicyCollect *col) {
        bool ok = true;

        col->limit = (PolicyRateLimit){ .count = 1, .period_usec = 3600 * USEC_PER_SEC };
        col->limit_total = (PolicyRateLimit){ .count = POLICY_COLLECT_LIMIT_TOTAL_DEFAULT_COUNT,
                                              .period_usec = POLICY_COLLECT_LIMIT_TOTAL_DEFAULT_USEC };
        col->line = table->line;
        if (!(col->file = strdup(c->source->path)))
                c->oom = -ENOMEM;
        for (size_t i = 0; i < table->table.n_entries; i++)
                ok = compile_collect_entry(c, &table->table.entries[i], &p->agent, col) && ok;
        ok = check_collect(c, table) && ok;
        /* a crash's core is what a crash table takes, and all it can take: the process is gone */
        if (ok && (col->when == POLICY_COLLECT_WHEN_CRASH) != (col->then == POLICY_COLLECT_THEN_CORE)) {
                error_at(c, table->line, table->column, col->when == POLICY_COLLECT_WHEN_CRASH
                                 ? "a [[collect]] with when.crash takes then.core = true: the process is gone"
                                 : "then.core goes with when.crash only");
                ok = false;
        }
        /* a crash's core is not uploaded (docs/egress.md): refused rather than a store that silently gets nothing */
        if (ok && col->when == POLICY_COLLECT_WHEN_CRASH && col->egress_name) {
                error_at(c, col->egress_line, col->egress_column,
                         "then.egress does not go with when.crash yet: a crash's core stays in dump_dir");
                ok = false;
        }
        return ok;
}

/* The next [[collect]]: both checks, so that one run reports a broken table's duplicate name too. */
static bool compile_next_collect(Compiler *c, Policy *p, const TomlValue *table) {
        PolicyCollect *col = &p->collect[p->n_collect];
        bool ok;

        *col = (PolicyCollect){};
        ok = compile_collect(c, p, table, col);
        ok = check_unique_collect_name(c, p, col, table) && ok;
        p->n_collect++;
        return ok;
}

/* [[collect]]: in the main file and in policy.d alike, after [agent], whose limits bound them. */
static bool compile_collects(Compiler *c, const TomlEntry *e, Policy *p) {
        void *grown;

        if (!reserve_tables(c, e, "collect", p->collect, p->n_collect, POLICY_COLLECT_MAX, sizeof(PolicyCollect),
                            &grown))
                return false;
        p->collect = grown;
        return compile_tables(c, e, p, "collect", compile_next_collect);
}

static bool compile_source(Compiler *c, Policy *p) {
        const TomlValue *root = c->source->root;
        const TomlEntry *agent = toml_table_find(root, "agent");
        bool ok = true;

        /* first, wherever it stands in the file: [[on_start]] and [[collect]] are held to the [agent] limits */
        if (agent)
                ok = compile_agent(c, agent, &p->agent);
        for (size_t i = 0; i < root->table.n_entries; i++) {
                const TomlEntry *e = &root->table.entries[i];

                if (e == agent)
                        continue;
                if (strcmp(e->key, "rule") == 0)
                        ok = compile_rules(c, e, p) && ok;
                else if (strcmp(e->key, "port") == 0)
                        ok = compile_ports(c, e, p) && ok;
                else if (strcmp(e->key, "on_start") == 0)
                        ok = compile_on_starts(c, e, p) && ok;
                else if (strcmp(e->key, "collect") == 0)
                        ok = compile_collects(c, e, p) && ok;
                else if (strcmp(e->key, "egress") == 0)
                        ok = compile_egresses(c, e, p) && ok;
                else {
                        error_at(c, e->line, e->column,
                                 "unknown key '%s' (a policy has [agent], [[rule]], [[port]], [[on_start]], "
                                 "[[collect]] and [egress.NAME])",
                                 e->key);
                        ok = false;
                }
        }
        return ok;
}

/**
 * policy_compile() - check documents against the schema and build a Policy
 *
 * All documents are checked even after an error, so that one run reports
 * every problem. Rules and [[on_start]]s keep their order: main file first,
 * then policy.d in the order given.
 *
 * Return: 0; POLICY_E_INVALID with the problems in @diagnostics; -ENOMEM.
 */
int policy_compile(const PolicySource *sources, size_t n_sources, const PolicyResolver *resolver,
                   Policy **ret, PolicyDiagnostics *diagnostics) {
        Policy *p = policy_new_builtin();
        bool ok = true;
        int oom = 0;

        if (!p)
                return -ENOMEM;
        for (size_t i = 0; i < n_sources; i++) {
                Compiler c = { .source = &sources[i], .resolver = resolver, .diagnostics = diagnostics };

                ok = compile_source(&c, p) && ok;
                if (c.oom)
                        oom = c.oom;
        }
        p->n_files = n_sources;
        /* also after other errors, so that one run names a missing store too */
        if (!oom) {
                int r = resolve_egress_names(p, diagnostics);

                if (r < 0)
                        oom = r;
                else if (r > 0)
                        ok = false;
        }

        if (oom || !ok) {
                policy_unref(p);
                return oom ? oom : POLICY_E_INVALID;
        }
        *ret = p;
        return 0;
}
