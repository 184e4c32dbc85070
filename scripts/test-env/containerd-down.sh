#!/bin/bash
# Stop a containerd started by containerd-up.sh and remove everything it and its pods left
# on the host. Idempotent: safe to run twice, after a crash, or on a base that never came up.
#
# Usage: containerd-down.sh [--keep-logs] [BASE]   (or env RKUBELET_CONTAINERD_BASE)
#
# Only touches things that belong to this instance: its containerd (pid file), shims whose
# command line carries its socket, runc containers in its runc root, mounts below BASE,
# cgroups named after its container ids, iptables rules tagged with its CNI network name,
# its bridge. Cgroup subtrees listed one per line (relative to the hierarchy root) in
# $BASE/cgroup-roots are killed and removed too (for tests that set cgroup_parent).
set -uo pipefail

keep_logs=0
if [ "${1:-}" = --keep-logs ]; then keep_logs=1; shift; fi
BASE=${1:-${RKUBELET_CONTAINERD_BASE:-/tmp/rkubelet-containerd}}
[ "$(id -u)" = 0 ] || { echo "containerd-down.sh: must run as root" >&2; exit 1; }
[ -d "$BASE" ] || { echo "containerd-down.sh: $BASE absent, nothing to do" >&2; exit 0; }
BASE=$(cd "$BASE" && pwd -P)
if [ ! -e "$BASE/.rkubelet-containerd" ]; then
    echo "containerd-down.sh: $BASE was not made by containerd-up.sh; refusing" >&2; exit 1
fi

BRIDGE='' NETNAME='' SOCK=''
if [ -f "$BASE/instance.env" ]; then
    # written by containerd-up.sh: ID BRIDGE NETNAME SUBNET SOCK
    # shellcheck disable=SC1091,SC2034
    . "$BASE/instance.env"
fi
SOCK=${SOCK:-$BASE/containerd.sock}
NS=k8s.io
RUNC_ROOT=$BASE/runc/$NS            # the runc v2 shim appends the namespace to Root
mapfile -t HIER < <(awk '($3 == "cgroup" || $3 == "cgroup2") && $2 ~ "^/sys/fs/cgroup" {print $2}' /proc/self/mounts | sort -u)

alive() { [ -e "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
wait_gone() { # <timeout-in-0.05s-ticks> pids...
    local n=$1 p left; shift
    for _ in $(seq 1 "$n"); do
        left=0
        for p in "$@"; do alive "$p" && left=1; done
        [ "$left" = 0 ] && return 0
        sleep 0.05
    done
    return 1
}

# ---- 1. container ids of this instance (metadata, shim task dirs, runc state) ----
ids_file=$BASE/.down-ids
: > "$ids_file"
pid=$(cat "$BASE/containerd.pid" 2>/dev/null || true)
if [ -n "$pid" ] && alive "$pid"; then
    timeout 10 ctr --address "$SOCK" -n "$NS" containers ls -q >> "$ids_file" 2>/dev/null || true
fi
ls "$BASE/state/io.containerd.runtime.v2.task/$NS" >> "$ids_file" 2>/dev/null || true
ls "$RUNC_ROOT" >> "$ids_file" 2>/dev/null || true
mapfile -t IDS < <(grep -E '^[0-9a-f]{64}$' "$ids_file" | sort -u)
rm -f "$ids_file"

# ---- 2. containerd itself ----
if [ -n "$pid" ] && alive "$pid" && grep -q containerd "/proc/$pid/comm" 2>/dev/null; then
    kill -TERM "$pid"
    wait_gone 100 "$pid" || { kill -KILL "$pid"; wait_gone 40 "$pid"; }
fi
rm -f "$BASE/containerd.pid"

# ---- 3. containers (runc) and their shims ----
# runc delete --force takes ~0.1 s each (it waits after SIGKILL): run them in parallel
for id in "${IDS[@]}"; do [ -d "$RUNC_ROOT/$id" ] && echo "$id"; done \
    | xargs -r -P 16 -n 1 runc --root "$RUNC_ROOT" delete --force >/dev/null 2>&1
shims=()
for d in /proc/[0-9]*; do
    read -r comm < "$d/comm" 2>/dev/null || continue
    case "$comm" in containerd-shim*|containerd2-shi*) ;; *) continue ;; esac
    args=$(tr '\0' '\n' < "$d/cmdline" 2>/dev/null) || continue
    # exact argument match on our socket path, never a substring
    if printf '%s\n' "$args" | grep -qxF -- "$SOCK"; then shims+=("${d#/proc/}"); fi
