# SPDX-License-Identifier: LGPL-2.1-or-later
# bash completion for dsctl(1)                                  -*- shell-script -*-
#
# Targets are completed from the units systemd runs, not by asking the agent:
# every request to the agent is recorded, and a Tab is no request. Only
# "dumps --remove" asks it, for the dumps to name.

_dsctl_units() {
        systemctl list-units --type=service,scope --state=running --no-legend --plain 2>/dev/null |
                while read -r unit _; do printf '%s\n' "$unit"; done
}

_dsctl_dumps() {
        dsctl ${1:+--socket "$1"} dumps 2>/dev/null | while read -r line; do
                case $line in TIME*) ;; *) printf '%s\n' "${line##* }" ;; esac
        done
}

_dsctl() {
        local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
        local commands="ps info env explain dump dumps collect crashes crash trace flame convert counters stacks gcdump exceptions logs resume port exec help"
        local common="--socket --agent-socket --json --quiet --help --version"
        local policy_commands="ps info env dump gcdump trace counters stacks exceptions logs resume perfmap setenv startup-hook profiler crashes"
        local -A options=(
                [ps]="" [info]="" [env]="" [resume]="" [help]=""
                [explain]="--type --profile --providers --as --duration"
                [dump]="--type --output"
                [dumps]="--remove"
                [crashes]="--since"
                [crash]="--output"
                [trace]="--profile --providers --duration --buffer-mb --format --output --nettrace"
                [flame]="--duration --profile --output"
                [convert]="--format --output"
                [counters]="--counters --interval --refresh-interval --duration --format --output --watch"
                [stacks]="--format"
                [gcdump]="--output --report --sort --nettrace --duration"
                [exceptions]="--duration"
                [logs]="--level --category --duration"
                [port]="--port-path --once"
        )
        local command="" socket="" nargs=0 i word

        # the command, how many arguments it has so far, and --socket for asking the agent
        for ((i = 1; i < COMP_CWORD; i++)); do
                word=${COMP_WORDS[i]}
                case $word in
                --socket | --agent-socket) socket=${COMP_WORDS[i+1]}; ((i++)) ;;
                --type | --profile | --providers | --duration | --buffer-mb | --counters | --interval | \
                --refresh-interval | --format | -o | --output | --remove | --level | --category | --port-path | --nettrace | \
                --as | --sort | --since) ((i++)) ;;
                -*) ;;
                *) if [[ -z $command ]]; then command=$word; else ((nargs++)); fi ;;
                esac
        done

        case $prev in
        --type) COMPREPLY=($(compgen -W "mini heap triage full" -- "$cur")); return ;;
        --profile)
                COMPREPLY=($(compgen -W "cpu-sampling gc-verbose gc-collect dotnet-common dotnet-sampled-thread-time database" \
                        -- "$cur"))
                return ;;
        --as) COMPREPLY=($(compgen -W "dotnet-trace" -- "$cur")); return ;;
        --sort) COMPREPLY=($(compgen -W "size count name stock" -- "$cur")); return ;;
        --format)
                if [[ $command == counters ]]; then COMPREPLY=($(compgen -W "csv json prometheus" -- "$cur"))
                elif [[ $command == stacks ]]; then COMPREPLY=($(compgen -W "text json speedscope" -- "$cur"))
                elif [[ $command == trace ]]; then COMPREPLY=($(compgen -W "nettrace speedscope chromium pprof flame" -- "$cur"))
                elif [[ $command == convert ]]; then COMPREPLY=($(compgen -W "speedscope chromium pprof flame" -- "$cur"))
                else COMPREPLY=($(compgen -W "csv json" -- "$cur")); fi
                return ;;
        --socket | --agent-socket | --port-path | -o | --output | --nettrace) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --remove) COMPREPLY=($(compgen -W "$(_dsctl_dumps "$socket")" -- "$cur")); return ;;
        --level) COMPREPLY=($(compgen -W "Trace Debug Information Warning Error Critical" -- "$cur")); return ;;
        --providers | --duration | --buffer-mb | --counters | --interval | --refresh-interval | --category) return ;;
        esac

        if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$common ${options[$command]}" -- "$cur"))
                return
        fi
        if [[ -z $command ]]; then
                COMPREPLY=($(compgen -W "$commands" -- "$cur"))
                return
        fi
        case $command in
        help) ((nargs == 0)) && COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
        explain)
                if ((nargs == 0)); then
                        COMPREPLY=($(compgen -W "$(_dsctl_units)" -- "$cur"))
                elif ((nargs == 1)); then
                        COMPREPLY=($(compgen -W "$policy_commands" -- "$cur"))
                fi ;;
        info | env | dump | trace | flame | counters | stacks | gcdump | exceptions | logs | resume | port) ((nargs == 0)) && COMPREPLY=($(compgen -W "$(_dsctl_units)" -- "$cur")) ;;
        convert) ((nargs == 0)) && { compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")); } ;;
        esac
        return 0
}

complete -F _dsctl dsctl
