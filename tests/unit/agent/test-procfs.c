/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* /proc parsers against real and hostile contents */
#include <fcntl.h>
#include <string.h>
#include <stdio.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/support/fileio.h"
#include "agent/targets/procfs.h"
#include "tests/unit/tap.h"

static void test_stat_start_time(void) {
        /* the process picked its own comm: spaces and ')' inside it must not shift the fields */
        static const char hostile[] = "4242 (a) b) 1 2 3) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 "
                                      "9 0 987654 12345678 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 "
                                      "1 0 0 0 0 0\n";
        uint64_t v = 0;

        check(procfs_parse_stat_start_time(hostile, strlen(hostile), &v) == 0 && v == 987654);
        check(procfs_parse_stat_start_time("1 (x) S 1", 9, &v) == PROCFS_E_MALFORMED);
        check(procfs_parse_stat_start_time("no paren", 8, &v) == PROCFS_E_MALFORMED);
        /* an empty field would shift the count: refused, not misread */
        check(procfs_parse_stat_start_time("1 (x)  S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20", 59, &v) ==
              PROCFS_E_MALFORMED);
}

static void test_stat_self(void) {
        char *buf = NULL;
        size_t n;
        uint64_t v = 0;

        check(read_file_at(AT_FDCWD, "/proc/self/stat", 4096, &buf, &n) == 0);
        check(procfs_parse_stat_start_time(buf, n, &v) == 0 && v > 0);
        free(buf);
}

static void test_status(void) {
        static const char status[] = "Name:\tdotnet\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\n"
                                     "Uid:\t1001\t1002\t1003\t1004\nGid:\t2001\t2002\t2003\t2004\n"
                                     "NSpid:\t4242\t17\t1\n";
        ProcStatus st;

        check(procfs_parse_status(status, strlen(status), &st) == 0);
        check(st.uid[0] == 1001 && st.uid[1] == 1002 && st.uid[2] == 1003 && st.uid[3] == 1004);
        check(st.gid[0] == 2001 && st.gid[3] == 2004);
        check(st.n_nspid == 3 && st.nspid[0] == 4242 && st.nspid[2] == 1);
}

static void test_status_rejects(void) {
        ProcStatus st;
        static const char no_nspid[] = "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\n";
        static const char short_uid[] = "Uid:\t1\t1\t1\nGid:\t1\t1\t1\t1\nNSpid:\t5\n";
        static const char twice[] = "Uid:\t1\t1\t1\t1\nUid:\t0\t0\t0\t0\nGid:\t1\t1\t1\t1\nNSpid:\t5\n";
        static const char garbage[] = "Uid:\t1\t1x\t1\t1\nGid:\t1\t1\t1\t1\nNSpid:\t5\n";
        static const char huge[] = "Uid:\t1\t1\t1\t99999999999\nGid:\t1\t1\t1\t1\nNSpid:\t5\n";
        static const char invalid_id[] = "Uid:\t1\t4294967295\t1\t1\nGid:\t1\t1\t1\t1\nNSpid:\t5\n";

        check(procfs_parse_status(no_nspid, strlen(no_nspid), &st) == PROCFS_E_MALFORMED);
        check(procfs_parse_status(short_uid, strlen(short_uid), &st) == PROCFS_E_MALFORMED);
        check(procfs_parse_status(twice, strlen(twice), &st) == PROCFS_E_MALFORMED);
        check(procfs_parse_status(garbage, strlen(garbage), &st) == PROCFS_E_MALFORMED);
        check(procfs_parse_status(huge, strlen(huge), &st) == PROCFS_E_MALFORMED);
        check(procfs_parse_status(invalid_id, strlen(invalid_id), &st) == PROCFS_E_MALFORMED);
}

