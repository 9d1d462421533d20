/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * systemd-coredump's journal entries (agent/crashes/crash-entry.h): an entry with its fields as
 * systemd 252 writes them (taken from a real one) is trusted and read; each field journald vouches
 * for, missing or another's, makes it untrusted; the stored core's name must be the one
 * systemd-coredump gives this crash; command lines are read back as systemd quotes them.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "agent/crashes/crash-entry.h"
#include "tests/unit/tap.h"

#define MACHINE "3d1219c7c4c5404aaa1f6d2a48adfda4"
#define BOOT "c56f8b0e4fee4f2198fa2c64322bc857"
#define CORE_UID 994

/* AT_SECURE 0, then AT_NULL */
static const unsigned long auxv_plain[] = { 23, 0, 0, 0 };
static const unsigned long auxv_secure[] = { 23, 1, 0, 0 };

typedef struct Entry {
        char text[40][512];
        size_t n;
        unsigned char auxv[64 + 32];
        size_t auxv_size;
} Entry;

static void add(Entry *e, const char *field) {
        snprintf(e->text[e->n++], sizeof(e->text[0]), "%s", field);
}

/* A crash of pid 186 of uid 1001 in dst-crasher.service, as systemd-coredump 252 logged it. */
static void genuine(Entry *e) {
        *e = (Entry){};
        add(e, "MESSAGE_ID=" CRASH_MESSAGE_ID);
        add(e, "_TRANSPORT=journal");
        add(e, "_COMM=systemd-coredum");
        add(e, "_EXE=/usr/lib/systemd/systemd-coredump");
        add(e, "_SYSTEMD_UNIT=systemd-coredump@0-119-0.service");
        add(e, "_SYSTEMD_CGROUP=/system.slice/system-systemd\\x2dcoredump.slice/systemd-coredump@0-119-0.service");
        add(e, "_MACHINE_ID=" MACHINE);
        add(e, "_UID=1001");
        add(e, "SYSLOG_IDENTIFIER=systemd-coredump");
        add(e, "COREDUMP_PID=186");
        add(e, "COREDUMP_UID=1001");
        add(e, "COREDUMP_GID=1001");
        add(e, "COREDUMP_SIGNAL=6");
        add(e, "COREDUMP_TIMESTAMP=1795936112000000");
        add(e, "COREDUMP_DUMPABLE=1");
        add(e, "COREDUMP_EXE=/opt/app/DsTestTarget");
        add(e, "COREDUMP_CMDLINE=/usr/bin/dotnet /opt/app/Orders.Api.dll --crash-when /run/x throw");
        add(e, "COREDUMP_CGROUP=/system.slice/orders.service");
        add(e, "COREDUMP_FILENAME=/var/lib/systemd/coredump/core.DsTestTarget.1001." BOOT ".186.1795936112000000.zst");
        add(e, "COREDUMP_PROC_STATUS=Name:\tDsTestTarget\nUid:\t1001\t1001\t1001\t1001\nGid:\t1001\t1001\t1001\t1001\n"
               "Groups:\t993 1001 \nNSpid:\t186\n");
        add(e, "COREDUMP_PROC_MAPS=7f00-7f10 r-xp 0 08:01 1 /usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.12/libcoreclr.so\n");
        memcpy(e->auxv, "COREDUMP_PROC_AUXV=", 19);
        memcpy(e->auxv + 19, auxv_plain, sizeof(auxv_plain));
        e->auxv_size = 19 + sizeof(auxv_plain);
}

static void set(Entry *e, const char *name, const char *field) {
        for (size_t i = 0; i < e->n; i++)
                if (strncmp(e->text[i], name, strlen(name)) == 0 && e->text[i][strlen(name)] == '=') {
                        if (field)
                                snprintf(e->text[i], sizeof(e->text[0]), "%s", field);
                        else
                                e->text[i][0] = '\0'; /* empty: left out */
                        return;
                }
        if (field)
                add(e, field);
}

static int parse(const Entry *e, CrashEntry *ret) {
        CrashField fields[41];
        size_t n = 0;

        for (size_t i = 0; i < e->n; i++)
                if (e->text[i][0])
                        fields[n++] = (CrashField){ e->text[i], strlen(e->text[i]) };
        fields[n++] = (CrashField){ e->auxv, e->auxv_size };
        return crash_entry_parse(fields, n, MACHINE, CORE_UID, 1795936113000000, ret);
}

