#!/bin/bash
# Stop a systemd manager started by systemd-up.sh and remove everything it left: the
# manager, every process below its cgroup (its bus daemon, the units it started), that
# cgroup subtree in every hierarchy, and BASE. Idempotent: safe to run twice, after a
# crash, or on a base that never came up.
#
# Usage: systemd-down.sh [BASE]    (or env RKUBELET_SYSTEMD_BASE)
#
# Only touches what belongs to this instance: the pids recorded in BASE and the cgroup
# named in BASE/cgroup.name (never a name from the environment).
set -uo pipefail

BASE=${1:-${RKUBELET_SYSTEMD_BASE:-/tmp/rkubelet-systemd}}
[ "$(id -u)" = 0 ] || { echo "systemd-down.sh: must run as root" >&2; exit 1; }
[ -d "$BASE" ] || { echo "systemd-down.sh: $BASE absent, nothing to do" >&2; exit 0; }
BASE=$(cd "$BASE" && pwd -P)
if [ ! -e "$BASE/.rkubelet-systemd" ]; then
    echo "systemd-down.sh: $BASE was not made by systemd-up.sh; refusing" >&2; exit 1
fi
alive() { [ -e "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
t0=$(date +%s%N)

CG_NAME=$(cat "$BASE/cgroup.name" 2>/dev/null || true)
case "$CG_NAME" in rksd-*) ;; '') ;; *) echo "systemd-down.sh: refusing cgroup name '$CG_NAME'" >&2; exit 1 ;; esac
mapfile -t HIER < <(awk '($3=="cgroup" || $3=="cgroup2") && $2 ~ /^\/sys\/fs\/cgroup(\/|$)/ {print $2}' /proc/self/mounts | sort -u)

# The manager: SIGKILL rather than a clean shutdown (SIGTERM runs exit.target, ~1.6 s):
# whatever it started is killed through its cgroup below, which is all a clean stop would do.
pid=$(cat "$BASE/systemd.pid" 2>/dev/null || true)
if [ -n "$pid" ] && alive "$pid" && grep -q systemd "/proc/$pid/comm" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null
    for _ in $(seq 1 100); do alive "$pid" || break; sleep 0.02; done
fi
# the script(1) wrapper exits with its child; make sure if it is still ours
lpid=$(cat "$BASE/launcher.pid" 2>/dev/null || true)
if [ -n "$lpid" ] && alive "$lpid" && grep -qF "$BASE/launch.sh" "/proc/$lpid/cmdline" 2>/dev/null; then
    kill -KILL "$lpid" 2>/dev/null
fi

# Everything left in the subtree, until it is empty and removed (killed tasks leave their
# cgroup only once they are gone, so retry for a while).
if [ -n "$CG_NAME" ]; then
    for _ in $(seq 1 100); do
        left=0
        for h in "${HIER[@]}"; do
            [ -d "$h/$CG_NAME" ] || continue
            while read -r p; do kill -KILL "$p" 2>/dev/null; done \
                < <(find "$h/$CG_NAME" -name cgroup.procs -exec cat {} + 2>/dev/null)
            find "$h/$CG_NAME" -depth -type d -exec rmdir {} + 2>/dev/null
            [ -d "$h/$CG_NAME" ] && left=1
        done
        [ "$left" = 0 ] && break
        sleep 0.02
    done
    stuck=0
    for h in "${HIER[@]}"; do
        if [ -d "$h/$CG_NAME" ]; then echo "systemd-down.sh: could not remove $h/$CG_NAME" >&2; stuck=1; fi
    done
    # keep BASE (it names the cgroup) so that a later run can retry
    [ "$stuck" = 0 ] || exit 1
fi

# The mount namespace went with its last process; nothing of it is mounted on the host.
rm -rf "$BASE"
echo "systemd-down.sh: $BASE down ($(( ($(date +%s%N) - t0) / 1000000 )) ms)" >&2