/* The Groups line, and what compares credentials: every id and group, nothing else. */
static void test_status_credentials(void) {
        static const char base[] = "Uid:\t987\t987\t987\t987\nGid:\t987\t987\t987\t987\n"
                                   "Groups:\t4 24 987 \nNSpid:\t4242\n";
        static const char saved_root[] = "Uid:\t987\t987\t0\t987\nGid:\t987\t987\t987\t987\n"
                                         "Groups:\t4 24 987 \nNSpid:\t4242\n";
        static const char fs_root[] = "Uid:\t987\t987\t987\t0\nGid:\t987\t987\t987\t987\n"
                                      "Groups:\t4 24 987 \nNSpid:\t4242\n";
        static const char saved_gid[] = "Uid:\t987\t987\t987\t987\nGid:\t987\t987\t0\t987\n"
                                        "Groups:\t4 24 987 \nNSpid:\t4242\n";
        static const char group_added[] = "Uid:\t987\t987\t987\t987\nGid:\t987\t987\t987\t987\n"
                                          "Groups:\t0 4 24 987 \nNSpid:\t4242\n";
        static const char group_swapped[] = "Uid:\t987\t987\t987\t987\nGid:\t987\t987\t987\t987\n"
                                            "Groups:\t4 27 987 \nNSpid:\t4242\n";
        static const char no_groups[] = "Uid:\t987\t987\t987\t987\nGid:\t987\t987\t987\t987\n"
                                        "Groups:\t\nNSpid:\t4242\n";
        static const char other_pid[] = "Uid:\t987\t987\t987\t987\nGid:\t987\t987\t987\t987\n"
                                        "Groups:\t4 24 987 \nNSpid:\t4343\t1\n";
        static const char no_line[] = "Uid:\t987\t987\t987\t987\nGid:\t987\t987\t987\t987\nNSpid:\t4242\n";
        static const char *const changed[] = { saved_root, fs_root, saved_gid, group_added, group_swapped, no_groups };
        static const char *const malformed[] = {
                "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\t1 x\nNSpid:\t5\n",
                "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\t1\nGroups:\t1\nNSpid:\t5\n",
                "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\t4294967295\nNSpid:\t5\n",
        };
        ProcStatus a, b;

        check(procfs_parse_status(base, strlen(base), &a) == 0);
        check(a.groups_known && a.n_groups == 3 && a.groups[0] == 4 && a.groups[2] == 987);
        check(!procfs_ids_changed(&a) && procfs_same_credentials(&a, &a));
        check(procfs_parse_status(other_pid, strlen(other_pid), &b) == 0 && procfs_same_credentials(&a, &b));
        for (size_t i = 0; i < sizeof(changed) / sizeof(changed[0]); i++) {
                check(procfs_parse_status(changed[i], strlen(changed[i]), &b) == 0);
                check(!procfs_same_credentials(&a, &b) && !procfs_same_credentials(&b, &a));
                check(procfs_ids_changed(&b) == (i < 3));
        }
        check(procfs_parse_status(no_groups, strlen(no_groups), &b) == 0 && b.groups_known && b.n_groups == 0);
        /* a reading without the line is not known to be the same as anything, itself included */
        check(procfs_parse_status(no_line, strlen(no_line), &b) == 0 && !b.groups_known);
        check(!procfs_same_credentials(&b, &b));
        for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++)
                check(procfs_parse_status(malformed[i], strlen(malformed[i]), &b) == PROCFS_E_MALFORMED);
}

/* More groups than kept: counted, the first PROCFS_GROUPS_MAX kept, and never taken as the same. */
static void test_status_many_groups(void) {
        char buf[16384];
        size_t n = (size_t)snprintf(buf, sizeof(buf), "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\t");
        ProcStatus st;

        for (unsigned g = 1; g <= PROCFS_GROUPS_MAX + 1; g++)
                n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%u ", g);
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\nNSpid:\t5\n");
        check(procfs_parse_status(buf, n, &st) == 0);
        check(st.n_groups == PROCFS_GROUPS_MAX + 1 && st.groups[PROCFS_GROUPS_MAX - 1] == PROCFS_GROUPS_MAX);
        check(!procfs_same_credentials(&st, &st));
}

static void test_status_self(void) {
        char *buf = NULL;
        size_t n;
        ProcStatus st;

        check(read_file_at(AT_FDCWD, "/proc/self/status", 65536, &buf, &n) == 0);
        check(procfs_parse_status(buf, n, &st) == 0);
        check(st.uid[1] == geteuid() && st.nspid[0] == getpid() && st.groups_known);
        free(buf);
}

static void test_environ(void) {
        static const char env[] = "PATH=/bin\0TMPDIRX=/nope\0TMPDIR=/run/app\0TMPDIR=/second\0EMPTY=";
        char *v = NULL;

        check(procfs_environ_get(env, sizeof(env) - 1, "TMPDIR", &v) == 0);
        check(v && strcmp(v, "/run/app") == 0);
        free(v);
        v = NULL;
        check(procfs_environ_get(env, sizeof(env) - 1, "EMPTY", &v) == 0 && v && *v == '\0');
        free(v);
        check(procfs_environ_get(env, sizeof(env) - 1, "HOME", &v) == PROCFS_E_NOT_FOUND);
        check(procfs_environ_get("", 0, "TMPDIR", &v) == PROCFS_E_NOT_FOUND);
}

static int startup_suspend_of(const char *entries) {
        char block[512];
        size_t n = strlen(entries);

        /* entries separated by '|' stand for the NULs of an environment block */
        memcpy(block, entries, n);
        for (size_t i = 0; i < n; i++)
                if (block[i] == '|')
                        block[i] = '\0';
        return procfs_environ_startup_suspend(block, n);
}