static void test_genuine_entry_is_read(void) {
        Entry e;
        CrashEntry c;
        PolicyTarget t;

        genuine(&e);
        check(parse(&e, &c) == 0);
        check(c.pid == 186 && c.uid == 1001 && c.gid == 1001 && c.signal == 6);
        check(strcmp(c.id, "1795936112-186") == 0);
        check(strcmp(c.unit, "orders.service") == 0);
        check(strcmp(c.name, "Orders.Api") == 0);
        check(strcmp(c.cgroup, "/system.slice/orders.service") == 0);
        check(strcmp(c.file_name, "core.DsTestTarget.1001." BOOT ".186.1795936112000000.zst") == 0);
        check(c.compression == CRASH_COMPRESSION_ZSTD && c.dotnet == CRASH_DOTNET_YES && !c.changed_credentials);
        t = crash_entry_policy_target(&c);
        check(t.uid[1] == 1001 && t.uid[2] == 1001 && strcmp(t.unit, "orders.service") == 0 && t.cgroup == NULL);
}

/* Each field journald vouches for: left out, or another sender's, and nothing of the entry counts. */
static void test_each_trusted_field_is_required(void) {
        static const struct {
                const char *name, *other;
        } cases[] = {
                { "MESSAGE_ID", "MESSAGE_ID=fc2e22bc6ee647b6b90729ab34a250b2" },
                { "_TRANSPORT", "_TRANSPORT=syslog" },
                { "_COMM", "_COMM=logger" },
                { "_EXE", "_EXE=/usr/bin/logger" },
                { "_SYSTEMD_UNIT", "_SYSTEMD_UNIT=user@1003.service" },
                { "_SYSTEMD_UNIT", "_SYSTEMD_UNIT=systemd-coredump@x/y.service" },
                { "_SYSTEMD_CGROUP", "_SYSTEMD_CGROUP=/user.slice/user-1003.slice/user@1003.service/"
                                     "systemd-coredump@0-119-0.service" },
                { "_MACHINE_ID", "_MACHINE_ID=00000000000000000000000000000000" },
                { "_UID", "_UID=1003" },
        };
        Entry e;
        CrashEntry c;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                genuine(&e);
                set(&e, cases[i].name, cases[i].other);
                check(parse(&e, &c) == CRASH_ENTRY_E_UNTRUSTED);
                if (strcmp(cases[i].name, "_EXE") == 0)
                        continue; /* journald leaves _EXE out when it cannot read it: that is no forgery */
                genuine(&e);
                set(&e, cases[i].name, NULL);
                check(parse(&e, &c) == CRASH_ENTRY_E_UNTRUSTED);
        }
        /* logged as the systemd-coredump user, or root: still its */
        genuine(&e);
        set(&e, "_UID", "_UID=994");
        check(parse(&e, &c) == 0);
        genuine(&e);
        set(&e, "_UID", "_UID=0");
        check(parse(&e, &c) == 0);
        /* a field twice: the entry is not journald's */
        genuine(&e);
        add(&e, "_SYSTEMD_UNIT=systemd-coredump@0-119-0.service");
        check(parse(&e, &c) == CRASH_ENTRY_E_UNTRUSTED);
        /* the facts a decision needs */
        genuine(&e);
        set(&e, "COREDUMP_PID", "COREDUMP_PID=x");
        check(parse(&e, &c) == CRASH_ENTRY_E_MALFORMED);
}

/* What the process's memory is root's alone for: as systemd-coredump decides who reads a core. */
static void test_changed_credentials(void) {
        Entry e;
        CrashEntry c;

        genuine(&e);
        set(&e, "COREDUMP_PROC_STATUS", "COREDUMP_PROC_STATUS=Uid:\t1001\t0\t1001\t1001\nGid:\t1001\t1001\t1001\t1001\n"
                                        "Groups:\t1001\nNSpid:\t186\n");
        check(parse(&e, &c) == 0 && c.changed_credentials);
        genuine(&e);
        set(&e, "COREDUMP_DUMPABLE", "COREDUMP_DUMPABLE=2");
        check(parse(&e, &c) == 0 && c.changed_credentials);
        genuine(&e);
        memcpy(e.auxv + 19, auxv_secure, sizeof(auxv_secure));
        check(parse(&e, &c) == 0 && c.changed_credentials);
        genuine(&e);
        set(&e, "COREDUMP_PROC_STATUS", NULL);
        check(parse(&e, &c) == 0 && c.changed_credentials);
        check(crash_entry_policy_target(&c).uid[2] == (uid_t)-1);
}

