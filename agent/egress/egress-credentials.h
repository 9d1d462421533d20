/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An egress store's keys, read by the egress process alone (egress-credentials.c): from a file of root's, mode
 * 0600 or 0400, which the agent opens for it, in TOML (policy/toml.c): access_key_id, secret_access_key, optional
 * session_token. No message ever holds a value of it; the memory is wiped when done.
 */
#pragma once

#include <stddef.h>

#define EGRESS_CREDENTIALS_FILE_MAX 16384 /* bytes of a credentials file */
#define EGRESS_KEY_MAX 256                /* bytes of an access key id or a secret */
#define EGRESS_TOKEN_MAX 8192             /* bytes of a session token */

typedef struct EgressCredentials {
        char *access_key_id;
        char *secret_access_key;
        char *session_token; /* NULL: none */
} EgressCredentials;

enum {
        _EGRESS_CREDENTIALS_E_SUCCESS,
        EGRESS_CREDENTIALS_E_INVALID, /* not TOML, a key missing or unknown, a value not printable ASCII */
        EGRESS_CREDENTIALS_E_UNSAFE,  /* not a regular file of root's, mode 0600 or 0400 */
};

/**
 * egress_credentials_parse() - the keys in @text (@size bytes)
 *
 * Pure. Return: 0 with *@ret filled (egress_credentials_done() frees it), EGRESS_CREDENTIALS_E_INVALID with
 * why in @why (never a value of the file), or -ENOMEM.
 */
int egress_credentials_parse(const char *text, size_t size, EgressCredentials *ret, char *why, size_t why_size);

/**
 * egress_credentials_read() - the keys in the file open on @fd (the agent opened @path, named in messages)
 *
 * The agent opened it without following a link (egress_request_send()); it is checked here on the fd (what is
 * checked is what is read): a regular file of root's, mode 0600 or 0400, at most EGRESS_CREDENTIALS_FILE_MAX
 * bytes, read from its start (pread: the offset is not moved). The text read is wiped. @fd stays the caller's.
 *
 * Return: 0, EGRESS_CREDENTIALS_E_UNSAFE or _E_INVALID with why in @why, or a negative errno (with @why too).
 */
int egress_credentials_read(int fd, const char *path, EgressCredentials *ret, char *why, size_t why_size);

/* Wipes and frees what *@c holds. */
void egress_credentials_done(EgressCredentials *c);