done
if [ ${#shims[@]} -gt 0 ]; then
    kill -KILL "${shims[@]}" 2>/dev/null
    wait_gone 40 "${shims[@]}"
fi
# shim sockets: /run/containerd/s/sha256(<address>/<namespace>/<id>)
for id in "${IDS[@]}"; do
    h=$(printf '%s' "$SOCK/$NS/$id" | sha256sum | cut -d' ' -f1)
    rm -f "/run/containerd/s/$h"
done

# ---- 4. cgroups named after our containers, plus subtrees registered by tests ----
cg_dirs=()
if [ ${#IDS[@]} -gt 0 ] && [ ${#HIER[@]} -gt 0 ]; then
    # one walk of every hierarchy; keep the directories whose name is one of our ids
    while IFS= read -r d; do cg_dirs+=("$d"); done < <(
        find "${HIER[@]}" -mindepth 1 -maxdepth 6 -type d -printf '%f %p\n' 2>/dev/null \
            | awk 'NR == FNR { want[$1] = 1; next } ($1 in want) { print $2 }' \
                <(printf '%s\n' "${IDS[@]}") -)
fi
for h in "${HIER[@]}"; do
    if [ -f "$BASE/cgroup-roots" ]; then
        while IFS= read -r r; do
            r=${r#/}
            case "$r" in ''|*..*) continue ;; esac
            [ -d "$h/$r" ] && cg_dirs+=("$h/$r")
        done < "$BASE/cgroup-roots"
    fi
done
if [ ${#cg_dirs[@]} -gt 0 ]; then
    for d in "${cg_dirs[@]}"; do
        while read -r p; do kill -KILL "$p" 2>/dev/null; done \
            < <(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null)
    done
    sleep 0.05
    for d in "${cg_dirs[@]}"; do
        [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
        [ -d "$d" ] && echo "containerd-down.sh: could not remove cgroup $d" >&2
    done
fi
# containerd's default parent when cgroup_parent is empty; shared, so only if empty
for h in "${HIER[@]}"; do rmdir "$h/$NS" 2>/dev/null; done

# ---- 5. mounts below BASE (rootfs overlays, shm, netns bind mounts), deepest first ----
for _ in 1 2 3; do
    mapfile -t MNT < <(awk -v b="$BASE/" 'index($5, b) == 1 {print $5}' /proc/self/mountinfo | sort -r)
    [ ${#MNT[@]} -eq 0 ] && break
    for m in "${MNT[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
done

# ---- 6. network: iptables rules tagged with our CNI network, bridge, CNI cache ----
if [ -n "$NETNAME" ] && command -v iptables >/dev/null; then
    # Rules the bridge/portmap plugins add carry the comment  name: "<net>" id: "<container>".
    # One iptables-save per table; the matching rules are turned into deletions (and the
    # per-pod CNI-* chains they jump to into flush+delete) and fed to one iptables-restore.
    tag="name: \\\"$NETNAME\\\""     # as printed by iptables-save: name: \"<net>\"
    for table in nat filter; do
        rules=$(iptables-save -t "$table" 2>/dev/null | grep -F -- "$tag" || true)
        [ -n "$rules" ] || continue
        # per-pod chains: jumped to by a tagged rule, or holding tagged rules themselves
        chains=$( { sed -n 's/.* -j \(CNI-[^ ]*\).*/\1/p' <<< "$rules"; awk '$2 ~ /^CNI-/ {print $2}' <<< "$rules"; } \
                  | grep -v '^CNI-HOSTPORT-' | sort -u || true)
        # shellcheck disable=SC2001 # per-line anchor
        dels=$(sed 's/^-A /-D /' <<< "$rules")
        if ! printf '*%s\n%s\n%s\n%s\nCOMMIT\n' "$table" "$dels" \
                "$(for c in $chains; do echo "-F $c"; done)" "$(for c in $chains; do echo "-X $c"; done)" \
                | grep -v '^$' | iptables-restore -w --noflush 2>/dev/null; then
            # the batch is atomic: if one line failed (rule gone meanwhile), go line by line
            while IFS= read -r l; do
                printf '*%s\n%s\nCOMMIT\n' "$table" "$l" | iptables-restore -w --noflush 2>/dev/null
            done < <(printf '%s\n' "$dels"; for c in $chains; do echo "-F $c"; echo "-X $c"; done)
        fi
    done
    # shared portmap chains: drop them only once nobody has a mapping left in them
    if iptables -w -t nat -S CNI-HOSTPORT-DNAT >/dev/null 2>&1 \
        && [ "$(iptables -w -t nat -S CNI-HOSTPORT-DNAT | wc -l)" -le 1 ]; then
        iptables -w -t nat -D PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT 2>/dev/null
        iptables -w -t nat -D OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT 2>/dev/null
        iptables -w -t nat -D POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ 2>/dev/null
        for c in CNI-HOSTPORT-DNAT CNI-HOSTPORT-SNAT CNI-HOSTPORT-MASQ CNI-HOSTPORT-SETMARK; do
            iptables -w -t nat -F "$c" 2>/dev/null && iptables -w -t nat -X "$c" 2>/dev/null
        done
    fi
    rm -f /var/lib/cni/results/"$NETNAME"-* 2>/dev/null
fi
# libcni result cache: our network's entries plus containerd's loopback entries of our pods
for id in "${IDS[@]}"; do rm -f "/var/lib/cni/results/cni-loopback-$id-lo"; done
# shared directories containerd/libcni create on first use: only when left empty
rmdir /var/lib/cni/results /var/lib/cni /run/containerd/s /run/containerd 2>/dev/null
if [ -n "$BRIDGE" ] && ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link del "$BRIDGE"
fi
# ip_forward: restore the value seen before the first up, unless another bridge remains
if [ -f "$BASE/ip_forward.before" ]; then
    if [ -z "$(ip -o link show type bridge 2>/dev/null)" ]; then
        cat "$BASE/ip_forward.before" > /proc/sys/net/ipv4/ip_forward
    fi
fi

# ---- 7. files ----
if [ -n "$(awk -v b="$BASE/" 'index($5, b) == 1' /proc/self/mountinfo)" ]; then
    echo "containerd-down.sh: mounts still present below $BASE; keeping files" >&2
    exit 1
fi
if [ "$keep_logs" = 1 ]; then
    find "$BASE" -mindepth 1 -maxdepth 1 ! -name containerd.log ! -name logs -exec rm -rf {} +
elif mountpoint -q "$BASE"; then
    # A base on its own small filesystem (the disk-pressure tests mount one there).
    find "$BASE" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
    umount "$BASE"
    rmdir "$BASE"
else
    rm -rf "$BASE"
fi
echo "containerd-down.sh: $BASE down" >&2