/* Only the name systemd-coredump gives this crash's core, directly in its store. */
static void test_core_file_name(void) {
        static const char *const refused[] = {
                "COREDUMP_FILENAME=/var/lib/systemd/coredump/../../../etc/shadow",
                "COREDUMP_FILENAME=/var/lib/systemd/coredump/sub/core.X.1001." BOOT ".186.1795936112000000.zst",
                "COREDUMP_FILENAME=/tmp/core.X.1001." BOOT ".186.1795936112000000.zst",
                "COREDUMP_FILENAME=/var/lib/systemd/coredump/core.X.1002." BOOT ".186.1795936112000000.zst",
                "COREDUMP_FILENAME=/var/lib/systemd/coredump/core.X.1001." BOOT ".187.1795936112000000.zst",
                "COREDUMP_FILENAME=/var/lib/systemd/coredump/core.X.1001." BOOT ".186.1795936113000000.zst",
                "COREDUMP_FILENAME=/var/lib/systemd/coredump/core..1001." BOOT ".186.1795936112000000",
                "COREDUMP_FILENAME=/var/lib/systemd/coredump/other.X.1001." BOOT ".186.1795936112000000",
        };
        Entry e;
        CrashEntry c;

        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                genuine(&e);
                set(&e, "COREDUMP_FILENAME", refused[i]);
                check(parse(&e, &c) == 0 && c.file_name[0] == '\0');
        }
        genuine(&e);
        set(&e, "COREDUMP_FILENAME", "COREDUMP_FILENAME=/var/lib/systemd/coredump/core.a\\x2eb.1001." BOOT
                                     ".186.1795936112000000.xz");
        check(parse(&e, &c) == 0 && c.compression == CRASH_COMPRESSION_XZ && c.file_name[0]);
        genuine(&e);
        set(&e, "COREDUMP_FILENAME", "COREDUMP_FILENAME=/var/lib/systemd/coredump/core.a.1001." BOOT
                                     ".186.1795936112000000");
        check(parse(&e, &c) == 0 && c.compression == CRASH_COMPRESSION_NONE && c.file_name[0]);
}

static void test_cmdline(void) {
        char buf[256];
        int n;

        n = crash_cmdline_args("/usr/bin/dotnet 'My App.dll' x", 30, 2, buf, sizeof(buf));
        check(n == 27 && strcmp(buf, "/usr/bin/dotnet") == 0 && strcmp(buf + 16, "My App.dll") == 0);
        n = crash_cmdline_args("$'/opt/a\\tb' c", 14, 1, buf, sizeof(buf));
        check(n == 9 && strcmp(buf, "/opt/a\tb") == 0);
        n = crash_cmdline_args("\"/opt/\\\"q\\\"\"", 12, 1, buf, sizeof(buf));
        check(n > 0 && strcmp(buf, "/opt/\"q\"") == 0);
        check(crash_cmdline_args("'unclosed", 9, 1, buf, sizeof(buf)) < 0);
        check(crash_cmdline_args("a  b", 4, 2, buf, sizeof(buf)) < 0);
        check(crash_cmdline_args("$'\\x00'", 7, 1, buf, sizeof(buf)) < 0);
        check(crash_cmdline_args("abcdef", 6, 1, buf, 4) < 0);
}

static void test_id_and_packing(void) {
        Entry e;
        CrashEntry c, back;
        uint8_t packed[8192];
        uint64_t seconds;
        uint32_t pid;
        size_t n, used;

        check(crash_id_parse("1795936112-186", &seconds, &pid) == 0 && seconds == 1795936112 && pid == 186);
        check(crash_id_parse("01795936112-186", &seconds, &pid) < 0);
        check(crash_id_parse("1795936112-0", &seconds, &pid) < 0);
        check(crash_id_parse("1795936112-", &seconds, &pid) < 0);
        check(crash_id_parse("-186", &seconds, &pid) < 0);
        check(crash_id_parse("1795936112-186x", &seconds, &pid) < 0);
        genuine(&e);
        check(parse(&e, &c) == 0);
        c.stored = 1;
        c.stored_size = 3070764;
        n = crash_entry_pack(&c, packed, sizeof(packed));
        check(n > 0 && crash_entry_unpack(packed, n, &back, &used) == 0 && used == n);
        check(memcmp(&c, &back, offsetof(CrashEntry, id)) == 0 && strcmp(back.name, c.name) == 0 &&
              strcmp(back.file_name, c.file_name) == 0 && back.stored_size == 3070764);
        check(crash_entry_pack(&c, packed, 10) == 0);
        check(crash_entry_unpack(packed, n - 1, &back, &used) < 0);
}

int main(void) {
        run_test(test_genuine_entry_is_read);
        run_test(test_each_trusted_field_is_required);
        run_test(test_changed_credentials);
        run_test(test_core_file_name);
        run_test(test_cmdline);
        run_test(test_id_and_packing);
        return tap_finish();
}
