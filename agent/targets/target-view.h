/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Lookups in a target's view of the file system: below /proc/PID/root, in
 * its mount namespace, which its user may have shaped (a user namespace
 * lets anyone mount). Every lookup happens on a file system that the
 * target's mount table lists as local and kernel-served, so no lookup waits
 * for a FUSE or network server; a mount is crossed only where the table says
 * one is, so a mount placed after the table was read is refused; the last
 * component never crosses a mount; no symlink is followed anywhere.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/targets/mountinfo.h"

typedef struct Target Target;

enum {
        _TARGET_VIEW_E_SUCCESS,
        TARGET_VIEW_E_UNSAFE_FS,  /* the path lies on a user-space or network file system */
        TARGET_VIEW_E_MOUNT,      /* a mount the table did not announce, or on the last component */
        TARGET_VIEW_E_NOT_FOUND,  /* a component is missing, or is not a directory */
        TARGET_VIEW_E_SYMLINK,    /* a symbolic link is on the path */
        TARGET_VIEW_E_NO_ACCESS,  /* the kernel lets the agent not look there (a user namespace's FUSE, ...) */
        TARGET_VIEW_E_GONE,       /* the process exited */
};

/* The mount table of a big container host fits; a bigger one is refused, not cut. */
#define TARGET_VIEW_MOUNTINFO_MAX (16 * 1024 * 1024)

typedef struct CachedTable CachedTable;

typedef struct TargetView {
        int root_fd;            /* O_PATH: the target's root directory */
        uint64_t root_mount_id;
        const MountTable *mounts; /* the target's mountinfo, read through its pinned /proc fd */
        CachedTable *cache;     /* which holds the table: a reference, dropped by target_view_done() */
        bool paths_known;       /* false: a chroot; the table (its namespace's) is good for mount ids only */
} TargetView;

#define TARGET_VIEW_NULL { .root_fd = -EBADF }

/* A directory found in a view, and the mount it is on. */
typedef struct ViewDir {
        int fd;                 /* O_PATH|O_DIRECTORY unless asked otherwise */
        uint64_t mount_id;
} ViewDir;

#define VIEW_DIR_NULL { .fd = -EBADF }

/**
 * target_view_open() - the target's root and mount table
 *
 * Reads /proc/PID/mountinfo through the pinned /proc fd (reading it never
 * calls into a file system) and checks that the root itself is a safe mount.
 * A table this process read before is used again only while the kernel says
 * its namespace's mounts have not changed since (POLLPRI on mountinfo).
 *
 * Return: 0, TARGET_VIEW_E_UNSAFE_FS, TARGET_VIEW_E_MOUNT, TARGET_VIEW_E_NO_ACCESS,
 * TARGET_VIEW_E_GONE, or a negative errno. *@ret_why explains positive codes.
 */
int target_view_open(const Target *t, TargetView *ret, const char **ret_why);

void target_view_done(TargetView *v);

/**
 * target_view_open_dir() - a directory by its absolute @path in the view
 * @open_flags: O_PATH, or O_RDONLY for a directory the caller will change or list
 *
 * Before any lookup, every mount on @path's way must be of a safe type;
 * while walking, a mount is crossed only where the table has that very mount,
 * and the directory reached must be on the mount the table says @path is on.
 * ".." is refused.
 *
 * Return: 0, TARGET_VIEW_E_*, or a negative errno. *@ret_why is set for
 * TARGET_VIEW_E_UNSAFE_FS and TARGET_VIEW_E_MOUNT; the other codes say it all.
 */
int target_view_open_dir(const TargetView *v, const char *path, int open_flags, ViewDir *ret, const char **ret_why);

/**
 * target_view_open_entry() - one entry of a directory found in the view
 * @flags: open(2) flags; O_NOFOLLOW and O_CLOEXEC are added
 *
 * The entry must be on @dir's own mount: one mounted over it is refused.
 *
 * Return: 0 with an fd, TARGET_VIEW_E_MOUNT, TARGET_VIEW_E_NOT_FOUND,
 * TARGET_VIEW_E_SYMLINK, TARGET_VIEW_E_NO_ACCESS, or a negative errno.
 */
int target_view_open_entry(const ViewDir *dir, const char *name, int flags, int *ret_fd);

void view_dir_done(ViewDir *d);
