#!/bin/bash
# Start a PRIVATE containerd (CRI plugin) for rkubelet tests under one base directory,
# then import the test images (build-images.sh). Several instances can run side by side:
# every name that is global on the host (bridge, CNI network, subnet) is derived from the
# base directory. Tear down with containerd-down.sh <same base>.
#
# Usage: containerd-up.sh [BASE]      (or env RKUBELET_CONTAINERD_BASE; default /tmp/rkubelet-containerd)
# Env:   RKUBELET_CNI_SUBNET   override the derived pod subnet (a /22 in 10.64.0.0/10 by default)
#        RKUBELET_IMAGE_CACHE  image tarball cache (see build-images.sh)
#        CONTAINERD_LOG_LEVEL  containerd log level (default info)
#        RKUBELET_CONTAINERD   1.6 (default: Debian's containerd 1.6.20 on PATH) or 2.3 (the
#                              peers' containerd 2.3.4, `containerd2` and its shim, found by
#                              kube-bins.sh; its configuration is version 3)
# Prints the path of $BASE/env, a file to source:
#   CRI_ENDPOINT=unix://$BASE/containerd.sock, CONTAINERD_ADDRESS, RKUBELET_CONTAINERD_BASE,
#   RKUBELET_POD_LOG_ROOT, RKUBELET_CNI_BRIDGE, RKUBELET_CNI_SUBNET, PAUSE_IMAGE, BUSYBOX_IMAGE,
#   RKUBELET_CONTAINERD_VERSION (1.6 or 2.3),
#   RKUBELET_CGROUP_ROOT: a cgroup made for this instance in every hierarchy, for rkubelet's
#   --cgroup-root (so parallel kubelets never share /kubepods); removed by containerd-down.sh
#
# Host state outside $BASE that containerd 1.6 / the CNI plugins still create (all removed
# by containerd-down.sh): the bridge, iptables rules tagged with the CNI network name,
# /var/lib/cni/results/<network>-*, shim sockets in /run/containerd/s/, container cgroups
# (/sys/fs/cgroup/*/k8s.io/<id> when cgroup_parent is empty, <cgroup_parent>/<id> otherwise),
# and net.ipv4.ip_forward=1 (set here with the bridge; restored when the last bridge goes).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BASE=${1:-${RKUBELET_CONTAINERD_BASE:-/tmp/rkubelet-containerd}}
PAUSE_IMAGE=registry.k8s.io/pause:3.10
BUSYBOX_IMAGE=docker.io/library/busybox:1.36

[ "$(id -u)" = 0 ] || { echo "containerd-up.sh: must run as root" >&2; exit 1; }
for b in containerd containerd-shim-runc-v2 ctr runc iptables ip gcc; do
    command -v "$b" >/dev/null || { echo "containerd-up.sh: $b missing; run install-deps.sh" >&2; exit 1; }
done
VERSION=${RKUBELET_CONTAINERD:-1.6}
case "$VERSION" in
    1.6) CONTAINERD_BIN=$(command -v containerd) ;;
    2.3)
        KB=$("$HERE/kube-bins.sh") || { echo "containerd-up.sh: containerd 2.3 is among the peers' binaries (kube-bins.sh failed)" >&2; exit 1; }
        CONTAINERD_BIN=$KB/containerd2
        SHIM=$KB/containerd2-shim-runc-v2
        for b in "$CONTAINERD_BIN" "$SHIM"; do
            [ -x "$b" ] || { echo "containerd-up.sh: $b missing (../shared/peers/bin/$(basename "$b").zst)" >&2; exit 1; }
        done
        ;;
    *) echo "containerd-up.sh: RKUBELET_CONTAINERD=$VERSION: expected 1.6 or 2.3" >&2; exit 1 ;;
esac

