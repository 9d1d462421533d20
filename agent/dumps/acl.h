/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Exact POSIX ACLs on file descriptors: set whole, read back, never merged with what was inherited */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/acl.h>
#include <sys/types.h>

typedef struct AclGrant {
        const uid_t *users;  /* named users with read access */
        size_t n_users;
        const gid_t *groups; /* named groups with read access */
        size_t n_groups;
} AclGrant;

int acl_set_exact_fd(int fd, bool owner_write, const AclGrant *readers);
int acl_set_exact_user_fd(int fd, unsigned owner_perms, uid_t uid, unsigned user_perms);
int acl_set_exact_path_rw(const char *path, const AclGrant *grant);
int acl_fd_allows_read(int fd, uid_t uid, const gid_t *groups, size_t n_groups, bool *ret);
