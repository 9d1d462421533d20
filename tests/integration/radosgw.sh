#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# A real S3 store for the egress tests: Ceph's radosgw (Debian 12: Ceph 16.2.15) on a cluster of one
# monitor and one OSD, every daemon bound to 127.0.0.1, started from an empty directory and stopped
# again. Pacific's radosgw has no backend but RADOS (dbstore came in 17.x), so the smallest real store
# is these three daemons; ceph-mgr is not needed for S3. Facts and pitfalls: ../shared/reference/s3-ceph.md
# in the project's shared folder; why each setting is there is said beside it below.
#
#   radosgw.sh start DIR   DIR must be empty or missing. Prints, once the store answers S3 and holds the
#                          user and the bucket, one line of shell assignments:
#                          endpoint=http://127.0.0.1:PORT access_key=... secret_key=... bucket=... region=...
#                          The same is kept in DIR/store.env. On failure the daemons started are stopped
#                          and the logs' tails are printed (DIR/log/*.log keep them whole).
#   radosgw.sh stop DIR    radosgw, then the osd, then the mon (stopping radosgw and the osd at once hung
#                          until SIGKILL); each gets SIGTERM and, if still there after its bound, SIGKILL.
#   radosgw.sh stop-rgw DIR, start-rgw DIR
#                          radosgw alone, stopped and started again on the same port (the store "down" and
#                          back, for the uploader's retries); start-rgw returns once it answers.
#   radosgw.sh make-ca DIR A test CA, made with openssl in DIR (which must not exist): DIR/ca.pem (the
#                          certificate, what a client trusts) and DIR/ca.key. Prints DIR/ca.pem.
#
# Environment: RADOSGW_STORE=bluestore (default: objects on a sparse file in DIR, the daemons' memory stays
# small whatever is written) or memstore (objects in the osd's RAM: starts a few seconds sooner, for small
# objects only). RADOSGW_BUCKET (default dsagent-test), RADOSGW_REGION (default us-east-1).
# RADOSGW_DNS_NAME=NAME (e.g. s3.test): radosgw's `rgw dns name`, so that it takes a request to
# BUCKET.NAME[:PORT]/KEY as the bucket's (virtual-host addressing); resolving the name is the client's affair.
# RADOSGW_TLS=1: a test CA in DIR/tls (make-ca) signs a server certificate for 127.0.0.1 (and NAME and
# *.NAME with RADOSGW_DNS_NAME), and radosgw also serves HTTPS on a port of its own (beast's ssl_endpoint);
# the start's line then adds https_endpoint=https://127.0.0.1:PORT2 ca_file=DIR/tls/ca.pem. The plain
# endpoint stays (the fixture's own waits and admin calls use it).
# Needs the packages radosgw ceph-mon ceph-osd (scripts/install-deps.sh) and root (the daemons stay root:
# nothing here passes --setuser).
set -euo pipefail

die() { echo "radosgw.sh: $*" >&2; exit 1; }

# A free TCP port on 127.0.0.1, from the kernel; the tiny window before the daemon binds it is accepted
# (a port taken meanwhile makes the start fail with the daemon's own message, not a wrong store).
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Bounds of the waits below. Each waits for its event and goes on the moment it comes; a bound only
# ends a hang. Measured on a shared 2-core machine: the whole start takes 7-18 s.
START_BOUND=120   # the store answering S3 from a cold start (mon, osd and rgw's first pools)
STOP_BOUND=30     # one daemon exiting after SIGTERM (about 1.5 s for all three)

stop_daemon() { # DIR NAME
        local pidfile=$1/run/$2.pid pid i
        [ -f "$pidfile" ] || return 0
        pid=$(cat "$pidfile")
        # a pid file only names our daemon while that process still runs the daemon's binary with our conf
        if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$1/ceph.conf"; then
                kill -TERM "$pid" 2>/dev/null || true
                for ((i = 0; i < STOP_BOUND * 10; i++)); do
                        kill -0 "$pid" 2>/dev/null || break
                        sleep 0.1
                done
                if kill -0 "$pid" 2>/dev/null; then
                        echo "radosgw.sh: $2 (pid $pid) still there ${STOP_BOUND}s after SIGTERM: SIGKILL" >&2
                        kill -KILL "$pid" 2>/dev/null || true
                        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
                fi
        fi
        rm -f "$pidfile"
}

stop_all() { # DIR
        stop_daemon "$1" rgw
        stop_daemon "$1" osd
        stop_daemon "$1" mon
}

# A daemon in the foreground (-f), its pid kept; its stdout and stderr go to its own file.
spawn() { # DIR NAME ARGV...
        local dir=$1 name=$2
        shift 2
        setsid "$@" </dev/null >>"$dir/log/$name.out" 2>&1 &
        echo $! >"$dir/run/$name.pid"
}