static void test_environ_startup_suspend(void) {
        check(startup_suspend_of("PATH=/bin") == 0);
        check(startup_suspend_of("DOTNET_DefaultDiagnosticPortSuspend=1") == PROCFS_SUSPEND_DEFAULT_PORT);
        /* hexadecimal, as CLRConfig reads it; what does not parse is the default */
        check(startup_suspend_of("DOTNET_DefaultDiagnosticPortSuspend=a") == PROCFS_SUSPEND_DEFAULT_PORT);
        check(startup_suspend_of("DOTNET_DefaultDiagnosticPortSuspend=0") == 0);
        check(startup_suspend_of("DOTNET_DefaultDiagnosticPortSuspend=00") == 0);
        check(startup_suspend_of("DOTNET_DefaultDiagnosticPortSuspend=yes") == 0);
        check(startup_suspend_of("DOTNET_DefaultDiagnosticPortSuspend=") == 0);
        check(startup_suspend_of("DOTNET_DefaultDiagnosticPortSuspend=100000000") == 0); /* a DWORD: cut to 0 */
        /* COMPlus_ only stands in for a DOTNET_ name that is not set */
        check(startup_suspend_of("COMPlus_DefaultDiagnosticPortSuspend=1") == PROCFS_SUSPEND_DEFAULT_PORT);
        check(startup_suspend_of("DOTNET_DefaultDiagnosticPortSuspend=0|COMPlus_DefaultDiagnosticPortSuspend=1") == 0);
        check(startup_suspend_of("XDOTNET_DefaultDiagnosticPortSuspend=1") == 0);

        /* a connect port suspends unless told not to; the first tag of a kind wins */
        check(startup_suspend_of("DOTNET_DiagnosticPorts=/run/p.sock") == PROCFS_SUSPEND_PORTS);
        check(startup_suspend_of("DOTNET_DiagnosticPorts=/run/p.sock,connect") == PROCFS_SUSPEND_PORTS);
        check(startup_suspend_of("DOTNET_DiagnosticPorts=/run/p.sock,nosuspend") == 0);
        check(startup_suspend_of("DOTNET_DiagnosticPorts=/run/p.sock,NoSuspend,suspend") == 0);
        check(startup_suspend_of("DOTNET_DiagnosticPorts=/run/p.sock,suspend,nosuspend") == PROCFS_SUSPEND_PORTS);
        check(startup_suspend_of("DOTNET_DiagnosticPorts=/run/p.sock,listen,suspend") == 0); /* CoreCLR ignores it */
        check(startup_suspend_of("DOTNET_DiagnosticPorts=/run/a,nosuspend;/run/b") == PROCFS_SUSPEND_PORTS);
        check(startup_suspend_of("DOTNET_DiagnosticPorts=/run/a;/run/b,nosuspend") == PROCFS_SUSPEND_PORTS);
        check(startup_suspend_of("DOTNET_DiagnosticPorts=/run/a,nosuspend;/run/b,nosuspend;") == 0);
        check(startup_suspend_of("DOTNET_DiagnosticPorts=,suspend;;") == 0); /* no address: ignored */
        check(startup_suspend_of("DOTNET_DiagnosticPorts=") == 0);
        check(startup_suspend_of("DOTNET_DiagnosticPorts=/run/a,|DOTNET_DefaultDiagnosticPortSuspend=1") ==
              (PROCFS_SUSPEND_PORTS | PROCFS_SUSPEND_DEFAULT_PORT));
}

static void name_is(const char *cmdline, size_t n, const char *expected) {
        char *name = NULL;
        int r = procfs_cmdline_name(cmdline, n, &name);

        if (!expected) {
                check(r == PROCFS_E_NOT_FOUND);
                return;
        }
        check(r == 0 && name && strcmp(name, expected) == 0);
        free(name);
}

static void test_cmdline_name(void) {
        static const char dll[] = "/usr/share/dotnet/dotnet\0/srv/orders/Orders.Api.dll\0--urls\0x\0";
        static const char apphost[] = "/srv/orders/Orders.Api\0--flag\0";
        static const char dotnet_run[] = "dotnet\0run\0";

        name_is(dll, sizeof(dll) - 1, "Orders.Api");
        name_is(apphost, sizeof(apphost) - 1, "Orders.Api");
        name_is(dotnet_run, sizeof(dotnet_run) - 1, "dotnet");
        name_is("", 0, NULL);
        name_is("/trailing/\0", 11, NULL);
}

static void unit_is(const char *cgroup, const char *expected) {
        char *unit = NULL;
        int r = procfs_cgroup_unit(cgroup, strlen(cgroup), &unit);

        if (!expected)
                check(r == PROCFS_E_NOT_FOUND);
        else
                check(r == 0 && unit && strcmp(unit, expected) == 0);
        if (unit && expected && strcmp(unit, expected) != 0)
                printf("# got %s for %s\n", unit, cgroup);
        free(unit);
}

static void unit_malformed(const char *cgroup, size_t n) {
        char *unit = NULL;

        check(procfs_cgroup_unit(cgroup, n, &unit) == PROCFS_E_MALFORMED && !unit);
        free(unit);
}

/* As strict as procfs_cgroup_container(): a file with two lines of one hierarchy names no unit, since a
 * v1 rename could have forged one of them (procfs.h), and neither does a NUL or a line of another shape. */
static void test_cgroup_unit_strict(void) {
        static const char two_unified[] = "0::/system.slice/forged.service\n0::/system.slice/orders.service\n";
        static const char two_systemd[] = "1:name=systemd:/system.slice/forged.service\n"
                                          "1:name=systemd:/system.slice/orders.service\n0::/\n";

        unit_malformed(two_unified, sizeof(two_unified) - 1);
        unit_malformed(two_systemd, sizeof(two_systemd) - 1);
        unit_malformed("0::/sys\0x.service\n", 18);
        unit_malformed("", 0);
        unit_malformed("garbage\n0::/system.slice/orders.service\n", 40);
        unit_malformed("0::/system.slice/orders.service\n1:pids\n", 39);
        /* one of each is what a hybrid host writes */
        unit_is("1:name=systemd:/system.slice/orders.service\n0::/system.slice/orders.service\n",
                "orders.service");
}

