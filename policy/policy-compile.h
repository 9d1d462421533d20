/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Policy compiler: parsed TOML documents to an immutable Policy. Pure: names are
 * resolved through callbacks, problems are collected as messages. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy/policy.h"
#include "policy/toml.h"

enum {
        _POLICY_E_SUCCESS,
        POLICY_E_INVALID, /* the documents break the schema; see the diagnostics */
};

typedef struct PolicySource {
        const char *path;       /* for messages only */
        const TomlValue *root;
        bool is_main;           /* [agent] settings belong to the main file only */
} PolicySource;

typedef struct PolicyResolver {
        /* Return: 0, or -ENOENT for an unknown name (or another negative errno). */
        int (*user)(const char *name, uid_t *ret, void *userdata);
        int (*group)(const char *name, gid_t *ret, void *userdata);
        void *userdata;
} PolicyResolver;

typedef struct PolicyDiagnostics {
        char **messages; /* "path:line:column: text" */
        size_t n;
} PolicyDiagnostics;

int policy_compile(const PolicySource *sources, size_t n_sources, const PolicyResolver *resolver,
                   Policy **ret, PolicyDiagnostics *diagnostics);
int policy_diagnostics_add(PolicyDiagnostics *d, const char *path, unsigned line, unsigned column,
                           const char *format, ...) __attribute__((format(printf, 5, 6)));
void policy_diagnostics_done(PolicyDiagnostics *d);

int policy_parse_duration(const char *s, uint64_t *ret_usec);
int policy_parse_rate(const char *s, PolicyRateLimit *ret);
int policy_parse_size(const char *s, PolicySize *ret);