alive_or_die() { # DIR NAME
        local pid
        pid=$(cat "$1/run/$2.pid")
        kill -0 "$pid" 2>/dev/null || { tail -n 20 "$1/log/$2.out" "$1"/log/*"$2"*.log >&2 2>/dev/null || true
                                         die "$2 exited during start-up"; }
}

# A test CA: a self-signed P-256 certificate (openssl's v3_ca: CA:TRUE), valid two days (a test store lives
# minutes)
make_ca() { # DIR
        [ ! -e "$1" ] || die "$1 exists"
        mkdir -p "$1"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
                -subj "/CN=dsagent test CA $(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')" \
                -keyout "$1/ca.key" -out "$1/ca.pem" 2>"$1/openssl.out" ||
                { cat "$1/openssl.out" >&2; die "openssl could not make a CA in $1"; }
        echo "$1/ca.pem"
}

# radosgw's certificate, signed by a CA of make_ca in DIR/tls, for 127.0.0.1 and, given a name, NAME and *.NAME
# (every bucket's host under virtual-host addressing)
make_server_certificate() { # DIR NAME
        local tls=$1/tls names="IP:127.0.0.1"
        [ -z "$2" ] || names="$names,DNS:$2,DNS:*.$2"
        make_ca "$tls" >/dev/null
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=radosgw" \
                -keyout "$tls/server.key" -out "$tls/server.csr" 2>>"$tls/openssl.out" &&
        printf 'subjectAltName = %s\nbasicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth\n' "$names" \
                >"$tls/server.ext" &&
        openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial -days 2 \
                -extfile "$tls/server.ext" -out "$tls/server.pem" 2>>"$tls/openssl.out" ||
                { cat "$tls/openssl.out" >&2; die "openssl could not make radosgw's certificate"; }
}

# radosgw opens its port once the osd is up and rgw's pools exist
wait_for_rgw() { # DIR ENDPOINT
        local i
        for ((i = 0; i < START_BOUND * 10; i++)); do
                curl -s -o /dev/null "$2/" && return 0
                alive_or_die "$1" mon; alive_or_die "$1" osd; alive_or_die "$1" rgw
                sleep 0.1
        done
        curl -s -o /dev/null "$2/" || die "radosgw did not answer on $2 within ${START_BOUND}s"
}

# radosgw alone, again, on its port: the store back after stop-rgw (its objects and uploads are in RADOS)
start_rgw() { # DIR
        local endpoint
        endpoint=$(sed -n 's/^endpoint=\([^ ]*\) .*/\1/p' "$1/store.env")
        [ -n "$endpoint" ] || die "$1/store.env names no endpoint"
        [ ! -f "$1/run/rgw.pid" ] || die "radosgw of $1 is running"
        spawn "$1" rgw radosgw -c "$1/ceph.conf" -f -n client.rgw.a
        wait_for_rgw "$1" "$endpoint"
}

start() { # DIR
        local dir=$1
        [ ! -e "$dir" ] || [ -z "$(ls -A "$dir")" ] || die "$dir is not empty"
        mkdir -p "$dir"
        dir=$(cd "$dir" && pwd)
        mkdir -p "$dir"/{run,log,mon,osd,rgw}
        # whatever ends the start early (die, a failed command under set -e) stops what it started
        STARTING=$dir
        trap '[ -z "$STARTING" ] || stop_all "$STARTING"' EXIT

        local store=${RADOSGW_STORE:-bluestore} bucket=${RADOSGW_BUCKET:-dsagent-test}
        local region=${RADOSGW_REGION:-us-east-1}
        local dns_name=${RADOSGW_DNS_NAME:-} tls=${RADOSGW_TLS:-}
        local fsid mon_v2 mon_v1 rgw_port conf=$dir/ceph.conf frontends rgw_extra="" tls_port="" tls_fields=""
        fsid=$(cat /proc/sys/kernel/random/uuid)
        mon_v2=$(free_port); mon_v1=$(free_port); rgw_port=$(free_port)
        frontends="beast endpoint=127.0.0.1:$rgw_port"
        if [ -n "$tls" ]; then
                make_server_certificate "$dir" "$dns_name"
                tls_port=$(free_port)
                frontends="$frontends ssl_endpoint=127.0.0.1:$tls_port ssl_certificate=$dir/tls/server.pem"
                frontends="$frontends ssl_private_key=$dir/tls/server.key"
                tls_fields=" https_endpoint=https://127.0.0.1:$tls_port ca_file=$dir/tls/ca.pem"
        fi
        [ -z "$dns_name" ] || rgw_extra="rgw dns name = $dns_name"
        case $store in
        bluestore) objectstore="osd objectstore = bluestore
bluestore block create = true
bluestore block size = 10737418240" ;; # a sparse file: 10 GiB of room, only what is written takes disk
        memstore) objectstore="osd objectstore = memstore
memstore device bytes = 2147483648" ;;
        *) die "RADOSGW_STORE is bluestore or memstore, not '$store'" ;;
        esac

        cat >"$conf" <<EOF
