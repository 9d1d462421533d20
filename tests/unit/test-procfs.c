/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* /proc parsers against real and hostile contents */
#include <fcntl.h>
#include <string.h>
#include <stdio.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fileio.h"
#include "procfs.h"
#include "tap.h"

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

static void test_status_self(void) {
        char *buf = NULL;
        size_t n;
        ProcStatus st;

        check(read_file_at(AT_FDCWD, "/proc/self/status", 65536, &buf, &n) == 0);
        check(procfs_parse_status(buf, n, &st) == 0);
        check(st.uid[1] == geteuid() && st.nspid[0] == getpid());
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
        unit_is("", NULL);
        /* a NUL or a byte outside the unit alphabet: not a unit, not a shortened one */
        check(procfs_cgroup_unit("0::/sys\0x.service\n", 18, &(char *){ NULL }) == PROCFS_E_NOT_FOUND);
        unit_is("0::/system.slice/or ders.service\n", NULL);
        unit_is("0::/system.slice/or\xff" "ders.service\n", NULL);
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

/* A listening socket of this very process under a runtime's name is found in its namespace's table. */
static void test_unix_diagnostic_listeners_self(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        ProcDiagnosticName names[256];
        char *buf = NULL;
        size_t n = 0, size;
        bool found = false;
        int fd;

        snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/dotnet-diagnostic-%d-123456789-socket", (int)getpid());
        unlink(sa.sun_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        check(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 1) == 0);
        check(read_file_at(AT_FDCWD, "/proc/self/net/unix", 16 << 20, &buf, &size) == 0);
        check(procfs_unix_diagnostic_listeners(buf, size, names, 256, &n) == 0);
        for (size_t i = 0; i < n && i < 256; i++)
                found |= names[i].pid == getpid() && names[i].key == 123456789;
        check(found);
        close(fd);
        unlink(sa.sun_path);
        free(buf);
}

int main(void) {
        run_test(test_stat_start_time);
        run_test(test_stat_self);
        run_test(test_status);
        run_test(test_status_rejects);
        run_test(test_status_self);
        run_test(test_environ);
        run_test(test_environ_startup_suspend);
        run_test(test_cmdline_name);
        run_test(test_cgroup_unit);
        run_test(test_auxv_secure);
        run_test(test_unix_diagnostic_listeners);
        run_test(test_unix_diagnostic_listeners_self);
        return tap_finish();
}
