#!/bin/bash
# Install what the rkubelet runtime tests need on Debian/Ubuntu. Idempotent: runs
# `apt-get update` + `apt-get install` only when a package is missing.
#   containerd (CRI plugin built in), runc, containernetworking-plugins (/usr/lib/cni),
#   busybox-static (test image content), iptables (bridge/portmap CNI), gcc + libc6-dev
#   (static pause binary), python3, dbus + dbus-user-session (the socket-activated session
#   bus) + systemd (the systemd cgroup driver tests, scripts/test-env/systemd-up.sh), zstd
#   (the upstream Kubernetes binaries are kept compressed, scripts/test-env/kube-bins.sh),
#   etcd-server + openssl (the private control plane, scripts/test-env/cluster-up.sh),
#   python3-pip + Python's prometheus_client from PyPI (the real Prometheus text parser of
#   the kubelet API's metrics test), prometheus (Prometheus 2.42 and promtool: the scrape
#   test runs a private instance against the kubelet API and lints each /metrics* output;
#   the system prometheus.service the package enables is switched off again, below),
#   conntrack, socat, ethtool (what kubeadm's preflight looks for on a node: the kubeadm
#   test runs `kubeadm init` and `kubeadm join` with rkubelet).
# With --runtime-only (scripts/run.sh's demo): the private containerd's packages alone,
# containerd, runc, the CNI plugins, busybox-static, iptables, gcc and libc6-dev.
set -euo pipefail

RUNTIME_PKGS=(containerd runc containernetworking-plugins busybox-static iptables gcc libc6-dev)
RUNTIME_BINS=(containerd containerd-shim-runc-v2 ctr runc /usr/lib/cni/bridge /usr/lib/cni/host-local
              /usr/lib/cni/portmap /usr/lib/cni/loopback /bin/busybox iptables gcc)
runtime_only=0
[ "${1:-}" = --runtime-only ] && runtime_only=1
if [ $runtime_only -eq 1 ]; then
    PKGS=("${RUNTIME_PKGS[@]}")
else
    PKGS=("${RUNTIME_PKGS[@]}" python3 dbus dbus-user-session systemd zstd etcd-server openssl python3-pip prometheus conntrack socat ethtool)
fi

if [ "$(id -u)" != 0 ]; then
    echo "install-deps.sh: must run as root" >&2
    exit 1
fi

missing=()
for p in "${PKGS[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps.sh: all present (${PKGS[*]})"
else
    echo "install-deps.sh: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # --no-install-recommends: containerd would otherwise drag in extra tooling we do not use.
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The Debian containerd, etcd-server and prometheus packages enable system-wide services
# (and start them where systemd runs the machine). rkubelet's scripts and tests only use private
# instances, so a service that this run installed is switched off again and the machine is
# left as it was; one installed before is never touched.
for pkg_service in containerd:containerd.service etcd-server:etcd.service \
    prometheus:prometheus.service; do
    pkg=${pkg_service%%:*}
    service=${pkg_service#*:}
    [[ " ${missing[*]} " == *" $pkg "* ]] || continue
    if [ -d /run/systemd/system ]; then
        systemctl disable --now "$service" >/dev/null 2>&1 || true
    else
        # No systemd running: nothing was started; remove the enablement links.
        systemctl --root=/ disable "$service" >/dev/null 2>&1 || true
    fi
    echo "install-deps.sh: the $pkg package enabled the system's $service;" \
        "disabled and stopped it again (rkubelet's scripts use private instances only;" \
        "'systemctl enable --now $service' turns it on)"
done
bins=("${RUNTIME_BINS[@]}")
[ $runtime_only -eq 1 ] || bins+=(busctl dbus-daemon python3 etcd openssl zstd prometheus promtool)
for b in "${bins[@]}"; do
    if ! command -v "$b" >/dev/null 2>&1 && [ ! -x "$b" ]; then
        echo "install-deps.sh: $b still missing after install" >&2
        exit 1
    fi
done
if [ $runtime_only -eq 1 ]; then
    echo "install-deps.sh: ok (runtime only)"
    exit 0
fi
# The kubelet API's metrics test parses /metrics* with prometheus_client (PyPI). Debian's
# own python refuses pip installs (PEP 668) unless told.
if ! python3 -c 'import prometheus_client' >/dev/null 2>&1; then
    echo "install-deps.sh: installing prometheus_client from PyPI"
    python3 -m pip install -q prometheus_client 2>/dev/null \
        || python3 -m pip install -q --break-system-packages prometheus_client
fi
if ! python3 -c 'import prometheus_client' >/dev/null 2>&1; then
    echo "install-deps.sh: python3 cannot import prometheus_client after install" >&2
    exit 1
fi
echo "install-deps.sh: ok"
