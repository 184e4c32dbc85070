#!/bin/bash
# Removes what a test harness killed from outside (a stopped run) could not: the private
# containerds (/tmp/rkcri-<pid>-<name>) and control planes (/tmp/rkcl-<pid>-<name>) whose
# test process <pid> is gone, with their pods' networks, mounts and cgroups. A base whose
# process still runs belongs to a harness at work and is left alone.
set -uo pipefail
[ "$(id -u)" = 0 ] || exit 0
here=$(cd "$(dirname "$0")" && pwd)
for base in /tmp/rkcri-* /tmp/rkcl-*; do
    [ -d "$base" ] || continue
    [[ $base =~ ^/tmp/rk(cri|cl)-([0-9]+)- ]] || continue
    pid=${BASH_REMATCH[2]}
    [ -e "/proc/$pid" ] && continue
    echo "sweep-leftovers.sh: $base (process $pid is gone)"
    case ${BASH_REMATCH[1]} in
        cri) "$here/containerd-down.sh" "$base" ;;
        cl) "$here/cluster-down.sh" "$base" ;;
    esac
done
# etcd's data in /dev/shm whose control plane's folder is gone (removed by hand, say).
for shm in /dev/shm/rkubelet-etcd-*; do
    [ -f "$shm/base" ] || continue
    owner=$(cat "$shm/base")
    [ -d "$owner" ] && continue
    echo "sweep-leftovers.sh: $shm (its control plane $owner is gone)"
    rm -rf "$shm"
done
exit 0
