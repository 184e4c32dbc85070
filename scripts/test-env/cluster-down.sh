#!/bin/bash
# Stop a control plane started by cluster-up.sh (by its recorded PIDs) and remove its base
# directory. Idempotent: safe after a crash, twice, or on a base that never came up.
#   cluster-down.sh [--keep] BASE     --keep: stop the processes, keep the folder (logs, audit log)
#   cluster-down.sh BASE stop NAME    stop one component (apiserver, etcd, controller-manager,
#                                     scheduler, side-door) and keep the rest: for outage tests
set -uo pipefail

keep=0
if [ "${1:-}" = --keep ]; then keep=1; shift; fi
BASE=${1:?usage: cluster-down.sh [--keep] BASE [stop NAME]}
[ -d "$BASE" ] || { echo "cluster-down.sh: $BASE absent, nothing to do" >&2; exit 0; }
BASE=$(cd "$BASE" && pwd -P)
[ -e "$BASE/.rkubelet-cluster" ] || { echo "cluster-down.sh: $BASE was not made by cluster-up.sh; refusing" >&2; exit 1; }

stop() { # NAME: TERM, up to 10 s, then KILL
    local f=$BASE/$1.pid pid
    [ -f "$f" ] || return 0
    pid=$(cat "$f")
    # The pid file may be stale: only signal a process whose command line names this base.
    if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF "$BASE"; then
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    fi
    rm -f "$f"
}

if [ "${2:-}" = stop ]; then
    stop "${3:?component}"
    exit 0
fi

for n in side-door scheduler controller-manager apiserver etcd; do stop "$n"; done
# etcd's data in /dev/shm (cluster-up.sh) goes with etcd, --keep or not: it is memory.
if [ -L "$BASE/etcd" ]; then
    data=$(readlink "$BASE/etcd")
    case $data in /dev/shm/rkubelet-etcd-*/data) rm -rf "$(dirname "$data")" ;; esac
    rm -f "$BASE/etcd"
fi
[ "$keep" = 1 ] || rm -rf "$BASE"
exit 0
