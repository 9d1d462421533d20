/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Reading policy files: only root-owned, unshared files; names resolved here, once */
#pragma once

#include <stdbool.h>

#include "policy/policy-compile.h"
#include "policy/policy.h"

/* where the build installs the example policy: /etc for prefix=/usr */
#define POLICY_DEFAULT_PATH DSAGENT_SYSCONFDIR "/dsagent/policy.toml"

enum {
        _POLICY_LOAD_E_SUCCESS,
        POLICY_LOAD_E_INVALID, /* the files are unsafe, unreadable as TOML, or break the schema */
};

int policy_load(const char *path, bool must_exist, Policy **ret, PolicyDiagnostics *diagnostics);

/**
 * policy_new_fallback() - the policy the agent serves under while its files are broken
 *
 * The engine's built-in rules without owner access: root may use what runs
 * no code in a target, and nobody else is granted anything. The broker
 * refuses everyone but root before any decision anyway; owner access is off
 * all the same, because the broken files may have meant to take it away.
 * The [agent] settings are the defaults.
 *
 * Return: a new reference, or NULL when out of memory.
 */
Policy *policy_new_fallback(void);

/**
 * policy_load_problem() - what is wrong with a policy that did not load, in one line
 * @r: what policy_load() returned, not 0
 * @d: the diagnostics it collected
 *
 * The first diagnostic, and how many more there are, for audit records and
 * the service's status; the journal's policy record lists them all.
 *
 * Return: a string to free, or NULL when out of memory.
 */
char *policy_load_problem(int r, const PolicyDiagnostics *d);
