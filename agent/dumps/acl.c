/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Exact POSIX ACLs set and checked through libacl on an fd (acl.h); dump staging, dump publishing
 * and ports call it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/acl.h>
#include <acl/libacl.h>

#include "agent/dumps/acl.h"
#include "common/cleanup.h"

static void acl_freep(acl_t *a) {
        if (*a)
                acl_free(*a);
}
#define _cleanup_acl_ _cleanup_(acl_freep)

static int add_entry(acl_t *acl, acl_tag_t tag, const void *qualifier, bool read, bool write, bool exec) {
        acl_entry_t e;
        acl_permset_t perms;

        if (acl_create_entry(acl, &e) < 0 || acl_set_tag_type(e, tag) < 0 ||
            (qualifier && acl_set_qualifier(e, qualifier) < 0) || acl_get_permset(e, &perms) < 0 ||
            acl_clear_perms(perms) < 0 || (read && acl_add_perm(perms, ACL_READ) < 0) ||
            (write && acl_add_perm(perms, ACL_WRITE) < 0) || (exec && acl_add_perm(perms, ACL_EXECUTE) < 0))
                return -errno;
        return 0;
}

/* The whole ACL, written out: nothing of an inherited one survives. */
static int build_exact(acl_t *ret, bool owner_write, const AclGrant *readers, bool named_write) {
        _cleanup_acl_ acl_t acl = acl_init((int)(4 + readers->n_users + readers->n_groups));
        bool named = readers->n_users + readers->n_groups > 0;
        int r;

        if (!acl)
                return -errno;
        r = add_entry(&acl, ACL_USER_OBJ, NULL, true, owner_write, false);
        for (size_t i = 0; r == 0 && i < readers->n_users; i++)
                r = add_entry(&acl, ACL_USER, &readers->users[i], true, named_write, false);
        for (size_t i = 0; r == 0 && i < readers->n_groups; i++)
                r = add_entry(&acl, ACL_GROUP, &readers->groups[i], true, named_write, false);
        if (r == 0)
                r = add_entry(&acl, ACL_GROUP_OBJ, NULL, false, false, false);
        /* the mask is written, not computed: it must be exactly the named entries', never the union */
        if (r == 0 && named)
                r = add_entry(&acl, ACL_MASK, NULL, true, named_write, false);
        if (r == 0)
                r = add_entry(&acl, ACL_OTHER, NULL, false, false, false);
        if (r < 0)
                return r;
        if (acl_valid(acl) < 0)
                return -errno;
        *ret = acl;
        acl = NULL;
        return 0;
}

/**
 * acl_set_exact_fd() - give @fd exactly: owner rw- (or r--), each reader r--,
 * group ---, mask r--, other ---
 *
 * The ACL is set whole and then read back and compared, because an inherited
 * default ACL, a chmod or a computed mask can each widen access silently.
 *
 * Return: 0, -EBADMSG when the read-back differs, or a negative errno.
 */
int acl_set_exact_fd(int fd, bool owner_write, const AclGrant *readers) {
        _cleanup_acl_ acl_t want = NULL, got = NULL;
        int r;

        r = build_exact(&want, owner_write, readers, false);
        if (r < 0)
                return r;
        if (acl_set_fd(fd, want) < 0)
                return -errno;
        got = acl_get_fd(fd);
        if (!got)
                return -errno;
        r = acl_cmp(want, got);
        if (r < 0)
                return -errno;
        return r == 0 ? 0 : -EBADMSG;
}

/**
 * acl_set_exact_user_fd() - give @fd exactly: owner @owner_perms, the one named
 * user @uid @user_perms, group ---, mask @user_perms, other ---
 * @owner_perms, @user_perms: ACL_READ, ACL_WRITE and ACL_EXECUTE bits
 *
 * For the staging directory (the target's user may only search it) and its
 * FIFO (it may only write). Read back and compared, as acl_set_exact_fd().
 *
 * Return: 0, -EBADMSG when the read-back differs, -EOPNOTSUPP when the file
 * system keeps no ACLs, or a negative errno.
 */
