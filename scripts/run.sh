#!/usr/bin/env bash
# The README's first command: build rkubelet and run it in the foreground.
#
# As root on a machine that has (or can install with apt) containerd, it installs what is
# missing, starts a private containerd with locally built pause and busybox images, and
# runs rkubelet against it over the CRI with the demo static pods in
# fixtures/manifests/demo (or --pod-manifest-path given by you). The private containerd
# and its pods are removed when rkubelet stops (Ctrl-C).
# Otherwise (not root, or RKUBELET_ENDPOINT=fake://) it runs on the embedded simulated
# runtime (fake://). RKUBELET_ENDPOINT=unix:///... uses a containerd you run yourself.
# Extra arguments are passed to rkubelet.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
state=${RKUBELET_STATE_DIR:-${TMPDIR:-/tmp}/rkubelet-run}
port=${RKUBELET_HEALTHZ_PORT:-10248}
mkdir -p "$state"

endpoint=${RKUBELET_ENDPOINT:-}
if [[ -z "$endpoint" ]]; then
    if [[ $(id -u) -eq 0 ]] && { command -v containerd >/dev/null || command -v apt-get >/dev/null; }; then
        endpoint=containerd
    else
        endpoint=fake://
    fi
fi

if [[ "$endpoint" == containerd ]]; then
    "$root/scripts/test-env/install-deps.sh"
fi
cargo build --release --locked

args=(--root-dir="$state/root" --healthz-port="$port" --file-check-frequency=2s)
if [[ "$endpoint" == containerd ]]; then
    base="$state/containerd"
    "$root/scripts/test-env/containerd-down.sh" "$base" >/dev/null 2>&1 || true
    "$root/scripts/test-env/containerd-up.sh" "$base"
    # shellcheck disable=SC1091
    . "$base/env"
    endpoint=$CRI_ENDPOINT
    args+=(--pod-logs-dir="$state/logs" --cgroup-root="$RKUBELET_CGROUP_ROOT")
    # The demo manifests unless the caller names a manifest path.
    if [[ " $* " != *" --pod-manifest-path"* ]]; then
        args+=(--pod-manifest-path="$root/fixtures/manifests/demo")
    fi
    cleanup() { "$root/scripts/test-env/containerd-down.sh" "$base" >/dev/null 2>&1 || true; }
    trap cleanup EXIT
    echo "rkubelet: containerd at $endpoint, pod logs in $state/logs, healthz and /pods on 127.0.0.1:$port (Ctrl-C stops it and removes the private containerd)"
else
    echo "rkubelet: runtime $endpoint, root dir $state/root, healthz on 127.0.0.1:$port (Ctrl-C stops it)"
fi
status=0
./target/release/rkubelet --container-runtime-endpoint="$endpoint" "${args[@]}" "$@" || status=$?
exit "$status"
