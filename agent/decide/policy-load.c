/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Reading and compiling the policy files (policy-load.h): root's own files only, names resolved
 * here once; main.c and the broker's reload call it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "agent/dumps/dump-publish.h"
#include "agent/support/fileio.h"
#include "agent/decide/policy-load.h"
#include "policy/toml.h"

#define POLICY_FILES_MAX 256

typedef struct LoadedFile {
        char *path;
        TomlValue *root;
} LoadedFile;

typedef struct Loader {
        LoadedFile files[POLICY_FILES_MAX];
        size_t n_files;
        PolicyDiagnostics *diagnostics;
} Loader;

static void loader_done(Loader *l) {
        for (size_t i = 0; i < l->n_files; i++) {
                free(l->files[i].path);
                toml_value_free(l->files[i].root);
        }
        l->n_files = 0;
}

static int resolve_user(const char *name, uid_t *ret, void *userdata) {
        struct passwd pw, *result = NULL;
        char buf[4096];

        if (getpwnam_r(name, &pw, buf, sizeof(buf), &result) != 0 || !result)
                return -ENOENT;
        *ret = result->pw_uid;
        return 0;
}

static int resolve_group(const char *name, gid_t *ret, void *userdata) {
        struct group gr, *result = NULL;
        char buf[16384];

        if (getgrnam_r(name, &gr, buf, sizeof(buf), &result) != 0 || !result)
                return -ENOENT;
        *ret = result->gr_gid;
        return 0;
}

/*
 * Like sudo with sudoers: a policy file anyone but root could have written
 * is refused, whatever it says. Checked on the opened fd, so the file that
 * was checked is the file that is read.
 */
static const char *unsafe_file_reason(const struct stat *st, bool directory) {
        if (directory ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode))
                return directory ? "is not a directory" : "is not a regular file";
        if (st->st_uid != 0)
                return "is not owned by root";
        if (st->st_mode & (S_IWGRP | S_IWOTH))
                return "is writable by group or others";
        return NULL;
}

static int read_policy_fd(int fd, const char *path, Loader *l, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        struct stat st;
        const char *why;
        int r;

        if (fstat(fd, &st) < 0)
                return -errno;
        why = unsafe_file_reason(&st, false);
        if (why) {
                policy_diagnostics_add(l->diagnostics, path, 0, 0, "refusing the policy file: it %s", why);
                return POLICY_LOAD_E_INVALID;
        }

        r = read_fd_bounded(fd, TOML_INPUT_MAX + 1, &buf, &size);
        if (r < 0)
                return r;
        if (size > TOML_INPUT_MAX) {
                policy_diagnostics_add(l->diagnostics, path, 0, 0, "policy file is larger than %d bytes",
                                       TOML_INPUT_MAX);
                return POLICY_LOAD_E_INVALID;
        }
        *ret = TAKE_PTR(buf);
        *ret_size = size;
        return 0;
}

static int load_file_at(Loader *l, int dir_fd, const char *name, const char *path) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *text = NULL;
        TomlValue *root = NULL;
        TomlError error = {};
        size_t size = 0;
        int r;

        if (l->n_files >= POLICY_FILES_MAX) {
                policy_diagnostics_add(l->diagnostics, path, 0, 0, "more than %d policy files", POLICY_FILES_MAX);
                return POLICY_LOAD_E_INVALID;
        }
        fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        r = read_policy_fd(fd, path, l, &text, &size);
        if (r != 0)
                return r;

        r = toml_parse(text, size, &root, &error);
        if (r < 0)
                return r;
        if (r > 0) {
                policy_diagnostics_add(l->diagnostics, path, error.line, error.column, "%s", error.message);
                return POLICY_LOAD_E_INVALID;
        }
        l->files[l->n_files].path = strdup(path);
        l->files[l->n_files].root = root;
        l->n_files++;
        return l->files[l->n_files - 1].path ? 0 : -ENOMEM;
}

