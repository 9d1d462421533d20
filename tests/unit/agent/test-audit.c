/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* --audit json: each record one line of JSON whose values are the journal's, whatever a value holds */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/audit/audit.h"
#include "common/cleanup.h"
#include "tests/unit/property.h"
#include "tests/unit/tap.h"
#include "common/text.h"

/* ---- a strict reader of what audit_json_format() may write: one object of strings or arrays of strings ---- */

typedef struct JsonMember {
        char key[64];
        char values[4][512]; /* decoded, UTF-8 */
        size_t n_values;
        bool array;
} JsonMember;

static int hex_digit(char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A JSON string at *@p, decoded into @out (@size bytes); false when it is not one, or has what a line must not. */
static bool read_string(const char **p, char *out, size_t size) {
        const char *s = *p;
        size_t o = 0;

        if (*s++ != '"')
                return false;
        while (*s != '"') {
                uint32_t cp;
                size_t len;

                if ((unsigned char)*s < 0x20 || *s == 0x7F)
                        return false; /* a raw control character, a newline above all */
                if (*s == '\\') {
                        s++;
                        if (*s == '"' || *s == '\\' || *s == '/')
                                cp = (unsigned char)*s++;
                        else if (*s == 'u') {
                                cp = 0;
                                for (int k = 1; k <= 4; k++) {
                                        if (hex_digit(s[k]) < 0)
                                                return false;
                                        cp = cp << 4 | (uint32_t)hex_digit(s[k]);
                                }
                                s += 5;
                                if (cp >= 0xD800 && cp <= 0xDFFF)
                                        return false; /* never written: no pair is ever needed */
                        } else
                                return false;
                        if (o + 4 >= size)
                                return false;
                        o += utf8_encode(cp, out + o);
                        continue;
                }
                len = utf8_decode(s, strnlen(s, 4), &cp);
                if (len == 0 || o + len >= size)
                        return false;
                memcpy(out + o, s, len);
                o += len;
                s += len;
        }
        out[o] = '\0';
        *p = s + 1;
        return true;
}

/* The whole line: {...} and one newline, nothing after. Return: members read, or -1. */
static int read_object(const char *line, JsonMember *m, size_t max) {
        const char *p = line;
        size_t n = 0;

        if (*p++ != '{')
                return -1;
        while (*p != '}') {
                if (n == max || (n > 0 && *p++ != ','))
                        return -1;
                m[n] = (JsonMember){};
                if (!read_string(&p, m[n].key, sizeof(m[n].key)) || *p++ != ':')
                        return -1;
                if (*p == '[') {
                        m[n].array = true;
                        p++;
                        do {
                                if (m[n].n_values == 4 ||
                                    !read_string(&p, m[n].values[m[n].n_values++], sizeof(m[n].values[0])))
                                        return -1;
                        } while (*p == ',' && p++);
                        if (*p++ != ']')
                                return -1;
                } else if (!read_string(&p, m[n].values[m[n].n_values++], sizeof(m[n].values[0])))
                        return -1;
                n++;
        }
        return strcmp(p, "}\n") == 0 ? (int)n : -1;
}

static const JsonMember *member(const JsonMember *m, int n, const char *key) {
        for (int i = 0; i < n; i++)
                if (strcmp(m[i].key, key) == 0)
                        return &m[i];
        return NULL;
}

static int format(const char *const *fields, size_t n, char **line) {
        struct iovec iov[16];
        size_t size = 0;
        int r;

        for (size_t i = 0; i < n; i++)
                iov[i] = (struct iovec){ .iov_base = (char *)fields[i], .iov_len = strlen(fields[i]) };
        r = audit_json_format(iov, n, line, &size);
        if (r == 0)
                check(size == strlen(*line) && utf8_is_valid(*line, size) && strchr(*line, '\n') == *line + size - 1);
        return r;
}

static void test_json_format(void) {
        static const char *const fields[] = {
                "MESSAGE_ID=27ade2ec85a54471a176f947b0ec018e",
                "PRIORITY=6",
                "MESSAGE=alice info pid 42: allowed (ok)",
                /* what a value may hold: quotes, backslashes, a newline, controls, an '=' */
                "DSAGENT_REASON=say \"hi\" \\ \\x0a\nDSAGENT_DECISION=allowed\r\t\x1b[2J=x",
                /* bytes that are not UTF-8, and what would reorder text */
                "DSAGENT_TARGET_EXE=/srv/\xff\xfe/app\xe2\x80\xae" "exe",
                "DSAGENT_TARGET_CGROUP=/caf\xc3\xa9/\xe2\x82\xac",
                "DSAGENT_EMPTY=",
                "NOT A FIELD",
        };
        _cleanup_free_ char *line = NULL;
        JsonMember m[16];
        const JsonMember *v;
        int n;

        check(format(fields, sizeof(fields) / sizeof(fields[0]), &line) == 0);
        n = read_object(line, m, 16);
        check(n == 7);
        if (n != 7) {
                printf("# %s", line);
                return;
        }
        /* in order, keys as the journal names them, values decoded back to the journal's bytes */
        check(strcmp(m[0].key, "MESSAGE_ID") == 0 && strcmp(m[0].values[0], "27ade2ec85a54471a176f947b0ec018e") == 0);
        check(strcmp(m[1].key, "PRIORITY") == 0 && strcmp(m[1].values[0], "6") == 0 && !m[1].array);
        v = member(m, n, "DSAGENT_REASON");
        check(v && strcmp(v->values[0], "say \"hi\" \\ \\x0a\nDSAGENT_DECISION=allowed\r\t\x1b[2J=x") == 0);
        check(!member(m, n, "DSAGENT_DECISION")); /* a newline in a value forges no field */
        v = member(m, n, "DSAGENT_TARGET_EXE");
        check(v && strcmp(v->values[0], "/srv/\xef\xbf\xbd\xef\xbf\xbd/app\xe2\x80\xae" "exe") == 0);
        check(strstr(line, "\\ufffd\\ufffd") && strstr(line, "\\u202e") && strstr(line, "\\u001b[2J"));
        v = member(m, n, "DSAGENT_TARGET_CGROUP");
        check(v && strcmp(v->values[0], "/caf\xc3\xa9/\xe2\x82\xac") == 0);
        check(strstr(line, "\"/caf\xc3\xa9/\xe2\x82\xac\"")); /* valid UTF-8 stays as it is */
        v = member(m, n, "DSAGENT_EMPTY");
        check(v && v->values[0][0] == '\0');
        check(!strstr(line, "NOT A FIELD"));
}

static void test_json_format_repeated(void) {
        static const char *const fields[] = {
                "MESSAGE_ID=29cd34f17b474bad9ed538319addd224",
                "DSAGENT_POLICY_ERROR=a.toml:1:1: first",
                "DSAGENT_POLICY_LOADED=no",
                "DSAGENT_POLICY_ERROR=a.toml:2:3: \"second\"",
        };
        _cleanup_free_ char *line = NULL;
        JsonMember m[8];
        const JsonMember *v;
        int n;

        check(format(fields, 4, &line) == 0);
        n = read_object(line, m, 8);
        check(n == 3);
        /* as journalctl -o json shows a field a record has more than once: one key, its values in order */
        v = member(m, n, "DSAGENT_POLICY_ERROR");
        check(v && v->array && v->n_values == 2 && strcmp(v->values[0], "a.toml:1:1: first") == 0 &&
              strcmp(v->values[1], "a.toml:2:3: \"second\"") == 0);
        check(n == 3 && strcmp(m[1].key, "DSAGENT_POLICY_ERROR") == 0 && strcmp(m[2].key, "DSAGENT_POLICY_LOADED") == 0);

        free(line);
        line = NULL;
        check(format(fields, 0, &line) == 0 && strcmp(line, "{}\n") == 0);
}

/* @r through the json sink, on stdout: its one line in @buf, parsed into @m. Return: the members, or -1. */
static int emit_request(AuditSink sink, const void *r) {
        return audit_log_request(sink, r);
}

/* What @emit wrote through the json sink, read back into @m. */
static int log_json_of(int (*emit)(AuditSink sink, const void *arg), const void *arg, char *buf, size_t size,
                       JsonMember *m, int max) {
        char path[] = "/tmp/test-audit-XXXXXX";
        AuditSink sink;
        int fd, saved, n, k;
        ssize_t got;

        check(audit_sink_from_string("json", &sink) == 0 && sink == AUDIT_SINK_JSON);
        check(audit_sink_check(sink) == 0);
        fd = mkstemp(path);
        check(fd >= 0);
        if (fd < 0)
                return -1;
        fflush(stdout);
        saved = dup(STDOUT_FILENO);
        check(saved >= 0 && dup2(fd, STDOUT_FILENO) == STDOUT_FILENO);
        k = emit(sink, arg);
        audit_sink_close(); /* the sink keeps what it opened at its first record: the next test's file is another */
        check(dup2(saved, STDOUT_FILENO) == STDOUT_FILENO);
        close(saved);
        check(k == 0);
        got = pread(fd, buf, size - 1, 0);
        close(fd);
        unlink(path);
        check(got > 0);
        if (got <= 0)
                return -1;
        buf[got] = '\0';
        check(strchr(buf, '\n') == buf + got - 1); /* one line */
        n = read_object(buf, m, max);
        check(n > 6); /* a suppressed record has 8 members, a request's more */
        if (n <= 6) {
                printf("# %s", buf);
                return -1;
        }
        return n;
}

static int log_json(const AuditRecord *r, char *buf, size_t size, JsonMember *m, int max) {
        return log_json_of(emit_request, r, buf, size, m, max);
}

#define TEST_ID "fcfe79830dc51fa91eb457b37217629989435997564dd17d8d75eee0753cc376"
#define TEST_POD "8d2a4c1e-5b3f-4e6a-9c7d-0f1e2d3c4b5a"

/* A whole request record through the json sink: one line on stdout, with the target's container. */
static void test_json_sink(void) {
        char buf[16384];
        AuditRecord r = {
                .request_id = 0x1234, .client_uid = 1001, .client_gid = 1001, .client_pid = 77, .command = "info",
                .have_target = true, .target_pid = 4242, .target_uid = 998,
                .target_unit = "orders.service", .target_exe = "/srv/orders/Orders\n\"x\"",
                .target_container_id = TEST_ID,
                .target_pod_uid = TEST_POD,
                .target_cgroup = "/kubepods/pod8d2a4c1e-5b3f-4e6a-9c7d-0f1e2d3c4b5a/\x1b]0;x\x07",
                .target_cgroup_vouched = true,
                .decision = AUDIT_DECISION_ALLOWED, .rule = "ops", .reason = "process info read",
        };
        JsonMember m[48];
        const JsonMember *v;
        int n = log_json(&r, buf, sizeof(buf), m, 48);

        if (n < 0)
                return;
        check((v = member(m, n, "MESSAGE_ID")) && strcmp(v->values[0], "27ade2ec85a54471a176f947b0ec018e") == 0);
        check((v = member(m, n, "DSAGENT_TARGET_CONTAINER_ID")) && strcmp(v->values[0], r.target_container_id) == 0);
        check((v = member(m, n, "DSAGENT_TARGET_POD_UID")) && strcmp(v->values[0], r.target_pod_uid) == 0);
        check(!member(m, n, "DSAGENT_TARGET_UNVERIFIED_CONTAINER_ID") && !member(m, n, "DSAGENT_TARGET_CGROUP_UNVERIFIED"));
        /* the values are the journal's: what a target controls was escaped before (text_escape()) */
        check((v = member(m, n, "DSAGENT_TARGET_CGROUP")) &&
              strcmp(v->values[0], "/kubepods/pod8d2a4c1e-5b3f-4e6a-9c7d-0f1e2d3c4b5a/\\x1b]0;x\\x07") == 0);
        check((v = member(m, n, "DSAGENT_TARGET_EXE")) && strcmp(v->values[0], "/srv/orders/Orders\\x0a\"x\"") == 0);
        check((v = member(m, n, "DSAGENT_DECISION")) && strcmp(v->values[0], "allowed") == 0);
        check((v = member(m, n, "PRIORITY")) && strcmp(v->values[0], "6") == 0);
}

/* A cgroup root does not vouch for (a delegated subtree's): its names go in fields of their own, never as the
 * container, and the record says the cgroup is unverified. */
static void test_json_sink_unverified(void) {
        char buf[16384];
        AuditRecord r = {
                .request_id = 0x1235, .client_uid = 1001, .client_gid = 1001, .client_pid = 77, .command = "info",
                .have_target = true, .target_pid = 4243, .target_uid = 1002,
                .target_container_id = TEST_ID, .target_pod_uid = TEST_POD,
                .target_cgroup = "/dst-delegated/libpod-" TEST_ID ".scope",
                .decision = AUDIT_DECISION_DENIED, .reason = "no rule",
        };
        JsonMember m[48];
        const JsonMember *v;
        int n = log_json(&r, buf, sizeof(buf), m, 48);

        if (n < 0)
                return;
        check(!member(m, n, "DSAGENT_TARGET_CONTAINER_ID") && !member(m, n, "DSAGENT_TARGET_POD_UID"));
        check((v = member(m, n, "DSAGENT_TARGET_UNVERIFIED_CONTAINER_ID")) && strcmp(v->values[0], TEST_ID) == 0);
        check((v = member(m, n, "DSAGENT_TARGET_UNVERIFIED_POD_UID")) && strcmp(v->values[0], TEST_POD) == 0);
        check((v = member(m, n, "DSAGENT_TARGET_CGROUP_UNVERIFIED")) && strcmp(v->values[0], "yes") == 0);
        check((v = member(m, n, "DSAGENT_TARGET_CGROUP")) && strcmp(v->values[0], r.target_cgroup) == 0);
}

/* A peer in a namespace root made is charged as the namespace: named as /proc/PID/ns/user names it, in its
 * request's record and in the record that counts its refused requests, which has no uid for it. */
static uid_t suppressed_uid;

static int emit_suppressed(AuditSink sink, const void *count) {
        return audit_log_suppressed(sink, suppressed_uid, *(const uint64_t *)count);
}

static void test_charged_to_a_namespace(void) {
        char buf[16384];
        AuditRecord r = {
                .request_id = 0x1236, .client_uid = 301003, .client_gid = 301003, .client_pid = 78, .command = "ps",
                .client_charged_other = true, .client_charged_uid = 0xF0000123,
                .decision = AUDIT_DECISION_FAILED, .reason = "too many connections from this user",
        };
        uint64_t count = 7;
        JsonMember m[48];
        const JsonMember *v;
        int n = log_json(&r, buf, sizeof(buf), m, 48);

        if (n < 0)
                return;
        check((v = member(m, n, "DSAGENT_CLIENT_UID")) && strcmp(v->values[0], "301003") == 0);
        check((v = member(m, n, "DSAGENT_CLIENT_CHARGED_UID")) && strcmp(v->values[0], "userns:4026532131") == 0);

        suppressed_uid = 0xF0000123;
        n = log_json_of(emit_suppressed, &count, buf, sizeof(buf), m, 48);
        if (n < 0)
                return;
        check(!member(m, n, "DSAGENT_CLIENT_UID"));
        check((v = member(m, n, "DSAGENT_CLIENT_CHARGED_UID")) && strcmp(v->values[0], "userns:4026532131") == 0);
        check((v = member(m, n, "DSAGENT_CLIENT_TEXT")) && strcmp(v->values[0], "peers in user namespace 4026532131") == 0);
        check((v = member(m, n, "DSAGENT_SUPPRESSED")) && strcmp(v->values[0], "7") == 0);
        /* a uid's count names the uid, as ever */
        suppressed_uid = 301003;
        n = log_json_of(emit_suppressed, &count, buf, sizeof(buf), m, 48);
        if (n < 0)
                return;
        check((v = member(m, n, "DSAGENT_CLIENT_UID")) && strcmp(v->values[0], "301003") == 0);
        check(!member(m, n, "DSAGENT_CLIENT_CHARGED_UID"));
}

/* What audit_log_request() wrote to @fd (a file in place of stdout or stderr), read from its start. */
static char *logged(AuditSink sink, int target_fd, int fd, const AuditRecord *r, size_t *ret_size) {
        char *buf = malloc(65536);
        int saved, k;
        ssize_t n;

        if (!buf || ftruncate(fd, 0) < 0 || lseek(fd, 0, SEEK_SET) != 0) {
                free(buf);
                return NULL;
        }
        fflush(stdout);
        saved = dup(target_fd);
        if (saved < 0 || dup2(fd, target_fd) != target_fd) {
                free(buf);
                return NULL;
        }
        k = audit_log_request(sink, r);
        audit_sink_close(); /* as in log_json(): the next record reopens the file in place */
        (void)dup2(saved, target_fd);
        close(saved);
        n = pread(fd, buf, 65535, 0);
        if (k != 0 || n <= 0) {
                free(buf);
                return NULL;
        }
        buf[n] = '\0';
        *ret_size = (size_t)n;
        return buf;
}

/* The value of KEY="..." in a dsagent-audit: line, text_escape()'s text with '"' as \x22, unescaped. */
static bool stderr_value(const char *line, const char *key, char *out, size_t *ret_n) {
        char head[64];
        const char *at, *end;

        snprintf(head, sizeof(head), " %s=\"", key);
        at = strstr(line, head);
        if (!at)
                return false;
        at += strlen(head);
        end = strchr(at, '"');
        return end && text_unescape(at, (size_t)(end - at), out, ret_n);
}

static bool logged_is(const char *value, size_t value_n, const char *want) {
        return value_n == strlen(want) && memcmp(value, want, value_n) == 0;
}

/* Whatever bytes a target's executable, cgroup, unit and environment names hold: one line of each
 * sink, valid UTF-8 without controls, from which the bytes read back exactly. */
static void test_any_bytes_one_line_each_sink(void) {
        char path[] = "/tmp/test-audit-XXXXXX";
        Rng rng = { 26 };
        unsigned bad = 0;
        int fd = mkstemp(path);

        check(fd >= 0);
        if (fd < 0)
                return;
        unlink(path);
        for (unsigned i = 0; i < 2000 && bad < 5; i++) {
                char exe[200], cgroup[200], unit[100], reason[100], name[60], got[800];
                AuditEnvNames env = {};
                AuditRecord r = {
                        .request_id = i, .client_uid = 1001, .client_gid = 1001, .client_pid = 77, .command = "env",
                        .have_target = true, .target_pid = 4242, .target_uid = 1001, .target_unit = unit,
                        .target_exe = exe, .target_cgroup = cgroup, .decision = AUDIT_DECISION_ALLOWED,
                        .rule = "owner-access", .reason = reason, .env = &env,
                };
                size_t text_size = 0, json_size = 0, got_n = 0;
                char *text, *json;
                bool ok;

                random_text(&rng, exe, sizeof(exe), true);
                random_text(&rng, cgroup, sizeof(cgroup), true);
                random_text(&rng, unit, sizeof(unit), true);
                random_text(&rng, reason, sizeof(reason), true);
                for (unsigned k = 0; k < 3; k++) {
                        random_text(&rng, name, sizeof(name), true);
                        (void)audit_env_names_add(&env, name, k == 1);
                }
                text = logged(AUDIT_SINK_STDERR, STDERR_FILENO, fd, &r, &text_size);
                json = logged(AUDIT_SINK_JSON, STDOUT_FILENO, fd, &r, &json_size);
                ok = text && json && text_is_clean(text, text_size, "\n") && text_is_clean(json, json_size, "\n") &&
                     memchr(text, '\n', text_size) == text + text_size - 1 &&
                     memchr(json, '\n', json_size) == json + json_size - 1 && strncmp(text, "dsagent-audit: ", 15) == 0 &&
                     json_document_valid(json, json_size);
                ok = ok && stderr_value(text, "DSAGENT_TARGET_EXE", got, &got_n) && logged_is(got, got_n, exe) &&
                     stderr_value(text, "DSAGENT_TARGET_CGROUP", got, &got_n) && logged_is(got, got_n, cgroup) &&
                     stderr_value(text, "DSAGENT_TARGET_UNIT", got, &got_n) && logged_is(got, got_n, unit);
                /* the journal's values, the same escaped text, as JSON strings */
                ok = ok && json_member_string(json, json_size, "DSAGENT_TARGET_EXE", got, &got_n) &&
                     text_unescape(got, got_n, got, &got_n) && logged_is(got, got_n, exe) &&
                     json_member_string(json, json_size, "DSAGENT_TARGET_CGROUP", got, &got_n) &&
                     text_unescape(got, got_n, got, &got_n) && logged_is(got, got_n, cgroup);
                if (!ok && ++bad)
                        printf("# case %u: %s# %s", i, text ? text : "(null)\n", json ? json : "(null)\n");
                free(text);
                free(json);
                audit_env_names_done(&env);
        }
        close(fd);
        check(bad == 0);
}

int main(void) {
        run_test(test_json_format);
        run_test(test_json_format_repeated);
        run_test(test_json_sink);
        run_test(test_json_sink_unverified);
        run_test(test_charged_to_a_namespace);
        run_test(test_any_bytes_one_line_each_sink);
        return tap_finish();
}
