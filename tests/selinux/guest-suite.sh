#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Runs inside the SELinux guest (tests/selinux/guest.py puts it on the payload disk as run.sh),
# as unconfined root, in an enforcing system with dsagent's module loaded:
#   1. installs the project's build as its package does (the staged `meson install`, then
#      sysusers, tmpfiles, restorecon) with the host's .NET runtime and the test app;
#   2. starts dsagent.socket through systemd, and the test app as a service of its own
#      user with PrivateTmp=yes;
#   3. has an ops user run dsctl: ps, info, env, every dump type, trace, counters, stacks,
#      exceptions, logs, a runtime connecting in on a [[port]] suspended and resumed, an
#      [[on_start]] trace, dsctl port with the stock dotnet-trace, and a crash the kernel pipes to
#      systemd-coredump: listed (dsctl crashes) and its core copied (dsctl crash);
#   4. confirms the agent ran in dsagent_t;
#   5. a user confined by MAC (user_t) kept off a runtime's socket, and served by dsctl;
#   6. `dsagent --check-policy --egress` execs the egress process into dsagent_egress_t, which reads the
#      store's keys and reaches a store of the guest's own.
# Each step is a line "ok NAME" or "not ok NAME" in /results/steps; its output is in
# /results/NAME.out. The AVC records are judged on the host, from the audit log.
set -u
P=/payload
R=/results
mkdir -p $R
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
DOTNET=/usr/lib/dotnet/dotnet
APP=/opt/dstest/DsTestTarget.dll