static int compare_names(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* policy.d next to the main file: *.toml in name order; a missing directory is fine. */
static int load_dropins(Loader *l, const char *dir_path) {
        _cleanup_close_ int dir_fd = -EBADF;
        char *names[POLICY_FILES_MAX];
        size_t n = 0;
        struct stat st;
        struct dirent *de;
        const char *why;
        DIR *d;
        int r = 0, k;

        dir_fd = open(dir_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dir_fd < 0)
                return errno == ENOENT ? 0 : -errno;
        if (fstat(dir_fd, &st) < 0)
                return -errno;
        why = unsafe_file_reason(&st, true);
        if (why) {
                policy_diagnostics_add(l->diagnostics, dir_path, 0, 0, "refusing the policy directory: it %s", why);
                return POLICY_LOAD_E_INVALID;
        }

        d = fdopendir(fcntl(dir_fd, F_DUPFD_CLOEXEC, 3));
        if (!d)
                return -errno;
        while ((de = readdir(d)) && n < POLICY_FILES_MAX) {
                size_t len = strlen(de->d_name);
                if (de->d_name[0] == '.' || len < 6 || strcmp(de->d_name + len - 5, ".toml") != 0)
                        continue;
                names[n] = strdup(de->d_name);
                if (!names[n]) {
                        r = -ENOMEM;
                        break;
                }
                n++;
        }
        closedir(d);
        qsort(names, n, sizeof(char *), compare_names);

        for (size_t i = 0; i < n; i++) {
                char path[PATH_MAX + NAME_MAX + 2];
                snprintf(path, sizeof(path), "%s/%s", dir_path, names[i]);
                if (r >= 0) {
                        k = load_file_at(l, dir_fd, names[i], path);
                        if (k < 0 || (k > 0 && r == 0))
                                r = k;
                }
                free(names[i]);
        }
        return r;
}

/*
 * Why the file @name in the directory @dir_path may not serve an egress target, or NULL when it may: a regular
 * file of root's, not a link, in a directory root alone may write and reached by a path only root could have laid
 * (root_dir_open()); @keys: it holds the store's keys, mode 0600 or 0400, else (the store's CA file, whom an
 * upload trusts) no group or other write bit. Looked at with fstat() on an O_PATH fd alone, which neither reads
 * the file nor opens it for reading: the keys are the egress process's to read, from the fd the agent opens at
 * each request, and never come into the agent's memory, its records or --check-policy's output.
 */
static const char *egress_file_problem(const char *dir_path, const char *name, bool keys, char *buf, size_t size) {
        _cleanup_close_ int dir_fd = -EBADF, fd = -EBADF;
        struct stat st;
        int r;

        r = root_dir_open(dir_path, &dir_fd);
        if (r == DUMP_PUBLISH_E_DIRECTORY)
                return "its directory, or one on the way to it, may be written by others than root, or is reached "
                       "through a link that is not root's";
        if (r < 0) {
                snprintf(buf, size, "its directory cannot be opened: %s", strerror(-r));
                return buf;
        }
        fd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                snprintf(buf, size, "it cannot be found: %s", strerror(errno));
                return buf;
        }
        if (fstat(fd, &st) < 0) {
                snprintf(buf, size, "it cannot be looked at: %s", strerror(errno));
                return buf;
        }
        if (S_ISLNK(st.st_mode))
                return "it is a symbolic link; name the file itself";
        if (!S_ISREG(st.st_mode))
                return "it is not a regular file";
        if (st.st_uid != 0)
                return "it is not owned by root";
        if (keys && (st.st_mode & 07777) != 0600 && (st.st_mode & 07777) != 0400) {
                snprintf(buf, size, "its mode is %04o; it must be 0600 or 0400 (root alone reads it)",
                         (unsigned)(st.st_mode & 07777));
                return buf;
        }
        if (!keys && (st.st_mode & 0022)) {
                snprintf(buf, size, "its mode is %04o; no one but root may write it", (unsigned)(st.st_mode & 07777));
                return buf;
        }
        return NULL;
}

/* @path's directory into @dir (of @size bytes, at least 2), its last name returned: @path is absolute (checked by
 * the compiler). */
static const char *split_path(const char *path, char *dir, size_t size) {
        snprintf(dir, size, "%s", path);
        *strrchr(dir, '/') = '\0';
        if (!dir[0])
                strcpy(dir, "/");
        return strrchr(path, '/') + 1;
}

/* Every [egress.NAME]'s ca_file, where one is given, safe to say whom uploads trust. Return: 0, or
 * POLICY_LOAD_E_INVALID. */
static int check_egress_ca_files(const Policy *p, PolicyDiagnostics *d) {
        int result = 0;

        for (size_t i = 0; i < p->n_egress; i++) {
                const PolicyEgress *e = &p->egress[i];
                char dir[PATH_MAX], buf[256];
                const char *name, *why;

                if (!e->ca_file)
                        continue;
                name = split_path(e->ca_file, dir, sizeof(dir));
                why = egress_file_problem(dir, name, false, buf, sizeof(buf));
                if (why) {
                        policy_diagnostics_add(d, e->file, e->ca_file_line, e->ca_file_column,
                                               "[egress.%s]: refusing the CA file %s: %s", e->name, e->ca_file, why);
                        result = POLICY_LOAD_E_INVALID;
                }
        }
        return result;
}

