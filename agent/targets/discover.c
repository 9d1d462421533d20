/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Finding the processes that may have a .NET runtime, from the Unix sockets each network namespace
 * lists (discover.h); runs in a worker for ps's walks.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "agent/targets/discover.h"
#include "agent/support/fileio.h"
#include "agent/targets/procfs.h"
#include "common/text.h"

/* A network namespace's table of a big container host is a few MB. */
#define UNIX_TABLE_MAX (32 * 1024 * 1024)
#define NAMES_MAX 65536
#define PROC_SMALL_MAX (64 * 1024)
/* About 0.2-0.7 ms of a walk (3-10 us a process) between two chances for others to run. */
#define DISCOVER_YIELD_EVERY 64

typedef struct Seen {
        pid_t pid;
        uint64_t netns;
        uid_t owner;            /* (uid_t) -1: not looked at (any owner passes the filter) */
        bool candidate;
} Seen;

bool discover_filter_allows(const DiscoverFilter *f, uid_t uid) {
        if (f->any_uid || uid == 0)
                return true;
        for (size_t i = 0; i < f->n_uids; i++)
                if (f->uids[i] == uid)
                        return true;
        return false;
}

/* The inode of /proc/PID/ns/KIND ("net": which socket table the process is in; "pid": how it names itself). */
static int namespace_of(int proc_fd, const char *pid, const char *kind, uint64_t *ret) {
        char path[64], link[64];
        size_t prefix = strlen(kind);
        uint64_t v;
        ssize_t n;

        snprintf(path, sizeof(path), "%s/ns/%s", pid, kind);
        n = readlinkat(proc_fd, path, link, sizeof(link) - 1);
        if (n < 0)
                return -errno;
        link[n] = '\0';
        /* "net:[4026531840]" */
        if ((size_t)n < prefix + 3 || strncmp(link, kind, prefix) != 0 || link[prefix] != ':' ||
            link[prefix + 1] != '[' || link[n - 1] != ']')
                return -EBADMSG;
        link[n - 1] = '\0';
        if (parse_u64(link + prefix + 2, &v) < 0)
                return -EBADMSG;
        *ret = v;
        return 0;
}

/*
 * A walk is background work, and the kernel does not always interrupt it for a task that wakes
 * up (one that has had its share of the CPU waits for the next tick, 4 ms at HZ=250): every
 * DISCOVER_YIELD_EVERY steps of a pass, whoever waits for this CPU runs first.
 */
static void pace(size_t step) {
        if (step % DISCOVER_YIELD_EVERY == DISCOVER_YIELD_EVERY - 1)
                (void)sched_yield();
}