static void test_cgroup_unit(void) {
        unit_is("0::/system.slice/orders.service\n", "orders.service");
        unit_is("0::/system.slice/orders.service/worker\n", "orders.service");
        unit_is("0::/machine.slice/machine-x.scope/payload/system.slice/y.service\n", "machine-x.scope");
        unit_is("0::/user.slice/user-1000.slice/user@1000.service/app.slice/app.service\n", "user@1000.service");
        unit_is("0::/user.slice/user-1000.slice/session-3.scope\n", "session-3.scope");
        unit_is("12:pids:/\n9:name=systemd:/system.slice/orders.service\n0::/\n", "orders.service");
        unit_is("0::/\n", NULL);
        unit_is("0::/init.scope\n", "init.scope");
        unit_is("0::/system.slice\n", NULL);
        unit_is("0::/docker/abc123\n", NULL);
        /* read from a cgroup namespace of its own (the agent in a container): leading ".." only */
        unit_is("0::/../../system.slice/orders.service\n", "orders.service");
        unit_is("0::/..\n", NULL);
        unit_is("0::/system.slice/../orders.service\n", NULL);
        /* a byte outside the unit alphabet: not a unit, not a shortened one */
        unit_is("0::/system.slice/or ders.service\n", NULL);
        unit_is("0::/system.slice/or\xff" "ders.service\n", NULL);
}

#define ID_A "fcfe79830dc51fa91eb457b37217629989435997564dd17d8d75eee0753cc376"
#define ID_B "3e1f0a2b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7"
#define POD "8d2a4c1e-5b3f-4e6a-9c7d-0f1e2d3c4b5a"
#define POD_ "8d2a4c1e_5b3f_4e6a_9c7d_0f1e2d3c4b5a"

/* @id, @pod: "" for none; @path: the cgroup kept, "" for none. */
static void container_is(const char *buf, size_t n, const char *id, const char *pod, const char *path) {
        ProcContainer c;
        int r;

        memset(&c, 'x', sizeof(c));
        r = procfs_cgroup_container(buf, n, &c);
        check(r == 0);
        if (r != 0)
                return;
        check(strcmp(c.id, id) == 0 && strcmp(c.pod_uid, pod) == 0 && strcmp(c.cgroup, path) == 0);
        if (strcmp(c.id, id) != 0 || strcmp(c.pod_uid, pod) != 0 || strcmp(c.cgroup, path) != 0)
                printf("# got id '%s' pod '%s' cgroup '%s'\n", c.id, c.pod_uid, c.cgroup);
}

static void container_in(const char *cgroup, const char *id, const char *pod, const char *path) {
        container_is(cgroup, strlen(cgroup), id, pod, path);
}