/* Every [egress.NAME]'s credentials where the policy says, safe to hold keys. Return: 0, or POLICY_LOAD_E_INVALID. */
static int check_egress_credentials(const Policy *p, PolicyDiagnostics *d) {
        const char *credentials_dir = getenv("CREDENTIALS_DIRECTORY");
        int result = 0;

        for (size_t i = 0; i < p->n_egress; i++) {
                const PolicyEgress *e = &p->egress[i];
                char dir[PATH_MAX], buf[256];
                const char *name, *why;

                if (e->credentials_kind == POLICY_EGRESS_CREDENTIALS_SYSTEMD) {
                        if (!credentials_dir || credentials_dir[0] != '/') {
                                policy_diagnostics_add(d, e->file, e->credentials_line, e->credentials_column,
                                                       "[egress.%s]: credentials \"systemd:%s\" needs the unit's "
                                                       "LoadCredential=%s:PATH, and the agent runs without "
                                                       "$CREDENTIALS_DIRECTORY",
                                                       e->name, e->credentials, e->credentials);
                                result = POLICY_LOAD_E_INVALID;
                                continue;
                        }
                        snprintf(dir, sizeof(dir), "%s", credentials_dir);
                        name = e->credentials;
                } else
                        name = split_path(e->credentials, dir, sizeof(dir));
                why = egress_file_problem(dir, name, true, buf, sizeof(buf));
                if (why) {
                        policy_diagnostics_add(d, e->file, e->credentials_line, e->credentials_column,
                                               "[egress.%s]: refusing the credentials file %s/%s: %s", e->name,
                                               strcmp(dir, "/") == 0 ? "" : dir, name, why);
                        result = POLICY_LOAD_E_INVALID;
                }
        }
        return result;
}

/**
 * policy_load() - read, check and compile the policy at @path and its policy.d
 * @must_exist: whether a missing @path is an error; otherwise the built-in
 *              policy (root, and each process's own user) applies
 *
 * Every problem of every file is collected in @diagnostics, so that
 * --check-policy can show them all at once. The credentials and the CA file
 * each [egress.NAME] names are looked at (owner, mode, directory), never read.
 *
 * Return: 0, POLICY_LOAD_E_INVALID, or a negative errno.
 */
int policy_load(const char *path, bool must_exist, Policy **ret, PolicyDiagnostics *diagnostics) {
        _cleanup_(loader_done) Loader l = { .diagnostics = diagnostics };
        PolicySource sources[POLICY_FILES_MAX];
        PolicyResolver resolver = { .user = resolve_user, .group = resolve_group };
        char dir[PATH_MAX], dropins[PATH_MAX];
        Policy *p = NULL;
        int r, k;

        r = load_file_at(&l, AT_FDCWD, path, path);
        if (r == -ENOENT && !must_exist) {
                p = policy_new_builtin();
                if (!p)
                        return -ENOMEM;
                *ret = p;
                return 0;
        }
        if (r < 0) {
                policy_diagnostics_add(diagnostics, path, 0, 0, "cannot read: %s", strerror(-r));
                return r == -ENOMEM ? r : POLICY_LOAD_E_INVALID;
        }

        snprintf(dir, sizeof(dir), "%s", path);
        snprintf(dropins, sizeof(dropins), "%s/policy.d", dirname(dir));
        k = load_dropins(&l, dropins);
        if (k < 0 && k != -ENOMEM)
                policy_diagnostics_add(diagnostics, dropins, 0, 0, "cannot read: %s", strerror(-k));
        if (k == -ENOMEM)
                return k;
        if (r != 0 || k != 0)
                return POLICY_LOAD_E_INVALID;

        for (size_t i = 0; i < l.n_files; i++)
                sources[i] = (PolicySource){ .path = l.files[i].path, .root = l.files[i].root, .is_main = i == 0 };
        r = policy_compile(sources, l.n_files, &resolver, &p, diagnostics);
        if (r > 0)
                return POLICY_LOAD_E_INVALID;
        if (r < 0)
                return r;
        /* both, so that one run reports every unsafe file */
        r = check_egress_credentials(p, diagnostics);
        k = check_egress_ca_files(p, diagnostics);
        if (r == 0)
                r = k;
        if (r != 0) {
                policy_unref(p);
                return r;
        }
        *ret = p;
        return 0;
}

Policy *policy_new_fallback(void) {
        Policy *p = policy_new_builtin();

        if (p)
                p->agent.owner_access = false;
        return p;
}

char *policy_load_problem(int r, const PolicyDiagnostics *d) {
        char *s = NULL;
        int n;

        if (d->n == 0)
                n = asprintf(&s, "the policy cannot be loaded: %s", strerror(r < 0 ? -r : EINVAL));
        else if (d->n == 1)
                n = asprintf(&s, "%s", d->messages[0]);
        else
                n = asprintf(&s, "%s (and %zu more error%s)", d->messages[0], d->n - 1, d->n == 2 ? "" : "s");
        return n < 0 ? NULL : s;
}
