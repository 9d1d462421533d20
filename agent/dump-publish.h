/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Publishing a finished dump into dump_dir: guarded, exactly ACL'd, atomic, without copying when it can */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "acl.h"
#include "policy.h"

enum {
        _DUMP_PUBLISH_E_SUCCESS,
        DUMP_PUBLISH_E_NO_SPACE,   /* the disk guards (max_use, keep_free) or the disk itself refuse it */
        DUMP_PUBLISH_E_DIRECTORY,  /* dump_dir is missing and cannot be made, or is not root's alone */
};

typedef struct DumpAttributes {
        uid_t requester;
        pid_t target_pid;
        uid_t target_uid;
        const char *target_unit;
        const char *target_exe;
        const char *dump_type;
        uint64_t request_id;
} DumpAttributes;

int dump_dir_open(const char *path, int *ret_fd, const char **ret_why);
int dump_guard_check(int dir_fd, const PolicyAgentSettings *a, uint64_t dump_bytes, uint64_t fs_bytes_needed,
                     const char **ret_why);
int dump_publish(int dir_fd, int src_fd, uint64_t size, const PolicyAgentSettings *a, const AclGrant *readers,
                 const DumpAttributes *attrs, const char *name, bool *ret_copied, const char **ret_why);