step() { # NAME CMD...: run CMD, record its status under NAME
        local name=$1; shift
        if "$@" >"$R/$name.out" 2>&1; then echo "ok $name" >>$R/steps; else echo "not ok $name (exit $?)" >>$R/steps; fi
}
as_ops() { runuser -u dst-ops -- env -i PATH=/usr/bin:/bin HOME=/tmp "$@"; }
has() { grep -q -- "$2" "$R/$1.out"; } # NAME PATTERN: the step's output holds PATTERN
# SECONDS CMD...: wait until CMD succeeds, at most SECONDS (a later step fails when it never did)
wait_until() {
        local i n=$1; shift
        for i in $(seq $((n * 4))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
        return 1
}
ready() { journalctl -u "$1" --no-pager -o cat | grep -q '^ready pid='; } # UNIT: its app said it is ready
lists() { as_ops dsctl ps | grep -q -- "$1"; } # PATTERN: the ops user's dsctl ps shows it

# virt: kvm where the host gave the guest KVM, qemu where it is emulated (TCG)
echo "uname: $(uname -r)"; echo "virt: $(systemd-detect-virt)"; echo "getenforce: $(getenforce)"; id -Z
semodule -l | grep -w dsagent

# 1. Install
# /lib is a symlink to usr/lib on Debian 12: kept, not replaced by the staged directory
tar -C $P/stage -cf - . | tar -C / -xf - --keep-directory-symlink
mkdir -p /usr/lib/dotnet /opt/dstest /opt/dotnet-trace
cp -a $P/dotnet/. /usr/lib/dotnet/
cp -a $P/app/. /opt/dstest/
cp -a $P/dotnet-trace/. /opt/dotnet-trace/ 2>/dev/null
cp $P/policy.toml /etc/dsagent/policy.toml
systemd-sysusers
systemd-tmpfiles --create /usr/lib/tmpfiles.d/dsagent.conf
restorecon -R /usr/sbin/dsagent /usr/bin/dsctl /etc/dsagent /var/lib/dsagent /usr/lib/dotnet /opt /lib/systemd/system
ls -Z /usr/sbin/dsagent /usr/bin/dsctl /etc/dsagent/policy.toml
ls -dZ /var/lib/dsagent /var/lib/dsagent/dumps
useradd -r -M -d / -s /usr/sbin/nologin dst-svc
useradd -m -s /bin/bash -G dsagent dst-ops
systemctl daemon-reload

# 2. The agent and the app
cat >/etc/systemd/system/dstest.service <<EOF
[Service]
User=dst-svc
PrivateTmp=yes
Environment=DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1 DOTNET_gcServer=0
ExecStart=$DOTNET $APP --park-thread --throw-exceptions 20 --log-warnings 20 --emit-events 50 --meter-value 42
EOF
cat >/etc/systemd/system/dstest-port.service <<EOF
[Service]
User=dst-svc
PrivateTmp=yes
Environment=DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1 DOTNET_DiagnosticPorts=/run/dsagent/ports/default.sock,connect,suspend
ExecStart=$DOTNET $APP --startup-marker --emit-events 50
EOF
# The guest's CPU is emulated, tens of times slower than the host's and slower still while the host is
# busy: a runtime may take longer than the agent's 10 s to start a session there. The unit is the
# package's otherwise (what is checked here is what SELinux lets the agent do, not how fast).
mkdir -p /etc/systemd/system/dsagent.service.d
printf '[Service]\nExecStart=\nExecStart=/usr/sbin/dsagent --runtime-timeout 120\n' \
        >/etc/systemd/system/dsagent.service.d/emulated-cpu.conf
systemctl daemon-reload
step agent-start systemctl start dsagent.socket
for i in $(seq 60); do systemctl -q is-active dsagent.service && break; sleep 1; done
step agent-active systemctl is-active dsagent.service
ps -eZ | grep -E 'dsagent|dotnet' >$R/ps-Z.txt
step agent-in-dsagent_t grep -q 'dsagent_t.*dsagent$' $R/ps-Z.txt
step app-start systemctl start dstest.service
wait_until 120 ready dstest.service
PID=$(systemctl show -P MainPID dstest.service)
echo "app pid $PID"
ps -eZ | grep -E 'dsagent|dotnet' >$R/ps-Z.txt

# 3. The job, as the ops user
step ps as_ops dsctl ps
has ps "$PID" || echo "not ok ps-lists-app" >>$R/steps
step info as_ops dsctl info "$PID"
step info-unit as_ops dsctl info dstest.service
step env as_ops dsctl env "$PID"
for t in mini triage heap full; do
        step dump-$t as_ops dsctl dump "$PID" --type $t
done
step dumps as_ops dsctl dumps
ls -lZ /var/lib/dsagent/dumps >$R/dumps-ls.txt 2>&1
getfacl -R /var/lib/dsagent/dumps >$R/dumps-acl.txt 2>&1
# every dump: dsagent_dump_t, the rule's readers in its ACL, readable by the ops user (an ELF core)
step dumps-labelled sh -c '[ "$(ls -Z /var/lib/dsagent/dumps | grep -c dsagent_dump_t)" -eq 4 ]'
step dumps-acl-readers sh -c '[ "$(grep -c "^group:dst-ops:r--" '$R'/dumps-acl.txt)" -eq 4 ]'
# (dumps/ is 0711: root lists it, the ops user opens each by name)
read_dumps() { for f in $(ls /var/lib/dsagent/dumps); do as_ops head -c 4 "/var/lib/dsagent/dumps/$f" | grep -q ELF || return 1; done; }
step dumps-read-by-ops read_dumps
step trace as_ops sh -c "cd /tmp && dsctl trace $PID --duration 3 -o /tmp/t.nettrace && test -s /tmp/t.nettrace"
step counters as_ops dsctl counters "$PID" --duration 3 --interval 1
step stacks as_ops dsctl stacks "$PID"
has stacks ParkedInDsagentStacksProbe || echo "not ok stacks-show-parked-thread" >>$R/steps
step exceptions as_ops dsctl exceptions "$PID" --duration 3
step logs as_ops dsctl logs "$PID" --duration 3
# dsctl port and the stock dotnet-trace through it
if [ -x /opt/dotnet-trace/dotnet-trace ]; then
        rm -f /tmp/port.sock
        as_ops sh -c "dsctl port $PID --port-path /tmp/port.sock >/tmp/port.out 2>/tmp/port.err & echo \$! >/tmp/port.pid"
        wait_until 30 test -S /tmp/port.sock
        step port-dotnet-trace as_ops env DOTNET_ROOT=/usr/lib/dotnet DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1 \
                timeout 120 /opt/dotnet-trace/dotnet-trace collect --diagnostic-port /tmp/port.sock,connect \
                -o /tmp/port.nettrace --duration 00:00:00:03 --providers Dsagent-TestTarget
        as_ops sh -c 'kill $(cat /tmp/port.pid)' 2>/dev/null
        cp /home/dst-ops/port.* /tmp/port.* $R/ 2>/dev/null
else
        echo "not ok port-dotnet-trace (no dotnet-trace on the payload)" >>$R/steps
fi
# a runtime connecting in on the [[port]], suspended: the [[on_start]] trace, then resume
step port-app-start systemctl start dstest-port.service
PPID2=$(systemctl show -P MainPID dstest-port.service)
wait_until 120 lists "^$PPID2 .*\[port\]"
step port-ps as_ops dsctl ps
has port-ps "^$PPID2 .*\[port\]" || echo "not ok port-ps-lists-port-runtime" >>$R/steps
step port-resume as_ops dsctl resume "$PPID2"
wait_until 120 sh -c 'ls /var/lib/dsagent/dumps | grep -q "^trace\..*\.'$PPID2'\.on_start-svc-start\."'
step on-start-trace sh -c 'ls /var/lib/dsagent/dumps | grep "^trace\..*\.'$PPID2'\.on_start-svc-start\."'
# the runtime waited, suspended, until the [[on_start]] trace had started; its readers may read it
step port-suspended-until-on-start sh -c "journalctl -u dsagent.service --no-pager | grep 'pid $PPID2 .*resumed by the agent once \[\[on_start\]\] svc-start had started its trace'"
read_on_start() { for f in $(ls /var/lib/dsagent/dumps | grep "\.$PPID2\.on_start-"); do as_ops head -c 8 "/var/lib/dsagent/dumps/$f" | grep -q Nettrace || return 1; done; }
step on-start-trace-read-by-ops read_on_start
step port-app-stop systemctl stop dstest-port.service
step app-stop systemctl stop dstest.service

# A crash, through the guest's own kernel: core_pattern pipes the core of the app, dead of an unhandled
# exception, to systemd-coredump, which stores it and logs it; the ops user lists it and gets its core
cat /proc/sys/kernel/core_pattern >$R/core_pattern.txt
step crash-core-pattern grep -q '^|/lib/systemd/systemd-coredump' $R/core_pattern.txt
cat >/etc/systemd/system/dstest-crash.service <<EOF
[Service]
User=dst-svc
Environment=DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1
ExecStart=$DOTNET $APP --crash-when /run/dstest-crash-go throw
EOF
systemctl daemon-reload
step crash-app-start systemctl start dstest-crash.service
wait_until 120 ready dstest-crash.service
CPID=$(systemctl show -P MainPID dstest-crash.service)
touch /run/dstest-crash-go
# the kernel hands systemd-coredump the app's whole core (tens of MiB), compressed under an emulated CPU
stored() { coredumpctl list --no-pager --no-legend "$CPID" 2>/dev/null | grep -q present; }
wait_until 300 stored
step crash-coredumpctl coredumpctl list --no-pager --no-legend "$CPID"
step crash-listed as_ops dsctl crashes --json
has crash-listed "\"pid\":$CPID," || echo "not ok crash-listed-shows-the-crash" >>$R/steps
CID=$(python3 -c 'import json,sys; print(next(c["id"] for c in json.load(open(sys.argv[1])) if c["pid"] == int(sys.argv[2])))' \
        $R/crash-listed.out "$CPID" 2>/dev/null)
echo "crash id $CID of pid $CPID"
step crash-core as_ops sh -c "cd /tmp && timeout 600 dsctl crash $CID -o /tmp/crash.core && head -c 4 /tmp/crash.core | grep -q ELF"
ls -lZ /var/lib/systemd/coredump /var/lib/dsagent/dumps >$R/crash-ls.txt 2>&1
ls -lZ /var/lib/dsagent/dumps >$R/dumps-ls.txt 2>&1
getfacl -R /var/lib/dsagent/dumps >$R/dumps-acl.txt 2>&1

# 5. MAC: a user mapped to the confined SELinux user user_u runs a .NET app of their own, whose
# socket's file modes let them in; in user_t they are kept off it, while dsctl through the agent
# serves them. dst-mal is mapped to user_u (semanage login) and logs in through login(1).
useradd -m -s /bin/bash -G dsagent dst-mal
step mac-semanage-login semanage login -a -s user_u dst-mal
# (the mapping as login's pam_selinux reads it; `semanage login -l` would take as long again under TCG)
cp /etc/selinux/default/seusers $R/seusers.txt
printf '[Service]\nUser=dst-mal\nEnvironment=DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1\nExecStart=%s %s\n' \
        "$DOTNET" "$APP" >/etc/systemd/system/dstest-mal.service
systemctl daemon-reload
step mac-app-start systemctl start dstest-mal.service
wait_until 120 ready dstest-mal.service
MPID=$(systemctl show -P MainPID dstest-mal.service)
ls -lZ /tmp/dotnet-diagnostic-$MPID-* >$R/mac-socket.txt 2>&1
cp $P/connect.py /usr/local/bin/connect.py
chmod 755 /usr/local/bin/connect.py
restorecon /usr/local/bin/connect.py
# dst-mal's commands run in a real login: getty on tty2 logs them in (agetty --autologin), and
# login(1)'s pam_selinux gives the session the context semanage login maps dst-mal to. Their
# .bash_profile does the work once and writes its output to ~/mal.
M=/home/dst-mal/mal
mkdir -p $M
cat >/home/dst-mal/.bash_profile <<EOF
if [ ! -e $M/done ]; then
        exec 2>$M/profile.log
        id -Z >$M/id.txt
        python3 /usr/local/bin/connect.py $MPID >$M/connect.out 2>&1; echo \$? >$M/connect.rc
        dsctl info $MPID >$M/info.out 2>&1; echo \$? >$M/info.rc
        dsctl stacks $MPID >$M/stacks.out 2>&1; echo \$? >$M/stacks.rc
        dsctl dump $MPID --type mini -o $M/own.dmp >$M/dump.out 2>&1; echo \$? >$M/dump.rc
        head -c 4 $M/own.dmp >$M/own.dmp.head 2>&1
        touch $M/done
fi
exit
EOF
chown -R dst-mal: $M
chown dst-mal: /home/dst-mal/.bash_profile
# -F: the SELinux user too, user_u (semanage login remade the home's file contexts for it). useradd
# labelled the home unconfined_u's, and the policy's UBAC constraint keeps a user_u process off
# another SELinux user's files: without -F the login's shell cannot read its own profile
restorecon -RF /home/dst-mal
mkdir -p /etc/systemd/system/getty@tty2.service.d
printf '[Service]\nExecStart=\nExecStart=-/sbin/agetty --autologin dst-mal --noclear %%I linux\n' \
        >/etc/systemd/system/getty@tty2.service.d/autologin.conf
systemctl daemon-reload
systemctl start getty@tty2.service
for i in $(seq 120); do [ -e $M/done ] && break; sleep 1; done
# what the login's terminal showed, for when it ran nothing
setterm --dump 2 --file $R/mac-tty2.txt 2>/dev/null || cat /dev/vcs2 >$R/mac-tty2.txt 2>&1
systemctl stop getty@tty2.service
ls -laZ /home/dst-mal $M >$R/mac-home.txt 2>&1
for f in id.txt connect.out info.out stacks.out dump.out profile.log; do cp $M/$f $R/mac-$f 2>/dev/null; done
cp $M/*.rc $R/ 2>/dev/null
step mac-user_t-id grep -q ':user_r:user_t:' $M/id.txt
# file modes let dst-mal in: unconfined, the same user connects
step mac-unconfined-connects runuser -u dst-mal -- python3 /usr/local/bin/connect.py "$MPID"
# ... and in user_t, MAC keeps them off: refused by the kernel with EACCES (the AVC is judged on the host)
step mac-user_t-refused grep -q '^refused .*Permission denied' $M/connect.out
step mac-dsctl-info grep -qx 0 $M/info.rc
step mac-dsctl-stacks grep -qx 0 $M/stacks.rc
# dsctl dump -o: the copy comes from the dump the agent opened for them and handed over (an ELF core)
step mac-dsctl-dump-copy sh -c "grep -qx 0 $M/dump.rc && grep -q ELF $M/own.dmp.head"
step mac-app-stop systemctl stop dstest-mal.service

# 6. Egress (docs/egress-plan.md): `dsagent --check-policy --egress`, started by systemd as the agent is
# (so in dsagent_t), execs /usr/libexec/dsagent-egress, which must run in dsagent_egress_t, read the
# store's keys (dsagent_egress_cred_t) from /etc/dsagent/egress or from the unit's credentials, and reach
# the store. The store, egress-store.py on 127.0.0.1:8080 (http_cache_port_t: a port the module lets the
# egress process reach), notes who connected, by the kernel's socket tables, while it is connected,
# and answers nothing (the check then says "unreachable"). On its third connection it kills the
# agent and notes whether the egress process went with it (egress-pdeath.txt: SELinux clears
# PR_SET_PDEATHSIG on a domain transition, and dsagent-egress sets it again itself).
EGRESS_SECRET=guest-egress-secret-never-shown-5c1d
mkdir -p /etc/dsagent/egress
chmod 700 /etc/dsagent/egress
printf 'access_key_id = "AKIAGUESTEXAMPLE"\nsecret_access_key = "%s"\n' "$EGRESS_SECRET" \
        >/etc/dsagent/egress/central.credentials
chmod 600 /etc/dsagent/egress/central.credentials
for kind in file:/etc/dsagent/egress/central.credentials systemd:s3-central; do
        printf '[egress.central]\nendpoint = "http://127.0.0.1:8080"\nbucket = "dsagent-guest"\nregion = "us-east-1"\ncredentials = "%s"\n' \
                "$kind" >/etc/dsagent/egress-check-${kind%%:*}.toml
done
restorecon -R /etc/dsagent /usr/libexec/dsagent-egress
ls -lZ /usr/libexec/dsagent-egress /etc/dsagent/egress/central.credentials >$R/egress-labels.txt 2>&1
step egress-exec-labelled grep -q 'dsagent_egress_exec_t.*/usr/libexec/dsagent-egress' $R/egress-labels.txt
step egress-keys-labelled grep -q 'dsagent_egress_cred_t.*central.credentials' $R/egress-labels.txt
cp $P/egress-store.py /usr/local/bin/egress-store.py
restorecon /usr/local/bin/egress-store.py
python3 /usr/local/bin/egress-store.py 8080 $R 3 >$R/egress-store.log 2>&1 &
wait_until 30 test -e $R/egress-store.listening
egress_check() { # N UNIT-PROPERTY...: one check as a transient service; its output in egress-check-N.out
        local n=$1; shift
        systemd-run --wait --quiet --unit=dsagent-egress-check-$n "$@"
        journalctl -u dsagent-egress-check-$n --no-pager -o cat >$R/egress-check-$n.out 2>&1
}
egress_check 1 /usr/sbin/dsagent --check-policy --egress /etc/dsagent/egress-check-file.toml
# keys as a systemd credential: on a ramfs of the unit's, ramfs_t as every unit's are, under the module's
# boolean (off by default; set here for this boot only)
step egress-boolean-on setsebool dsagent_egress_read_systemd_credentials on
egress_check 2 -p LoadCredential=s3-central:/etc/dsagent/egress/central.credentials \
        /usr/sbin/dsagent --check-policy --egress /etc/dsagent/egress-check-systemd.toml
step egress-boolean-off setsebool dsagent_egress_read_systemd_credentials off
# (KillMode=process: systemd, once the killed agent's unit ends, leaves the rest of its cgroup alone, so
# that only the death signal, or the egress process's own watch, can end it)
egress_check 3 -p KillMode=process /usr/sbin/dsagent --check-policy --egress /etc/dsagent/egress-check-file.toml
# the store writes what became of the egress process at most 20 s after it killed the agent; it died with it
# (the exec into dsagent_egress_t cleared the death signal the agent set: the egress process sets it again)
wait_until 30 test -s $R/egress-pdeath.txt
step egress-died-with-its-agent grep -q '^egress [0-9]* died with its agent' $R/egress-pdeath.txt
systemd-run --wait --quiet -p LoadCredential=s3-central:/etc/dsagent/egress/central.credentials \
        --unit=dsagent-egress-credentials-ls sh -c 'ls -laZ "$CREDENTIALS_DIRECTORY" /run/credentials'
journalctl -u dsagent-egress-credentials-ls --no-pager -o cat >$R/egress-credentials-ls.txt 2>&1
step egress-systemd-credentials-ramfs grep -q 'ramfs_t:s0 .* s3-central$' $R/egress-credentials-ls.txt
for n in 1 2 3; do
        # the process that connected to the store is the egress process's server, in its domain, its supervisor's child
        # (the same domain), which the agent (in dsagent_t) started
        step egress-$n-in-dsagent_egress_t grep -q 'comm=dsagent-egress label=system_u:system_r:dsagent_egress_t:s0 .* parent_comm=dsagent-egress parent_label=system_u:system_r:dsagent_egress_t:s0 .* agent_comm=dsagent agent_label=system_u:system_r:dsagent_t:s0' $R/egress-peer.$n.txt
        # it read the keys: the request is signed with the key id
        step egress-$n-signed grep -q 'Authorization: AWS4-HMAC-SHA256 Credential=AKIAGUESTEXAMPLE/' $R/egress-request.$n.txt
done
step egress-check-said-unreachable grep -q '\[egress.central\] unreachable: .*Empty reply from server' $R/egress-check-1.out
step egress-secret-shown-nowhere sh -c "! grep -rq '$EGRESS_SECRET' $R/egress-check-*.out $R/egress-request.*.txt"
cat $R/egress-pdeath.txt 2>/dev/null

# An upload under enforcing SELinux: the ops rule names a store (its egress process starts at the agent's
# start, so the agent is restarted), and the ops user's mini dump is handed to it. The unit has no network
# (PrivateNetwork=yes): the upload's child, forked in dsagent_egress_t, finds nothing on the port and the
# outcome is recorded unavailable, the dump kept. What it did on the way (fork, its socket to its parent,
# connect, the keys read, its end reaped) must raise no AVC denial (no_avc_denial_for_dsagent).
cp /etc/dsagent/policy.toml $R/policy-before-egress.toml
sed -i 's/^readers = \["group:dst-ops"\]$/&\negress = "guest"/' /etc/dsagent/policy.toml
printf '\n[egress.guest]\nendpoint = "http://127.0.0.1:8080"\nbucket = "dsagent-guest"\nregion = "us-east-1"\ncredentials = "file:/etc/dsagent/egress/central.credentials"\nattempts = 1\nretries = 0\n' \
        >>/etc/dsagent/policy.toml
step egress-policy-names-the-store grep -q '^egress = "guest"$' /etc/dsagent/policy.toml
step egress-agent-restart systemctl restart dsagent.service
# the app again (stopped after the job above)
step egress-app-start systemctl start dstest.service
EPID=$(systemctl show -P MainPID dstest.service)
# its own "ready" (the first run's is in the journal too)
wait_until 120 sh -c "journalctl -u dstest.service --no-pager -o cat | grep -q '^ready pid=$EPID'"
step egress-dump as_ops dsctl dump "$EPID" --type mini
egress_outcome() { journalctl -u dsagent.service MESSAGE_ID=69c19926015d41838f93007ed7cc398e DSAGENT_EGRESS_EVENT=outcome -o export; }
wait_until 60 sh -c "journalctl -u dsagent.service MESSAGE_ID=69c19926015d41838f93007ed7cc398e DSAGENT_EGRESS_EVENT=outcome -o export | grep -q DSAGENT_EGRESS_RESULT="
egress_outcome >$R/egress-upload-outcome.txt 2>&1
step egress-upload-recorded-unavailable grep -q '^DSAGENT_EGRESS_RESULT=unavailable$' $R/egress-upload-outcome.txt
step egress-upload-kept grep -q '^DSAGENT_EGRESS_LOCAL=kept$' $R/egress-upload-outcome.txt
ps -eZ | grep dsagent-egress >$R/egress-upload-ps-Z.txt 2>&1
step egress-upload-process-in-its-domain grep -q 'dsagent_egress_t' $R/egress-upload-ps-Z.txt
# and as its own user, made by systemd-sysusers from the installed sysusers.d file, never root
ps -eo user:20,label,comm | grep dsagent-egress >$R/egress-upload-user.txt 2>&1
step egress-upload-process-its-user grep -q '^dsagent-egress .*dsagent_egress_t' $R/egress-upload-user.txt
step egress-app-stop systemctl stop dstest.service

step agent-stop timeout 60 systemctl stop dsagent.socket dsagent.service
journalctl -u dsagent.service --no-pager >$R/dsagent-journal.txt 2>&1
exit 0