[global]
fsid = $fsid
mon initial members = a
# loopback only, IPv4 only: nothing of the test store is reachable from elsewhere
mon host = [v2:127.0.0.1:$mon_v2,v1:127.0.0.1:$mon_v1]
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind ipv6 = false
# cephx: radosgw never opens its port with auth none (it loops on get_initial_auth_request -13)
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $dir/keyring
# everything of this store under DIR, nothing in /var/lib/ceph, /var/log/ceph or /run/ceph
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
mon cluster log file = $dir/log/cluster.log
mon data = $dir/mon/\$cluster-\$id
osd data = $dir/osd/\$cluster-\$id
# one copy of everything: a single osd
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
osd crush chooseleaf type = 0
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
# without it the mon proposes once a second and the start takes 20-23 s
paxos propose interval = 0.1
# a test store: no warnings about what a real cluster would need
mon warn on pool no redundancy = false
$objectstore

[client.rgw.a]
rgw frontends = $frontends
rgw data = $dir/rgw
$rgw_extra
EOF

        # one keyring for all: the mon imports every key in it at mkfs
        ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
        ceph-authtool "$dir/keyring" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' \
                --cap mgr 'allow *' >/dev/null
        ceph-authtool "$dir/keyring" --gen-key -n osd.0 --cap mon 'allow profile osd' --cap osd 'allow *' \
                --cap mgr 'allow profile osd' >/dev/null
        ceph-authtool "$dir/keyring" --gen-key -n client.rgw.a --cap mon 'allow rw' --cap osd 'allow rwx' >/dev/null
        monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_v2,v1:127.0.0.1:$mon_v1]" \
                "$dir/monmap" >/dev/null
        ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring" >>"$dir/log/mkfs.out" 2>&1
        spawn "$dir" mon ceph-mon -c "$conf" -f -i a

        local osd_uuid osd_id
        osd_uuid=$(cat /proc/sys/kernel/random/uuid)
        # the mon answers once it has formed its quorum of one; the command's own timeout bounds the wait
        osd_id=$(ceph -c "$conf" --connect-timeout "$START_BOUND" osd new "$osd_uuid" 2>>"$dir/log/mkfs.out") ||
                { alive_or_die "$dir" mon; die "the mon gave no osd id"; }
        [ "$osd_id" = 0 ] || die "the new osd is osd.$osd_id, not osd.0"
        mkdir -p "$dir/osd/ceph-0"
        ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osd_uuid" >>"$dir/log/mkfs.out" 2>&1 ||
                { tail -n 20 "$dir/log/mkfs.out" >&2; die "ceph-osd --mkfs failed"; }
        spawn "$dir" osd ceph-osd -c "$conf" -f -i 0
        spawn "$dir" rgw radosgw -c "$conf" -f -n client.rgw.a

        local endpoint=http://127.0.0.1:$rgw_port
        wait_for_rgw "$dir" "$endpoint"

        local access_key secret_key
        access_key=DSAGENT$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n' | tr a-f A-F)
        secret_key=$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')
        radosgw-admin -c "$conf" -n client.admin user create --uid=dsagent-test --display-name="dsagent test" \
                --access-key="$access_key" --secret="$secret_key" >>"$dir/log/admin.out" 2>&1 ||
                { tail -n 20 "$dir/log/admin.out" >&2; die "radosgw-admin user create failed"; }
        # the bucket through S3 itself, signed by curl's SigV4 (the signing the agent's uploader uses).
        # curl 7.88 sends no x-amz-content-sha256 of its own, which S3's SigV4 requires (radosgw answers
        # SignatureDoesNotMatch without it): the caller adds it, and curl signs it. This one is the
        # sha256 of the empty body.
        local status
        status=$(curl -s -o "$dir/log/bucket.out" -w '%{http_code}' -X PUT \
                -H 'x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' \
                --aws-sigv4 "aws:amz:$region:s3" --user "$access_key:$secret_key" "$endpoint/$bucket")
        [ "$status" = 200 ] || { cat "$dir/log/bucket.out" >&2; die "creating bucket $bucket: HTTP $status"; }

        STARTING=
        printf 'endpoint=%s access_key=%s secret_key=%s bucket=%s region=%s%s\n' \
                "$endpoint" "$access_key" "$secret_key" "$bucket" "$region" "$tls_fields" | tee "$dir/store.env"
}

case ${1:-} in
start) [ $# -eq 2 ] || die "usage: radosgw.sh start DIR"; start "$2" ;;
stop) [ $# -eq 2 ] || die "usage: radosgw.sh stop DIR"; stop_all "$(cd "$2" && pwd)" ;;
stop-rgw) [ $# -eq 2 ] || die "usage: radosgw.sh stop-rgw DIR"; stop_daemon "$(cd "$2" && pwd)" rgw ;;
start-rgw) [ $# -eq 2 ] || die "usage: radosgw.sh start-rgw DIR"; start_rgw "$(cd "$2" && pwd)" ;;
make-ca) [ $# -eq 2 ] || die "usage: radosgw.sh make-ca DIR"; make_ca "$2" ;;
*) die "usage: radosgw.sh start|stop|stop-rgw|start-rgw|make-ca DIR" ;;
esac
