/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Reading an egress store's keys (egress-credentials.h): the egress process's alone. The policy loader only
 * looks at the file (agent/decide/policy-load.c), the agent opens it for the egress process (whose user could
 * not: egress-check.c), and here it is checked again on the fd it sent, and read and parsed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/egress/egress-credentials.h"
#include "common/cleanup.h"
#include "policy/toml.h"

/* printable ASCII without a space: what S3's keys and tokens are made of, and what a header line can carry */
static bool key_value_valid(const char *s, size_t size, size_t max) {
        if (size == 0 || size > max || strlen(s) != size)
                return false;
        for (size_t i = 0; i < size; i++)
                if (s[i] <= ' ' || s[i] > '~')
                        return false;
        return true;
}

static void wipe_free(char *s) {
        if (s) {
                explicit_bzero(s, strlen(s));
                free(s);
        }
}

void egress_credentials_done(EgressCredentials *c) {
        wipe_free(c->access_key_id);
        wipe_free(c->secret_access_key);
        wipe_free(c->session_token);
        *c = (EgressCredentials){};
}

int egress_credentials_parse(const char *text, size_t size, EgressCredentials *ret, char *why, size_t why_size) {
        static const struct { const char *key; size_t offset, max; bool required; } known[] = {
                { "access_key_id", offsetof(EgressCredentials, access_key_id), EGRESS_KEY_MAX, true },
                { "secret_access_key", offsetof(EgressCredentials, secret_access_key), EGRESS_KEY_MAX, true },
                { "session_token", offsetof(EgressCredentials, session_token), EGRESS_TOKEN_MAX, false },
        };
        EgressCredentials c = {};
        TomlValue *root = NULL;
        TomlError error = {};
        int r;

        r = toml_parse(text, size, &root, &error);
        if (r < 0)
                return r;
        if (r > 0) {
                /* the parser's words name a position and a kind of mistake, never the text at it */
                snprintf(why, why_size, "not TOML at line %u, column %u", error.line, error.column);
                return EGRESS_CREDENTIALS_E_INVALID;
        }
        r = 0;
        for (size_t i = 0; i < root->table.n_entries && r == 0; i++) {
                const TomlEntry *e = &root->table.entries[i];
                size_t j;

                for (j = 0; j < ELEMENTSOF(known); j++)
                        if (strcmp(e->key, known[j].key) == 0)
                                break;
                if (j == ELEMENTSOF(known)) {
                        /* by its place, not its name: a key pasted as a key name is a secret too */
                        snprintf(why, why_size, "an unknown key at line %u, column %u (access_key_id, "
                                 "secret_access_key, session_token)", e->line, e->column);
                        r = EGRESS_CREDENTIALS_E_INVALID;
                } else if (e->value->type != TOML_STRING ||
                           !key_value_valid(e->value->string.data, e->value->string.size, known[j].max)) {
                        snprintf(why, why_size, "'%s' must be a string of 1 to %zu printable ASCII characters "
                                 "without spaces", known[j].key, known[j].max);
                        r = EGRESS_CREDENTIALS_E_INVALID;
                } else if (!(*(char **)((char *)&c + known[j].offset) = strdup(e->value->string.data)))
                        r = -ENOMEM;
        }
        for (size_t j = 0; j < ELEMENTSOF(known) && r == 0; j++)
                if (known[j].required && !*(char **)((char *)&c + known[j].offset)) {
                        snprintf(why, why_size, "'%s' is missing", known[j].key);
                        r = EGRESS_CREDENTIALS_E_INVALID;
                }
        /* the parsed tree holds the secret too */
        for (size_t i = 0; i < root->table.n_entries; i++)
                if (root->table.entries[i].value->type == TOML_STRING)
                        explicit_bzero(root->table.entries[i].value->string.data,
                                       root->table.entries[i].value->string.size);
        toml_value_free(root);
        if (r != 0) {
                egress_credentials_done(&c);
                return r;
        }
        *ret = c;
        return 0;
}

int egress_credentials_read(int fd, const char *path, EgressCredentials *ret, char *why, size_t why_size) {
        char *text;
        size_t size = 0;
        struct stat st;
        int r;

        if (fstat(fd, &st) < 0) {
                r = -errno;
                snprintf(why, why_size, "%s cannot be looked at: %s", path, strerror(-r));
                return r;
        }
        /* what is checked is what is read: the file the agent opened, whatever the path names now */
        if (!S_ISREG(st.st_mode) || st.st_uid != 0 ||
            ((st.st_mode & 07777) != 0600 && (st.st_mode & 07777) != 0400)) {
                snprintf(why, why_size, "%s is not a regular file of root's with mode 0600 or 0400", path);
                return EGRESS_CREDENTIALS_E_UNSAFE;
        }
        text = malloc(EGRESS_CREDENTIALS_FILE_MAX + 1);
        if (!text)
                return -ENOMEM;
        for (;;) {
                ssize_t n = pread(fd, text + size, EGRESS_CREDENTIALS_FILE_MAX + 1 - size, (off_t)size);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = -errno;
                        snprintf(why, why_size, "%s cannot be read: %s", path, strerror(-r));
                        goto done;
                }
                if (n == 0)
                        break;
                size += (size_t)n;
                if (size > EGRESS_CREDENTIALS_FILE_MAX) {
                        snprintf(why, why_size, "%s is larger than %d bytes", path, EGRESS_CREDENTIALS_FILE_MAX);
                        r = EGRESS_CREDENTIALS_E_INVALID;
                        goto done;
                }
        }
        r = egress_credentials_parse(text, size, ret, why, why_size);
done:
        explicit_bzero(text, EGRESS_CREDENTIALS_FILE_MAX + 1);
        free(text);
        return r;
}