static void test_cgroup_container_layouts(void) {
        /* podman --cgroup-manager cgroupfs on this project's test machines (tests/containers/podman.py), as the
         * host read it: every v1 controller and the unified hierarchy in libpod_parent */
        container_in("9:name=systemd:/libpod_parent/libpod-" ID_A "\n8:pids:/libpod_parent/libpod-" ID_A "\n"
                     "7:blkio:/libpod_parent/libpod-" ID_A "\n6:freezer:/libpod_parent/libpod-" ID_A "\n"
                     "5:devices:/libpod_parent/libpod-" ID_A "\n4:memory:/libpod_parent/libpod-" ID_A "\n"
                     "3:cpuset:/libpod_parent/libpod-" ID_A "\n2:cpuacct:/libpod_parent/libpod-" ID_A "\n"
                     "1:cpu:/libpod_parent/libpod-" ID_A "\n0::/libpod_parent/libpod-" ID_A "\n",
                     ID_A, "", "/libpod_parent/libpod-" ID_A);
        /* and a host process there: the machine's own memory cgroup is no container */
        container_in("9:name=systemd:/\n8:pids:/\n4:memory:/process_api/c198b1e3540a9ec2dbf6e6efba67a9dc\n1:cpu:/\n"
                     "0::/\n", "", "", "/");
        /* podman and docker under systemd, with and without podman's "container" sub-cgroup */
        container_in("0::/machine.slice/libpod-" ID_A ".scope/container\n", ID_A, "",
                     "/machine.slice/libpod-" ID_A ".scope/container");
        container_in("0::/machine.slice/libpod-" ID_A ".scope\n", ID_A, "", "/machine.slice/libpod-" ID_A ".scope");
        container_in("0::/system.slice/docker-" ID_A ".scope\n", ID_A, "", "/system.slice/docker-" ID_A ".scope");
        container_in("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" ID_A ".scope/container\n",
                     ID_A, "", "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" ID_A ".scope/container");
        /* a podman pod's container: the pod's slice names no Kubernetes pod */
        container_in("0::/machine.slice/machine-libpod_pod_" ID_B ".slice/libpod-" ID_A ".scope/container\n", ID_A, "",
                     "/machine.slice/machine-libpod_pod_" ID_B ".slice/libpod-" ID_A ".scope/container");
        /* podman's conmon is beside the container, not in it */
        container_in("0::/machine.slice/libpod-conmon-" ID_A ".scope\n", "", "",
                     "/machine.slice/libpod-conmon-" ID_A ".scope");
        /* cgroupfs layouts */
        container_in("0::/libpod_parent/libpod-" ID_A "\n", ID_A, "", "/libpod_parent/libpod-" ID_A);
        container_in("0::/docker/" ID_A "\n", ID_A, "", "/docker/" ID_A);
        container_in("0::/machine.slice/libpod-" ID_A ".scope/container\n", ID_A, "",
                     "/machine.slice/libpod-" ID_A ".scope/container");
        /* legacy hosts: "0::/" for everyone; systemd's hierarchy, or without systemd any controller */
        container_in("12:memory:/docker/" ID_A "\n2:cpu,cpuacct:/docker/" ID_A "\n1:name=systemd:/docker/" ID_A "\n0::/\n",
                     ID_A, "", "/docker/" ID_A);
        container_in("12:memory:/docker/" ID_A "\n2:cpu,cpuacct:/docker/" ID_A "\n0::/\n", ID_A, "", "/docker/" ID_A);
        container_in("12:memory:/docker/" ID_A "\n1:name=systemd:/docker/" ID_A "\n", ID_A, "", "/docker/" ID_A);
        /* systemd's hierarchy placed, a controller elsewhere: systemd's word */
        container_in("4:memory:/docker/" ID_A "\n1:name=systemd:/system.slice/x.service\n0::/\n", "", "",
                     "/system.slice/x.service");
        container_in("0::/system.slice/orders.service\n", "", "", "/system.slice/orders.service");

        /* Kubernetes, the kubelet's systemd driver: pod uid with '_', QoS classes, containerd, cri-o, docker */
        container_in("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" POD_ ".slice/"
                     "cri-containerd-" ID_A ".scope\n", ID_A, POD,
                     "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" POD_ ".slice/cri-containerd-" ID_A
                     ".scope");
        container_in("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" POD_ ".slice/crio-" ID_A
                     ".scope/container\n", ID_A, POD,
                     "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" POD_ ".slice/crio-" ID_A
                     ".scope/container");
        container_in("0::/kubepods.slice/kubepods-pod" POD_ ".slice/docker-" ID_A ".scope\n", ID_A, POD,
                     "/kubepods.slice/kubepods-pod" POD_ ".slice/docker-" ID_A ".scope");
        /* the cgroupfs driver */
        container_in("0::/kubepods/burstable/pod" POD "/" ID_A "\n", ID_A, POD, "/kubepods/burstable/pod" POD "/" ID_A);
        container_in("0::/kubepods/pod" POD "/" ID_A "\n", ID_A, POD, "/kubepods/pod" POD "/" ID_A);
        container_in("0::/kubepods/besteffort/pod" POD "/crio-" ID_A "\n", ID_A, POD,
                     "/kubepods/besteffort/pod" POD "/crio-" ID_A);
        container_in("11:memory:/kubepods/burstable/pod" POD "/" ID_A "\n1:name=systemd:/kubepods/burstable/pod" POD
                     "/" ID_A "\n0::/\n", ID_A, POD, "/kubepods/burstable/pod" POD "/" ID_A);
        /* a pod's own cgroup, no container in it */
        container_in("0::/kubepods/burstable/pod" POD "\n", "", POD, "/kubepods/burstable/pod" POD);
        /* read from an agent in a cgroup namespace of its own (a DaemonSet): relative to it */
        container_in("0::/../../kubepods-besteffort-pod" POD_ ".slice/cri-containerd-" ID_A ".scope\n", ID_A, POD,
                     "/../../kubepods-besteffort-pod" POD_ ".slice/cri-containerd-" ID_A ".scope");
        /* no newline at the end */
        container_in("0::/docker/" ID_A, ID_A, "", "/docker/" ID_A);
}

static void hierarchy_is(const char *cgroup, bool unified, const char *hierarchy) {
        ProcContainer c;

        check(procfs_cgroup_container(cgroup, strlen(cgroup), &c) == 0 && c.unified == unified &&
              strcmp(c.hierarchy, hierarchy) == 0);
}

/* Which hierarchy the path kept is in, for the look at who owns its directories (cgroupfs.h). */
static void test_cgroup_container_hierarchy(void) {
        hierarchy_is("9:name=systemd:/libpod_parent/libpod-" ID_A "\n4:memory:/libpod_parent/libpod-" ID_A "\n"
                     "0::/libpod_parent/libpod-" ID_A "\n", true, "");
        hierarchy_is("0::/\n", true, "");
        hierarchy_is("12:memory:/docker/" ID_A "\n1:name=systemd:/docker/" ID_A "\n0::/\n", false, "systemd");
        hierarchy_is("12:memory:/docker/" ID_A "\n2:cpu,cpuacct:/docker/" ID_A "\n0::/\n", false, "memory");
        hierarchy_is("2:cpu,cpuacct:/docker/" ID_A "\n0::/\n", false, "cpu,cpuacct");
        hierarchy_is("1:name=systemd:/\n", false, "systemd");
        /* a name that is no plain directory name gives no directory to look in */
        hierarchy_is("2:name=../x:/docker/" ID_A "\n", false, "");
        hierarchy_is("2::/docker/" ID_A "\n", false, "");
}

