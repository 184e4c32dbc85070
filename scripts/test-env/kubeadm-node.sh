#!/bin/bash
# One kubeadm node on this machine: a private mount namespace in which /etc/kubernetes and
# /var/lib are the node's own (so two nodes, and the other tests, never share kubeadm's
# fixed paths), with its own containerd, started inside it so that the hostPath volumes of
# kubeadm's static pods resolve where kubeadm wrote them.
#
#   kubeadm-node.sh up BASE        make the namespace and start containerd in it; prints the
#                                  path of BASE/env (HOLDER_PID, the namespace's holder;
#                                  NODE_ETC, NODE_VAR_LIB, the host folders behind
#                                  /etc/kubernetes and /var/lib; ETCD_IMAGE_TAG, the tag of
#                                  registry.rkubelet.test/etcd; and containerd's variables)
#   kubeadm-node.sh exec BASE CMD  run CMD in the node's namespace
#   kubeadm-node.sh down BASE      stop containerd and the holder; remove /etc/kubernetes if
#                                  `up` made it (the mount point) and it is empty
#
# Env: RKUBELET_CONTAINERD (1.6 or 2.3), as containerd-up.sh; KUBE_BINS, the upstream
# binaries (kube-bins.sh) from which the control plane's images are built.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cmd=${1:?usage: kubeadm-node.sh up|exec|down BASE [CMD...]}
BASE=${2:?usage: kubeadm-node.sh up|exec|down BASE [CMD...]}
shift 2
[ "$(id -u)" = 0 ] || { echo "kubeadm-node.sh: must run as root" >&2; exit 1; }

in_node() {
    local pid
    pid=$(cat "$BASE/holder.pid")
    nsenter --mount="/proc/$pid/ns/mnt" -- "$@"
}

case "$cmd" in
up)
    mkdir -p "$BASE/etc-kubernetes" "$BASE/var-lib"
    BASE=$(cd "$BASE" && pwd -P)
    # /etc cannot be replaced whole (resolv.conf, the CA bundle): /etc/kubernetes is a
    # mount point, made here when missing and removed by `down`.
    if [ ! -e /etc/kubernetes ]; then
        mkdir /etc/kubernetes
        touch "$BASE/made-etc-kubernetes"
    fi
    # The node's own /var/lib hides the host's (and its /var/lib/kubelet, which the
    # upstream kubelet's tests create and remove); kubeadm's kubelet and etcd folders live
    # in it, and the CNI plugins' cache. kubeadm's etcd keeps its data in memory, as
    # cluster-up.sh's does (CI's shared disk once made one commit take 3 s): a tmpfs on
    # /var/lib/etcd, private to the namespace, so it goes with it.
    mkdir -p "$BASE/var-lib/etcd"
    unshare --mount --propagation private -- /bin/sh -c '
        set -e
        mount --bind "$1/etc-kubernetes" /etc/kubernetes
        mount --bind "$1/var-lib" /var/lib
        mount -t tmpfs -o mode=0700,size=1g rkubelet-kubeadm-etcd /var/lib/etcd
        touch "$1/holder.ready"
        exec sleep infinity' holder "$BASE" </dev/null >"$BASE/holder.log" 2>&1 &
    echo $! > "$BASE/holder.pid"
    for _ in $(seq 100); do
        [ -e "$BASE/holder.ready" ] && break
        kill -0 "$(cat "$BASE/holder.pid")" 2>/dev/null || { cat "$BASE/holder.log" >&2; exit 1; }
        sleep 0.05
    done
    [ -e "$BASE/holder.ready" ] || { echo "kubeadm-node.sh: the namespace did not come up" >&2; exit 1; }
    ctd_env=$(in_node "$HERE/containerd-up.sh" "$BASE/ctd" | tail -1)
    # shellcheck disable=SC1090
    . "$ctd_env"
    in_node env KUBE_BINS="${KUBE_BINS:?KUBE_BINS: the folder of the upstream binaries}" \
        "$HERE/build-images.sh" --control-plane-images "${CONTAINERD_ADDRESS}" >&2
    {
        echo "HOLDER_PID=$(cat "$BASE/holder.pid")"
        echo "NODE_ETC=$BASE/etc-kubernetes"
        echo "NODE_VAR_LIB=$BASE/var-lib"
        echo "ETCD_IMAGE_TAG=$(etcd --version | sed -n 's/^etcd Version: //p')"
        cat "$ctd_env"
    } > "$BASE/env"
    echo "$BASE/env"
    ;;
exec)
    in_node "$@"
    ;;
down)
    [ -d "$BASE" ] || exit 0
    BASE=$(cd "$BASE" && pwd -P)
    if [ -f "$BASE/holder.pid" ] && kill -0 "$(cat "$BASE/holder.pid")" 2>/dev/null; then
        in_node "$HERE/containerd-down.sh" "$BASE/ctd" >&2 || true
        kill "$(cat "$BASE/holder.pid")" 2>/dev/null || true
    else
        "$HERE/containerd-down.sh" "$BASE/ctd" >&2 || true
    fi
    if [ -e "$BASE/made-etc-kubernetes" ]; then
        rmdir /etc/kubernetes 2>/dev/null || true
    fi
    rm -rf "$BASE"
    ;;
*)
    echo "kubeadm-node.sh: unknown command $cmd (up, exec or down)" >&2
    exit 2
    ;;
esac
