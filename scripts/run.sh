#!/usr/bin/env bash
# The README's first command: build rkubelet and run it in the foreground.
#
# As root on a machine that has (or can install with apt) containerd, it installs what is
# missing, starts a private containerd with locally built pause and busybox images, and
# runs rkubelet against it over the CRI with the demo static pods in
# fixtures/manifests/demo (or --pod-manifest-path given by you).
# Otherwise (not root, or RKUBELET_ENDPOINT=fake://) it runs on the embedded simulated
# runtime (fake://), the demo pods too (their status and events say they are simulated). RKUBELET_ENDPOINT=unix:///... uses a containerd you run yourself.
# Extra arguments are passed to rkubelet.
#
# Settings go to rkubelet in a KubeletConfiguration file written under the state folder
# (as upstream recommends; the equivalent flags are deprecated). Everything the run makes
# lives in the state folder (${TMPDIR:-/tmp}/rkubelet-run, or RKUBELET_STATE_DIR): the
# private containerd, the root folder, the pod logs, the serving certificate, the file;
# the kubelet API listens on 127.0.0.1 only. When rkubelet stops (Ctrl-C), the script
# removes all of it. Each run starts with fresh ones. `run.sh --help` prints this and
# rkubelet's flags, and does nothing else.
#
# RKUBELET_BIN names a binary already built to run instead (the demo's test runs the one
# it was built with); otherwise the build is the `release-unwind` profile of Cargo.toml: the release build, unwinding
# on panic; scripts/test.sh builds the binary the benchmarks start with it, so each
# command reuses what the other built. `make` builds the packaged binary (release, abort
# on panic); `make install PROFILE=release-unwind` installs this one.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
for arg in "$@"; do
    if [[ "$arg" == --help || "$arg" == -h ]]; then
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        built="${CARGO_TARGET_DIR:-target}/release-unwind/rkubelet"
        if [[ -x "$built" ]]; then
            echo
            "$built" --help
        else
            echo "(rkubelet's flags: run.sh builds it first; or cargo run -- --help)"
        fi
        exit 0
    fi
done
state=${RKUBELET_STATE_DIR:-${TMPDIR:-/tmp}/rkubelet-run}
port=${RKUBELET_HEALTHZ_PORT:-10248}
profile=release-unwind

endpoint=${RKUBELET_ENDPOINT:-}
if [[ -z "$endpoint" ]]; then
    if [[ $(id -u) -eq 0 ]] && { command -v containerd >/dev/null || command -v apt-get >/dev/null; }; then
        endpoint=containerd
    else
        endpoint=fake://
    fi
fi

if [[ "$endpoint" == containerd ]]; then
    "$root/scripts/test-env/install-deps.sh" --runtime-only
fi
bin=${RKUBELET_BIN:-}
if [[ -z "$bin" ]]; then
    cargo build --locked --profile "$profile" --bin rkubelet
    bin="${CARGO_TARGET_DIR:-target}/$profile/rkubelet"
fi

base="$state/containerd"
config="$state/kubelet-config.yaml"
started_containerd=0
# rkubelet makes its root folder a shared mount of itself (as upstream, for mount
# propagation), and the pods' volumes are mounted below it: all of it is unmounted before
# the folder goes.
unmount_root() {
    while mountpoint -q "$state/root" 2>/dev/null; do
        umount -R "$state/root" || return 0
    done
}
cleanup() {
    if [[ $started_containerd -eq 1 ]]; then
        echo "run.sh: removing the private containerd and the pods on it (rkubelet itself leaves pods running when it stops, as on a node)"
        "$root/scripts/test-env/containerd-down.sh" "$base" >/dev/null 2>&1 || true
    fi
    unmount_root
    # --one-file-system: never into a mount left below the state folder.
    rm -rf --one-file-system "$state/root" "$state/logs" "$state/pki" "$config"
    rmdir "$state" 2>/dev/null || true
}
trap cleanup EXIT

# A fresh start: nothing of an earlier run that was killed before it could clean up.
if [[ "$endpoint" == containerd ]]; then
    "$root/scripts/test-env/containerd-down.sh" "$base" >/dev/null 2>&1 || true
fi
unmount_root
rm -rf --one-file-system "$state/root" "$state/logs" "$state/pki"
mkdir -p "$state/root" "$state/logs"

# A YAML string in double quotes (paths may hold any character).
quote() {
    local s=${1//\\/\\\\}
    printf '"%s"' "${s//\"/\\\"}"
}
settings=(
    "address: 127.0.0.1"
    "healthzPort: $port"
    "fileCheckFrequency: 2s"
    "podLogsDir: $(quote "$state/logs")"
)
if [[ "$endpoint" == containerd ]]; then
    started_containerd=1
    "$root/scripts/test-env/containerd-up.sh" "$base"
    # shellcheck disable=SC1091
    . "$base/env"
    endpoint=$CRI_ENDPOINT
    settings+=("cgroupRoot: $(quote "$RKUBELET_CGROUP_ROOT")")
    echo "rkubelet: containerd at $endpoint, pod logs in $state/logs, healthz and /pods on 127.0.0.1:$port (Ctrl-C stops it and removes the private containerd)"
else
    echo "rkubelet: runtime $endpoint, root dir $state/root, healthz on 127.0.0.1:$port (Ctrl-C stops it)"
fi
# The demo manifests (on the simulated runtime too) unless the caller names a manifest path.
if [[ " $* " != *" --pod-manifest-path"* ]]; then
    settings+=("staticPodPath: $(quote "$root/fixtures/manifests/demo")")
fi
{
    echo "# Written by scripts/run.sh for this run; removed when it ends."
    echo "apiVersion: kubelet.config.k8s.io/v1beta1"
    echo "kind: KubeletConfiguration"
    echo "containerRuntimeEndpoint: $(quote "$endpoint")"
    printf '%s\n' "${settings[@]}"
} >"$config"

status=0
"$bin" --config="$config" --root-dir="$state/root" \
    --cert-dir="$state/pki" "$@" || status=$?
exit "$status"