int acl_set_exact_user_fd(int fd, unsigned owner_perms, uid_t uid, unsigned user_perms) {
        _cleanup_acl_ acl_t want = acl_init(5), got = NULL;
        bool r_ = user_perms & ACL_READ, w_ = user_perms & ACL_WRITE, x_ = user_perms & ACL_EXECUTE;
        int r;

        if (!want)
                return -errno;
        r = add_entry(&want, ACL_USER_OBJ, NULL, owner_perms & ACL_READ, owner_perms & ACL_WRITE,
                      owner_perms & ACL_EXECUTE);
        if (r == 0)
                r = add_entry(&want, ACL_USER, &uid, r_, w_, x_);
        if (r == 0)
                r = add_entry(&want, ACL_GROUP_OBJ, NULL, false, false, false);
        if (r == 0)
                r = add_entry(&want, ACL_MASK, NULL, r_, w_, x_);
        if (r == 0)
                r = add_entry(&want, ACL_OTHER, NULL, false, false, false);
        if (r < 0)
                return r;
        if (acl_set_fd(fd, want) < 0)
                return errno == ENOTSUP ? -EOPNOTSUPP : -errno;
        got = acl_get_fd(fd);
        if (!got)
                return -errno;
        r = acl_cmp(want, got);
        if (r < 0)
                return -errno;
        return r == 0 ? 0 : -EBADMSG;
}

static bool entry_reads(acl_entry_t e) {
        acl_permset_t perms;
        return acl_get_permset(e, &perms) == 0 && acl_get_perm(perms, ACL_READ) == 1;
}

/**
 * acl_fd_allows_read() - would @uid with @groups be granted read by @fd's ACL
 *
 * The access check of acl(5) for a caller that owns neither the file nor is
 * in its owning group (dumps belong to root): named users, then named groups
 * (both limited by the mask), then other.
 *
 * Return: 0 with the answer, or a negative errno.
 */
int acl_fd_allows_read(int fd, uid_t uid, const gid_t *groups, size_t n_groups, bool *ret) {
        _cleanup_acl_ acl_t acl = acl_get_fd(fd);
        bool mask_reads = true, group_matched = false, group_reads = false, other_reads = false;
        acl_entry_t e;
        int k;

        if (!acl)
                return -errno;
        /* the mask limits named entries wherever it stands in the list */
        for (k = acl_get_entry(acl, ACL_FIRST_ENTRY, &e); k == 1; k = acl_get_entry(acl, ACL_NEXT_ENTRY, &e)) {
                acl_tag_t tag;
                if (acl_get_tag_type(e, &tag) == 0 && tag == ACL_MASK)
                        mask_reads = entry_reads(e);
        }

        for (k = acl_get_entry(acl, ACL_FIRST_ENTRY, &e); k == 1; k = acl_get_entry(acl, ACL_NEXT_ENTRY, &e)) {
                acl_tag_t tag;
                void *q;

                if (acl_get_tag_type(e, &tag) < 0)
                        return -errno;
                switch (tag) {
                case ACL_USER:
                        q = acl_get_qualifier(e);
                        if (q && *(uid_t *)q == uid) {
                                *ret = entry_reads(e) && mask_reads;
                                acl_free(q);
                                return 0;
                        }
                        acl_free(q);
                        break;
                case ACL_GROUP:
                        q = acl_get_qualifier(e);
                        for (size_t i = 0; q && i < n_groups; i++)
                                if (*(gid_t *)q == groups[i]) {
                                        group_matched = true;
                                        group_reads |= entry_reads(e);
                                }
                        acl_free(q);
                        break;
                case ACL_OTHER:
                        other_reads = entry_reads(e);
                        break;
                default:
                        break;
                }
        }
        if (k < 0)
                return -errno;
        *ret = group_matched ? group_reads && mask_reads : other_reads;
        return 0;
}

/**
 * acl_set_exact_path_rw() - give the file at @path exactly: owner rw-, each
 * named user and group of @grant rw-, group ---, mask rw-, other ---
 *
 * For a socket file (connecting needs write access), which no fd can reach.
 * @path must name a file in a directory only the agent may write (the
 * caller's "/proc/self/fd/DIR/NAME"): a path is looked up, an fd is not.
 * Read back and compared, as acl_set_exact_fd().
 *
 * Return: 0, -EBADMSG when the read-back differs, or a negative errno.
 */
int acl_set_exact_path_rw(const char *path, const AclGrant *grant) {
        _cleanup_acl_ acl_t want = NULL, got = NULL;
        int r;

        r = build_exact(&want, true, grant, true);
        if (r < 0)
                return r;
        if (acl_set_file(path, ACL_TYPE_ACCESS, want) < 0)
                return -errno;
        got = acl_get_file(path, ACL_TYPE_ACCESS);
        if (!got)
                return -errno;
        r = acl_cmp(want, got);
        if (r < 0)
                return -errno;
        return r == 0 ? 0 : -EBADMSG;
}