mkdir -p "$BASE"
BASE=$(cd "$BASE" && pwd -P)
SOCK=$BASE/containerd.sock
# sun_path is 108 bytes; the ttrpc socket adds ".ttrpc"
if [ $((${#SOCK} + 6)) -ge 108 ]; then
    echo "containerd-up.sh: base dir path too long for a unix socket: $BASE" >&2; exit 1
fi

PIDFILE=$BASE/containerd.pid
if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null \
    && ctr --address "$SOCK" version >/dev/null 2>&1; then
    echo "containerd-up.sh: already running (pid $(cat "$PIDFILE"))" >&2
    echo "$BASE/env"
    exit 0
fi

# ---- per-instance names, derived from the base directory ----
ID=$(printf '%s' "$BASE" | sha256sum | cut -c1-8)
BRIDGE=rkb$ID                       # 11 chars (< IFNAMSIZ)
NETNAME=rkubelet-$ID
if [ -n "${RKUBELET_CNI_SUBNET:-}" ]; then
    SUBNET=$RKUBELET_CNI_SUBNET
else
    SUBNET="10.$((64 + 16#${ID:0:2} % 64)).$((16#${ID:2:2} & 252)).0/22"
fi
# refuse a subnet that overlaps a route of another interface (e.g. another instance)
clash=$( { ip -4 route show root "$SUBNET"; ip -4 route show match "$SUBNET"; } 2>/dev/null \
         | grep -v '^default' | grep -v " dev $BRIDGE " || true)
if [ -n "$clash" ]; then
    echo "containerd-up.sh: subnet $SUBNET overlaps: $clash; set RKUBELET_CNI_SUBNET" >&2; exit 1
fi

# Marker + names first: containerd-down.sh trusts only this file, never the environment.
touch "$BASE/.rkubelet-containerd"
cat > "$BASE/instance.env" <<EOT
ID=$ID
BRIDGE=$BRIDGE
NETNAME=$NETNAME
SUBNET=$SUBNET
SOCK=$SOCK
EOT
[ -f "$BASE/ip_forward.before" ] || cat /proc/sys/net/ipv4/ip_forward > "$BASE/ip_forward.before"
# The bridge and forwarding now, not at the first pod as the bridge plugin would: kubeadm's
# preflight requires ip_forward=1 before any pod, and while the bridge exists no other
# instance's down restores the old value under us.
ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
echo 1 > /proc/sys/net/ipv4/ip_forward

mkdir -p "$BASE"/{root,state,runc,opt,logs,cni/net.d,cni/ipam}

if [ "$VERSION" = 2.3 ]; then
cat > "$BASE/config.toml" <<EOT
version = 3
root = "$BASE/root"
state = "$BASE/state"
oom_score = 0
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp",
]

[grpc]
  address = "$SOCK"

[ttrpc]
  address = "$SOCK.ttrpc"

[debug]
  address = ""
  level = "${CONTAINERD_LOG_LEVEL:-info}"

[metrics]
  address = ""

# The same settings as 1.6's below, where version 3 moved them: images and runtime
# plugins of their own; the stream server stays with the CRI service. Each runtime names
# its shim (runtime_path), or 2.3 would take 1.6's from PATH.
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$BASE/opt"

  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "overlayfs"
    [plugins."io.containerd.cri.v1.images".pinned_images]
      sandbox = "$PAUSE_IMAGE"
    [plugins."io.containerd.cri.v1.images".registry]
      config_path = ""

  [plugins."io.containerd.cri.v1.runtime"]
    enable_selinux = false
    disable_apparmor = true
    disable_hugetlb_controller = true
    tolerate_missing_hugetlb_controller = true
    netns_mounts_under_state_dir = true
    restrict_oom_score_adj = true

    [plugins."io.containerd.cri.v1.runtime".containerd]
      default_runtime_name = "runc"

      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        runtime_path = "$SHIM"
        [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
          BinaryName = "$(command -v runc)"
          Root = "$BASE/runc"
          SystemdCgroup = false

      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.rkubelet-alt]
        runtime_type = "io.containerd.runc.v2"
        runtime_path = "$SHIM"
        [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.rkubelet-alt.options]
          BinaryName = "$(command -v runc)"
          Root = "$BASE/runc"
          SystemdCgroup = false

    [plugins."io.containerd.cri.v1.runtime".cni]
      bin_dirs = ["/usr/lib/cni"]
      conf_dir = "$BASE/cni/net.d"
      max_conf_num = 1

  [plugins."io.containerd.grpc.v1.cri"]
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
EOT
else
cat > "$BASE/config.toml" <<EOT
version = 2
root = "$BASE/root"
state = "$BASE/state"
oom_score = 0
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp",
]

[grpc]
  address = "$SOCK"

[ttrpc]
  address = "$SOCK.ttrpc"

[debug]
  address = ""
  level = "${CONTAINERD_LOG_LEVEL:-info}"

[metrics]
  address = ""

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$BASE/opt"

  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "$PAUSE_IMAGE"
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    enable_selinux = false
    # test hosts may lack AppArmor and the hugetlb v1 controller
    disable_apparmor = true
    disable_hugetlb_controller = true
    tolerate_missing_hugetlb_controller = true
    # pod network namespaces are bind-mounted under our state dir, not /var/run/netns
    netns_mounts_under_state_dir = true
    # root without CAP_SYS_RESOURCE cannot lower oom_score_adj: clamp instead of failing
    restrict_oom_score_adj = true

    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          BinaryName = "$(command -v runc)"
          Root = "$BASE/runc"
          SystemdCgroup = false

      # A second handler, the same runc, for the RuntimeClass tests (a pod whose class
      # names it runs; one naming a handler not listed here is refused by containerd).
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.rkubelet-alt]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.rkubelet-alt.options]
          BinaryName = "$(command -v runc)"
          Root = "$BASE/runc"
          SystemdCgroup = false

    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$BASE/cni/net.d"
      max_conf_num = 1

    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = ""