static void test_cgroup_container_outermost(void) {
        /* an engine inside a container, or sub-cgroups a container made itself: the outer one is the host's */
        container_in("0::/machine.slice/libpod-" ID_A ".scope/container/docker-" ID_B ".scope\n", ID_A, "",
                     "/machine.slice/libpod-" ID_A ".scope/container/docker-" ID_B ".scope");
        container_in("0::/docker/" ID_A "/kubepods/burstable/pod" POD "/" ID_B "\n", ID_A, "",
                     "/docker/" ID_A "/kubepods/burstable/pod" POD "/" ID_B);
        container_in("0::/kubepods/pod" POD "/" ID_A "/kubepods-pod8d2a4c1e_0000_4e6a_9c7d_0f1e2d3c4b5a.slice/" ID_B "\n",
                     ID_A, POD, "/kubepods/pod" POD "/" ID_A "/kubepods-pod8d2a4c1e_0000_4e6a_9c7d_0f1e2d3c4b5a.slice/" ID_B);
        /* the first pod decides, and the first container after it */
        container_in("0::/kubepods/pod" POD "/pod00000000-0000-0000-0000-000000000000/" ID_A "/" ID_B "\n", ID_A, POD,
                     "/kubepods/pod" POD "/pod00000000-0000-0000-0000-000000000000/" ID_A "/" ID_B);
}

