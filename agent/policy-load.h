/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Reading policy files: only root-owned, unshared files; names resolved here, once */
#pragma once

#include <stdbool.h>

#include "policy-compile.h"
#include "policy.h"

/* where the build installs the example policy: /etc for prefix=/usr */
#define POLICY_DEFAULT_PATH DSAGENT_SYSCONFDIR "/dsagent/policy.toml"

enum {
        _POLICY_LOAD_E_SUCCESS,
        POLICY_LOAD_E_INVALID, /* the files are unsafe, unreadable as TOML, or break the schema */
};

int policy_load(const char *path, bool must_exist, Policy **ret, PolicyDiagnostics *diagnostics);
