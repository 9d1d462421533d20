# SPDX-License-Identifier: LGPL-2.1-or-later
# Sourced by demo.sh and test.sh: the users and groups a script makes for its
# own use, and removes again when it ends (scratch_cleanup, from its EXIT
# trap). A user made here says so in its comment (GECOS) field; a user or
# group of the same name that somebody else made is never used, changed or
# removed: the script stops and says so. Needs root.

SCRATCH_COMMENT="dsagent scratch user"
SCRATCH_LOCK_DIR=/run/dsagent-scratch
scratch_users=()
scratch_groups=()
declare -gA scratch_lock_fds=()

# Scripts that run side by side (two test runs) share the scratch users and
# groups of one name: each holds a shared lock on the name while it uses it,
# and only the last to end removes it. Before, the first run to end removed
# them under the others' feet (their dsctl ran without dst-ops). A lock per
# name, so that the demo a test run starts removes its own users.
scratch_hold() {
        local fd
        [ -n "${scratch_lock_fds[$1]:-}" ] && return 0
        mkdir -p "$SCRATCH_LOCK_DIR"
        exec {fd}>>"$SCRATCH_LOCK_DIR/$1.lock"
        flock -s "$fd"
        scratch_lock_fds[$1]=$fd
}

# scratch_held_elsewhere NAME: whether another run holds NAME too.
scratch_held_elsewhere() {
        local fd=${scratch_lock_fds[$1]:-}
        [ -n "$fd" ] && ! flock -n -x "$fd"
}

scratch_die() {
        echo "$(basename "$0"): $*" >&2
        exit 1
}

# Whether user $1 is one of ours: made here (its comment says so), or by an
# earlier version of these scripts or of the test harness, which made users
# with no comment, no home directory and no login shell.
scratch_user_is_ours() {
        local entry comment home shell
        entry=$(getent passwd "$1") || return 1
        IFS=: read -r _ _ _ _ comment home shell <<<"$entry"
        [ "$comment" = "$SCRATCH_COMMENT" ] && return 0
        [ -z "$comment" ] && [ ! -e "$home" ] && [ "$shell" = /usr/sbin/nologin ]
}

# Whether group $1 is one of ours: none but scratch users are in it.
scratch_group_is_ours() {
        local entry members member
        entry=$(getent group "$1") || return 1
        members=${entry##*:}
        for member in ${members//,/ }; do
                scratch_user_is_ours "$member" || return 1
        done
}

# scratch_free_name BASE: BASE, else BASE2, BASE3, ... up to BASE9: the first
# name that no user or group has, or that a user of ours has.
scratch_free_name() {
        local name n
        for n in "" 2 3 4 5 6 7 8 9; do
                name=$1$n
                if scratch_user_is_ours "$name" ||
                   { ! getent passwd "$name" >/dev/null && ! getent group "$name" >/dev/null; }; then
                        echo "$name"
                        return 0
                fi
        done
        scratch_die "no free user name like $1 (${1}2 to ${1}9 are taken too)"
}

# scratch_user NAME [useradd options]: the user NAME, made now (or left over
# from a run that could not clean up), removed by scratch_cleanup.
scratch_user() {
        local name=$1
        shift
        scratch_hold "$name"
        if getent passwd "$name" >/dev/null; then
                scratch_user_is_ours "$name" ||
                        scratch_die "a user $name exists that these scripts did not make; rename or remove it first"
                usermod --comment "$SCRATCH_COMMENT" "$name"
        else
                useradd --comment "$SCRATCH_COMMENT" --no-create-home --shell /usr/sbin/nologin "$@" "$name"
        fi
        scratch_users+=("$name")
}

# scratch_subordinate_ids NAME: gives scratch user NAME 65536 subordinate uids and gids when it has
# none (useradd gives them only where /etc/subuid existed), so that the tests that run beside each
# other never edit /etc/subuid or /etc/subgid themselves (harness.subordinate_range); userdel takes
# them away with the user.
scratch_subordinate_ids() {
        local first
        grep -q "^$1:" /etc/subuid 2>/dev/null && grep -q "^$1:" /etc/subgid 2>/dev/null && return 0
        # past every range either file gives anyone, and never below useradd's usual ones
        first=$(cat /etc/subuid /etc/subgid 2>/dev/null |
                awk -F: 'BEGIN { end = 3000000 } NF == 3 && $2 + $3 > end { end = $2 + $3 } END { print end }')
        usermod --add-subuids "$first-$((first + 65535))" --add-subgids "$first-$((first + 65535))" "$1"
}

# scratch_group NAME: the group NAME, made now if missing, removed by scratch_cleanup.
scratch_group() {
        scratch_hold "$1"
        if getent group "$1" >/dev/null; then
                scratch_group_is_ours "$1" ||
                        scratch_die "a group $1 exists with members these scripts did not make;" \
                                    "rename or remove it first"
        else
                groupadd "$1"
        fi
        scratch_groups+=("$1")
}

# Removes the users and groups made or taken over here, unless another run
# still holds them (scratch_hold); a user whose processes still run is left,
# with a word on stderr.
scratch_cleanup() {
        local name why
        for name in "${scratch_users[@]}"; do
                getent passwd "$name" >/dev/null || continue
                if scratch_held_elsewhere "$name"; then
                        echo "$(basename "$0"): another run still uses the user $name: left for it to remove" >&2
                        continue
                fi
                # userdel's own words name the cause: "currently used by process N" when a process of its uid runs
                why=$(userdel "$name" 2>&1) ||
                        echo "$(basename "$0"): could not remove the user $name: ${why:-userdel failed}" >&2
        done
        for name in "${scratch_groups[@]}"; do
                getent group "$name" >/dev/null || continue
                if scratch_held_elsewhere "$name"; then
                        echo "$(basename "$0"): another run still uses the group $name: left for it to remove" >&2
                        continue
                fi
                why=$(groupdel "$name" 2>&1) ||
                        echo "$(basename "$0"): could not remove the group $name: ${why:-groupdel failed}" >&2
        done
        scratch_users=()
        scratch_groups=()
}