static void test_cgroup_container_hostile(void) {
        static const char nul[] = "0::/docker/" ID_A "\0\n";
        static const char nul_before[] = "0::/sys\0/docker/" ID_A "\n";
        char long_path[2048], long_component[8192];
        ProcContainer c;

        /* not quite an id: uppercase, 63 and 65 characters, a non-hex letter, more after it */
        container_in("0::/docker/FCFE79830DC51FA91EB457B37217629989435997564DD17D8D75EEE0753CC376\n", "", "",
                     "/docker/FCFE79830DC51FA91EB457B37217629989435997564DD17D8D75EEE0753CC376");
        container_in("0::/docker/Fcfe79830dc51fa91eb457b37217629989435997564dd17d8d75eee0753cc376\n", "", "",
                     "/docker/Fcfe79830dc51fa91eb457b37217629989435997564dd17d8d75eee0753cc376");
        container_in("0::/docker/" ID_A "0\n", "", "", "/docker/" ID_A "0");
        container_in("0::/docker/cfe79830dc51fa91eb457b37217629989435997564dd17d8d75eee0753cc376\n", "", "",
                     "/docker/cfe79830dc51fa91eb457b37217629989435997564dd17d8d75eee0753cc376");
        container_in("0::/docker/gcfe79830dc51fa91eb457b37217629989435997564dd17d8d75eee0753cc376\n", "", "",
                     "/docker/gcfe79830dc51fa91eb457b37217629989435997564dd17d8d75eee0753cc376");
        container_in("0::/system.slice/docker-" ID_A ".scope.bak\n", "", "", "/system.slice/docker-" ID_A ".scope.bak");
        container_in("0::/system.slice/docker-" ID_A "x.scope\n", "", "", "/system.slice/docker-" ID_A "x.scope");
        container_in("0::/system.slice/Docker-" ID_A ".scope\n", "", "", "/system.slice/Docker-" ID_A ".scope");
        container_in("0::/system.slice/" ID_A ".scope\n", "", "", "/system.slice/" ID_A ".scope");
        container_in("0::/system.slice/podman-" ID_A ".scope\n", "", "", "/system.slice/podman-" ID_A ".scope");
        /* not quite a pod uid: uppercase, the other separator, a dash out of place, one short */
        container_in("0::/kubepods/pod8D2A4C1E-5B3F-4E6A-9C7D-0F1E2D3C4B5A/" ID_A "\n", ID_A, "",
                     "/kubepods/pod8D2A4C1E-5B3F-4E6A-9C7D-0F1E2D3C4B5A/" ID_A);
        container_in("0::/kubepods/pod" POD_ "/" ID_A "\n", ID_A, "", "/kubepods/pod" POD_ "/" ID_A);
        container_in("0::/kubepods.slice/kubepods-pod" POD ".slice/" ID_A "\n", ID_A, "",
                     "/kubepods.slice/kubepods-pod" POD ".slice/" ID_A);
        container_in("0::/kubepods/pod8d2a4c1e5-b3f-4e6a-9c7d-0f1e2d3c4b5a/" ID_A "\n", ID_A, "",
                     "/kubepods/pod8d2a4c1e5-b3f-4e6a-9c7d-0f1e2d3c4b5a/" ID_A);
        container_in("0::/kubepods/pod8d2a4c1e-5b3f-4e6a-9c7d-0f1e2d3c4b5/" ID_A "\n", ID_A, "",
                     "/kubepods/pod8d2a4c1e-5b3f-4e6a-9c7d-0f1e2d3c4b5/" ID_A);
        container_in("0::/kubepods.slice/kubepods-burstable-xpod" POD_ ".slice/" ID_A "\n", ID_A, "",
                     "/kubepods.slice/kubepods-burstable-xpod" POD_ ".slice/" ID_A);
        container_in("0::/kubepods.slice/pods-pod" POD_ ".slice/" ID_A "\n", ID_A, "",
                     "/kubepods.slice/pods-pod" POD_ ".slice/" ID_A);
        /* path-traversal-like names: components are split at '/', never joined or resolved */
        container_in("0::/docker-../../" ID_A ".scope\n", "", "", "/docker-../../" ID_A ".scope");
        container_in("0::/docker-" ID_A ".scope/../../x\n", ID_A, "", "/docker-" ID_A ".scope/../../x");
        container_in("0::/./docker/./" ID_A "/..\n", ID_A, "", "/./docker/./" ID_A "/..");
        /* a control character or bytes that are not UTF-8 in the path: kept as they are (escaped when shown) */
        container_in("0::/docker/\x1b[31m/" ID_A "\n", ID_A, "", "/docker/\x1b[31m/" ID_A);
        container_in("0::/docker/\xff/" ID_A "\n", ID_A, "", "/docker/\xff/" ID_A);

        /* too long a path: left out, not cut; its container is still read */
        memset(long_path, 0, sizeof(long_path));
        strcpy(long_path, "0::/");
        for (size_t i = 0; i < 60; i++)
                strcat(long_path, "abcdefgh/");
        strcat(long_path, "docker-" ID_A ".scope\n");
        container_in(long_path, ID_A, "", "");
        /* exactly PROC_CGROUP_PATH_MAX kept, one more not */
        memset(long_path, 0, sizeof(long_path));
        strcpy(long_path, "0::/");
        memset(long_path + 4, 'a', PROC_CGROUP_PATH_MAX - 1);
        container_in(long_path, "", "", long_path + 3);
        long_path[3 + PROC_CGROUP_PATH_MAX] = 'a';
        container_in(long_path, "", "", "");
        /* one huge component */
        memset(long_component, 0, sizeof(long_component));
        strcpy(long_component, "0::/");
        memset(long_component + 4, 'f', sizeof(long_component) - 5 - 80);
        strcat(long_component, "/docker-" ID_A ".scope");
        container_in(long_component, ID_A, "", "");

        /* malformed: NUL anywhere, empty, no colons, no path, a relative path, a hierarchy id not a number */
        check(procfs_cgroup_container(nul, sizeof(nul) - 1, &c) == PROCFS_E_MALFORMED);
        check(procfs_cgroup_container(nul_before, sizeof(nul_before) - 1, &c) == PROCFS_E_MALFORMED);
        check(procfs_cgroup_container("", 0, &c) == PROCFS_E_MALFORMED);
        check(procfs_cgroup_container("\n\n", 2, &c) == PROCFS_E_MALFORMED);
        check(procfs_cgroup_container("garbage\n", 8, &c) == PROCFS_E_MALFORMED);
        check(procfs_cgroup_container("0::\n", 4, &c) == PROCFS_E_MALFORMED);
        check(procfs_cgroup_container("0::docker/x\n", 12, &c) == PROCFS_E_MALFORMED);
        check(procfs_cgroup_container("x::/a\n", 6, &c) == PROCFS_E_MALFORMED);
        check(procfs_cgroup_container(":pids:/a\n", 9, &c) == PROCFS_E_MALFORMED);
        check(procfs_cgroup_container("0::/\n1:pids\n", 12, &c) == PROCFS_E_MALFORMED);
        /* a second unified or systemd line: one was forged by a name with a newline in it */
        check(procfs_cgroup_container("0::/a\n0::/docker/" ID_A "\n", 17 + 64 + 1, &c) == PROCFS_E_MALFORMED);
        check(procfs_cgroup_container("1:name=systemd:/a\n1:name=systemd:/docker/" ID_A "\n0::/\n",
                                      strlen("1:name=systemd:/a\n1:name=systemd:/docker/" ID_A "\n0::/\n"),
                                      &c) == PROCFS_E_MALFORMED);
        /* not a file of lines at all, but a buffer cut in the middle: the part there is read */
        container_is("0::/docker/" ID_A "\n", 11 + 63, "", "", "/docker/fcfe79830dc51fa91eb457b37217629989435997564dd17d8d75eee0753cc37");
}

/* This very process: whatever its cgroup, the file parses. */
static void test_cgroup_container_self(void) {
        char *buf = NULL;
        size_t n;
        ProcContainer c;

        check(read_file_at(AT_FDCWD, "/proc/self/cgroup", 65536, &buf, &n) == 0);
        check(procfs_cgroup_container(buf, n, &c) == 0);
        check(strlen(c.cgroup) <= PROC_CGROUP_PATH_MAX && (c.cgroup[0] == '\0' || c.cgroup[0] == '/'));
        free(buf);
}