static int compare_seen(const void *a, const void *b) {
        const Seen *x = a, *y = b;
        if (x->netns != y->netns)
                return x->netns < y->netns ? -1 : 1;
        return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static int compare_candidate(const void *a, const void *b) {
        pid_t x = ((const DiscoverCandidate *)a)->pid, y = ((const DiscoverCandidate *)b)->pid;
        return x < y ? -1 : x > y;
}

/* Every process of /proc that passes @f, with its network namespace. */
static int list_processes(int proc_fd, const DiscoverFilter *f, Seen **ret, size_t *ret_n) {
        _cleanup_free_ Seen *seen = NULL;
        size_t n = 0, allocated = 0;
        struct dirent *de;
        DIR *d;
        int dup_fd = fcntl(proc_fd, F_DUPFD_CLOEXEC, 3);

        if (dup_fd < 0 || !(d = fdopendir(dup_fd))) {
                safe_close(dup_fd);
                return -errno;
        }
        for (size_t entries = 0; (de = readdir(d)); entries++) {
                struct stat st = { .st_uid = (uid_t)-1 };
                uint64_t netns;
                pid_t pid;

                pace(entries);
                if (parse_pid(de->d_name, &pid) < 0)
                        continue;
                /* one cheap look at who owns it, before anything else is read */
                if (!f->any_uid && (fstatat(proc_fd, de->d_name, &st, 0) < 0 || !discover_filter_allows(f, st.st_uid)))
                        continue;
                /* its pid namespace is not read here: most processes are in the agent's, and mark_group()
                 * asks only when a name is left that no process claimed by its pid (a walk of /proc
                 * pays per process for each link it reads, and this one is half of it) */
                if (namespace_of(proc_fd, de->d_name, "net", &netns) < 0)
                        continue;
                if (n == allocated) {
                        size_t grown = allocated ? allocated * 2 : 1024;
                        Seen *s = realloc(seen, grown * sizeof(*s));
                        if (!s) {
                                closedir(d);
                                return -ENOMEM;
                        }
                        seen = s;
                        allocated = grown;
                }
                seen[n++] = (Seen){ .pid = pid, .netns = netns, .owner = st.st_uid };
        }
        closedir(d);
        *ret = TAKE_PTR(seen);
        *ret_n = n;
        return 0;
}

static int compare_name_pid(const void *a, const void *b) {
        pid_t x = ((const ProcDiagnosticName *)a)->pid, y = ((const ProcDiagnosticName *)b)->pid;
        return x < y ? -1 : x > y;
}

/* The first of @names (sorted by pid) for @pid; @n_names if none. */
static size_t names_lower_bound(const ProcDiagnosticName *names, size_t n_names, pid_t pid) {
        size_t lo = 0, hi = n_names;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (names[mid].pid < pid)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

/* The index in @names (sorted by pid) of the name of @pid's runtime (its own pid, the last NSpid, and its start time), or -1. */
static ssize_t name_of(int proc_fd, pid_t pid, const ProcDiagnosticName *names, size_t n_names) {
        _cleanup_free_ char *stat = NULL, *status = NULL;
        char path[64];
        size_t size;
        uint64_t start;
        ProcStatus st;

        snprintf(path, sizeof(path), "%d/stat", (int)pid);
        if (read_file_at(proc_fd, path, PROC_SMALL_MAX, &stat, &size) < 0 ||
            procfs_parse_stat_start_time(stat, size, &start) != 0)
                return -1;
        snprintf(path, sizeof(path), "%d/status", (int)pid);
        if (read_file_at(proc_fd, path, PROC_SMALL_MAX, &status, &size) < 0 || procfs_parse_status(status, size, &st) != 0)
                return -1;
        for (size_t i = names_lower_bound(names, n_names, st.nspid[st.n_nspid - 1]);
             i < n_names && names[i].pid == st.nspid[st.n_nspid - 1]; i++)
                if (names[i].key == start)
                        return (ssize_t)i;
        return -1;
}

/* Marks @seen a candidate if its runtime's name is in @names; and that name as claimed. */
static void claim(int proc_fd, Seen *seen, const ProcDiagnosticName *names, size_t n_names, bool *claimed) {
        ssize_t k = name_of(proc_fd, seen->pid, names, n_names);

        if (k >= 0) {
                seen->candidate = true;
                claimed[k] = true;
        }
}

/*
 * Within one network namespace (@group, @n of them): which are named in its socket table.
 * A runtime in the agent's pid namespace names itself by the pid /proc lists it under, so
 * only processes whose pid is in a name are read. A name left that none of those claimed
 * may be a runtime's in another pid namespace (its own pid is another number): then every
 * process of the group in another pid namespace is read too.
 */
static void mark_group(int proc_fd, uint64_t own_pidns, Seen *group, size_t n, ProcDiagnosticName *names, bool *claimed) {
        _cleanup_free_ char *table = NULL;
        char path[64];
        size_t size, n_names = 0, n_claimed = 0;

        snprintf(path, sizeof(path), "%d/net/unix", (int)group[0].pid);
        if (read_file_at(proc_fd, path, UNIX_TABLE_MAX, &table, &size) < 0 ||
            procfs_unix_diagnostic_listeners(table, size, names, NAMES_MAX, &n_names) != 0 || n_names == 0)
                return;
        if (n_names > NAMES_MAX)
                n_names = NAMES_MAX;
        qsort(names, n_names, sizeof(*names), compare_name_pid);
        memset(claimed, 0, n_names * sizeof(*claimed));
        for (size_t i = 0; i < n; i++) {
                size_t k = names_lower_bound(names, n_names, group[i].pid);
                pace(i);
                if (k < n_names && names[k].pid == group[i].pid)
                        claim(proc_fd, &group[i], names, n_names, claimed);
        }
        for (size_t k = 0; k < n_names; k++)
                n_claimed += claimed[k];
        if (n_claimed == n_names)
                return;
        for (size_t i = 0; i < n; i++) {
                char pid[16];
                uint64_t pidns;

                pace(i);
                snprintf(pid, sizeof(pid), "%d", (int)group[i].pid);
                if (!group[i].candidate && namespace_of(proc_fd, pid, "pid", &pidns) == 0 && pidns != own_pidns)
                        claim(proc_fd, &group[i], names, n_names, claimed);
        }
}

/* The owner of a candidate's /proc entry, when the walk did not look (few are candidates); false: it is gone. */
static bool owner_known(int proc_fd, Seen *s) {
        char pid[16];
        struct stat st;

        if (s->owner != (uid_t)-1)
                return true;
        snprintf(pid, sizeof(pid), "%d", (int)s->pid);
        if (fstatat(proc_fd, pid, &st, 0) < 0)
                return false;
        s->owner = st.st_uid;
        return true;
}

static int compare_owner(const void *a, const void *b) {
        const DiscoverCandidate *x = a, *y = b;
        if (x->owner != y->owner)
                return x->owner < y->owner ? -1 : 1;
        return x->pid < y->pid ? -1 : x->pid > y->pid;
}

ssize_t discover_take_fairly(DiscoverCandidate *candidates, size_t n, DiscoverCandidate *out, size_t max) {
        _cleanup_free_ size_t *starts = NULL, *ends = NULL;
        size_t n_owners = 0, taken = 0;

        if (n <= max) {
                if (n > 0)
                        memcpy(out, candidates, n * sizeof(*out));
                return (ssize_t)n;
        }
        qsort(candidates, n, sizeof(*candidates), compare_owner);
        starts = malloc(n * sizeof(*starts));
        ends = malloc(n * sizeof(*ends));
        if (!starts || !ends)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (i == 0 || candidates[i].owner != candidates[i - 1].owner) {
                        if (n_owners > 0)
                                ends[n_owners - 1] = i;
                        starts[n_owners++] = i;
                }
        ends[n_owners - 1] = n;
        /* n > max: the rounds end with @out full; an owner with none left drops out of them */
        for (size_t active = n_owners; taken < max;) {
                size_t kept = 0;
                for (size_t k = 0; k < active && taken < max; k++) {
                        out[taken++] = candidates[starts[k]++];
                        if (starts[k] < ends[k]) {
                                starts[kept] = starts[k];
                                ends[kept++] = ends[k];
                        }
                }
                active = kept;
        }
        return (ssize_t)taken;
}

int discover_candidates(const DiscoverFilter *f, DiscoverCandidate *out, size_t max, size_t *ret_n) {
        _cleanup_free_ ProcDiagnosticName *names = NULL;
        _cleanup_free_ bool *claimed = NULL;
        _cleanup_free_ Seen *seen = NULL;
        _cleanup_free_ DiscoverCandidate *packed = NULL;
        _cleanup_close_ int proc_fd = -EBADF;
        size_t n = 0, found = 0;
        uint64_t own_pidns;
        ssize_t taken;
        int r;

        proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (proc_fd < 0)
                return -errno;
        r = namespace_of(proc_fd, "self", "pid", &own_pidns);
        if (r < 0)
                return r;
        names = malloc(NAMES_MAX * sizeof(*names));
        claimed = malloc(NAMES_MAX * sizeof(*claimed));
        if (!names || !claimed)
                return -ENOMEM;
        r = list_processes(proc_fd, f, &seen, &n);
        if (r < 0)
                return r;
        qsort(seen, n, sizeof(*seen), compare_seen);
        for (size_t start = 0; start < n;) {
                size_t end = start;
                while (end < n && seen[end].netns == seen[start].netns)
                        end++;
                mark_group(proc_fd, own_pidns, seen + start, end - start, names, claimed);
                start = end;
        }
        packed = malloc((n ? n : 1) * sizeof(*packed));
        if (!packed)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (seen[i].candidate && owner_known(proc_fd, &seen[i]))
                        packed[found++] = (DiscoverCandidate){ .pid = seen[i].pid, .owner = seen[i].owner };
        taken = discover_take_fairly(packed, found, out, max);
        if (taken < 0)
                return (int)taken;
        qsort(out, (size_t)taken, sizeof(*out), compare_candidate);
        *ret_n = (size_t)taken;
        return 0;
}