EOT
fi

# CNI: written as a fresh file (containerd ignores a file renamed into the directory).
# containerd adds the loopback network by itself.
conf=$BASE/cni/net.d/10-$NETNAME.conflist
rm -f "$conf"
cat > "$conf" <<EOT
{
  "cniVersion": "1.0.0",
  "name": "$NETNAME",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$BASE/cni/ipam",
        "ranges": [[{ "subnet": "$SUBNET" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOT

t0=$(date +%s%N)
# setsid: own session, so the caller's terminal/job control signals do not reach it
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    setsid "$CONTAINERD_BIN" --config "$BASE/config.toml" >>"$BASE/containerd.log" 2>&1 </dev/null &
echo $! > "$PIDFILE"
for _ in $(seq 1 300); do
    ctr --address "$SOCK" version >/dev/null 2>&1 && break
    if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
        echo "containerd-up.sh: containerd exited; tail of $BASE/containerd.log:" >&2
        tail -20 "$BASE/containerd.log" >&2
        exit 1
    fi
    sleep 0.05
done
ctr --address "$SOCK" version >/dev/null || { echo "containerd-up.sh: containerd not answering" >&2; exit 1; }
if ctr --address "$SOCK" plugins ls | awk '$2=="cri" {print $NF}' | grep -qv '^ok$'; then
    echo "containerd-up.sh: CRI plugin failed to load; see $BASE/containerd.log" >&2; exit 1
fi
t1=$(date +%s%N)

"$HERE/build-images.sh" --import "$SOCK" >&2
t2=$(date +%s%N)

# ---- a cgroup root of our own in every hierarchy (registered for containerd-down.sh) ----
CGROOT=/rkubelet-$ID
echo "$CGROOT" >> "$BASE/cgroup-roots"
while read -r h; do
    mkdir -p "$h$CGROOT"
    # a new cpuset cgroup admits no process until it has cpus and mems
    if [ -f "$h$CGROOT/cpuset.cpus" ] && [ -z "$(cat "$h$CGROOT/cpuset.cpus")" ]; then
        cat "$h/cpuset.cpus" > "$h$CGROOT/cpuset.cpus"
        cat "$h/cpuset.mems" > "$h$CGROOT/cpuset.mems"
    fi
done < <(awk '($3 == "cgroup" || $3 == "cgroup2") && $2 ~ "^/sys/fs/cgroup" {print $2}' /proc/self/mounts | sort -u)

cat > "$BASE/env" <<EOT
export RKUBELET_CONTAINERD_BASE=$BASE
export CONTAINERD_ADDRESS=$SOCK
export CONTAINERD_NAMESPACE=k8s.io
export CRI_ENDPOINT=unix://$SOCK
export RKUBELET_POD_LOG_ROOT=$BASE/logs
export RKUBELET_CNI_BRIDGE=$BRIDGE
export RKUBELET_CNI_SUBNET=$SUBNET
export PAUSE_IMAGE=$PAUSE_IMAGE
export BUSYBOX_IMAGE=$BUSYBOX_IMAGE
export RKUBELET_CGROUP_ROOT=$CGROOT
export RKUBELET_CONTAINERD_VERSION=$VERSION
EOT
echo "containerd-up.sh: containerd $VERSION, pid $(cat "$PIDFILE"), socket $SOCK, bridge $BRIDGE, subnet $SUBNET" \
     "(containerd $(( (t1 - t0) / 1000000 )) ms, images $(( (t2 - t1) / 1000000 )) ms)" >&2
echo "$BASE/env"