static void test_auxv_secure(void) {
        unsigned long plain[] = { AT_PAGESZ, 4096, AT_SECURE, 0, AT_NULL, 0 };
        unsigned long secure[] = { AT_SECURE, 1, AT_UID, 1000, AT_NULL, 0 };
        unsigned long unterminated[] = { AT_SECURE, 0 };
        char *buf = NULL;
        size_t n;
        bool v = true;

        check(procfs_auxv_secure((char *)plain, sizeof(plain), &v) == 0 && !v);
        check(procfs_auxv_secure((char *)secure, sizeof(secure), &v) == 0 && v);
        check(procfs_auxv_secure((char *)unterminated, sizeof(unterminated), &v) == PROCFS_E_MALFORMED);
        check(procfs_auxv_secure((char *)plain, sizeof(plain) - 1, &v) == PROCFS_E_MALFORMED);
        check(read_file_at(AT_FDCWD, "/proc/self/auxv", 4096, &buf, &n) == 0);
        check(procfs_auxv_secure(buf, n, &v) == 0 && !v);
        free(buf);
}

static void test_unix_diagnostic_listeners(void) {
        static const char table[] =
                "Num       RefCount Protocol Flags    Type St Inode Path\n"
                "0000000000000000: 00000002 00000000 00010000 0001 01 20001 /tmp/dotnet-diagnostic-4242-987654-socket\n"
                /* connected, not listening: a client's end */
                "0000000000000000: 00000003 00000000 00000000 0001 03 20002 /tmp/dotnet-diagnostic-4343-1-socket\n"
                "0000000000000000: 00000002 00000000 00010000 0001 01 20003 /run/dsagent.sock\n"
                "0000000000000000: 00000002 00000000 00010000 0001 01 20004 /home/my dir/dotnet-diagnostic-7-8-socket\n"
                "0000000000000000: 00000002 00000000 00010000 0001 01 20005 @dotnet-diagnostic-9-10-socket\n"
                "0000000000000000: 00000002 00000000 00010000 0001 01 20006 /tmp/dotnet-diagnostic-x-8-socket\n"
                "0000000000000000: 00000002 00000000 00010000 0001 01 20007 /tmp/dotnet-diagnostic-0-8-socket\n"
                "0000000000000000: 00000002 00000000 00010000 0001 01 20008\n";
        ProcDiagnosticName names[8];
        size_t n = 0;

        check(procfs_unix_diagnostic_listeners(table, strlen(table), names, 8, &n) == 0);
        /* not the connected one, not an abstract name (runtimes bind paths), not a malformed pid */
        check(n == 2);
        check(names[0].pid == 4242 && names[0].key == 987654);
        check(names[1].pid == 7 && names[1].key == 8);      /* a space in the path */
        /* more than fit: counted, not stored */
        check(procfs_unix_diagnostic_listeners(table, strlen(table), names, 1, &n) == 0 && n == 2);
        check(procfs_unix_diagnostic_listeners("", 0, names, 8, &n) == PROCFS_E_MALFORMED);
}

/* A listening socket of this very process under a runtime's name is found in its namespace's table, however
 * many other listeners the host has (tests beside this one run hundreds): all are stored. */
static void test_unix_diagnostic_listeners_self(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        ProcDiagnosticName *names = NULL;
        char *buf = NULL;
        size_t n = 0, stored = 0, size;
        bool found = false;
        int fd;

        snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/dotnet-diagnostic-%d-123456789-socket", (int)getpid());
        unlink(sa.sun_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        check(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 1) == 0);
        check(read_file_at(AT_FDCWD, "/proc/self/net/unix", 16 << 20, &buf, &size) == 0);
        check(procfs_unix_diagnostic_listeners(buf, size, NULL, 0, &n) == 0 && n >= 1); /* counted */
        names = calloc(n, sizeof(*names));
        check(names && procfs_unix_diagnostic_listeners(buf, size, names, n, &stored) == 0 && stored == n);
        for (size_t i = 0; names && i < n; i++)
                found |= names[i].pid == getpid() && names[i].key == 123456789;
        check(found);
        close(fd);
        unlink(sa.sun_path);
        free(names);
        free(buf);
}

int main(void) {
        run_test(test_stat_start_time);
        run_test(test_stat_self);
        run_test(test_status);
        run_test(test_status_rejects);
        run_test(test_status_credentials);
        run_test(test_status_many_groups);
        run_test(test_status_self);
        run_test(test_environ);
        run_test(test_environ_startup_suspend);
        run_test(test_cmdline_name);
        run_test(test_cgroup_unit);
        run_test(test_cgroup_unit_strict);
        run_test(test_cgroup_container_layouts);
        run_test(test_cgroup_container_hierarchy);
        run_test(test_cgroup_container_outermost);
        run_test(test_cgroup_container_hostile);
        run_test(test_cgroup_container_self);
        run_test(test_auxv_secure);
        run_test(test_unix_diagnostic_listeners);
        run_test(test_unix_diagnostic_listeners_self);
        return tap_finish();
}
