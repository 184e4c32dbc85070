#!/usr/bin/env bash
# Makes packaging/hot-functions.txt, the functions a running node executes, which the
# linker places together (scripts/link/cc-hot-first). Runs the `release` and
# `release-unwind` binaries (their inlining differs, so do the functions left to call)
# under valgrind's callgrind, which counts every function any thread runs, in three scenarios:
#   1. a simulated node (fake://), standalone, with 30 static pods;
#   2. a standalone node on a private containerd with 30 static pods;
#   3. a node on that containerd, connected to a private control plane: 10 static pods,
#      5 API pods with exec and HTTP probes, logs, exec and scrapes of the kubelet API
#      through the API server, a pod deleted.
# Each scenario's run is cut in two (callgrind dumps): its start-up and pods' first syncs,
# then its idle window, in which the node only runs its loops (the connected node's
# window ends before the scrapes, logs and exec). The functions of any idle window come
# first: they are what stays resident once rkubelet has given back its start-up's code
# pages (src/domain/code_pages.rs); then the others. Within each part, functions are
# grouped by the scenarios that ran them so that each scenario's lie side by side: the
# simulated node's own first, then those of the simulated and containerd nodes, those of
# all three, of both containerd nodes, of the containerd node alone, of the connected
# node alone. Their names are demangled without hashes. Run it as root
# when the node's code paths change much (a stale list costs resident memory, not
# correctness: the startup, pods and upstream benches print the resident memory).
#
# Usage: scripts/link/profile-hot-functions.sh   (root, valgrind, containerd, the control
# plane binaries as for the tests)
# Env:   RKUBELET_HOT_BINARIES  the rkubelet binaries to profile instead of building both
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
[[ "$(id -u)" == 0 ]] || { echo "profile-hot-functions.sh: must run as root" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "profile-hot-functions.sh: valgrind is missing (apt-get install valgrind)" >&2; exit 1; }

binaries=${RKUBELET_HOT_BINARIES:-}
if [[ -z "$binaries" ]]; then
    for build in release release-unwind; do
        cargo build --profile "$build" --locked --bin rkubelet
        binaries+=" ${CARGO_TARGET_DIR:-target}/$build/rkubelet"
    done
fi
work=$(mktemp -d /tmp/rkubelet-hot.XXXXXX)
ctrd="$work/containerd"
cluster="$work/cluster"
cleanup() {
    pkill -INT -f -- "--root-dir=$work/" 2>/dev/null || true
    sleep 2
    "$repo/scripts/test-env/cluster-down.sh" "$cluster" >/dev/null 2>&1 || true
    "$repo/scripts/test-env/containerd-down.sh" "$ctrd" >/dev/null 2>&1 || true
    umount -R -l "$work" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

static_pods() { # DIR COUNT
    mkdir -p "$1"
    for i in $(seq 1 "$2"); do
        printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: s%s\nspec:\n  containers:\n  - name: c\n    image: %s\n    command: ["sleep", "3600"]\n' \
            "$i" "${BUSYBOX_IMAGE:-busybox}" > "$1/s$i.yaml"
    done
}

# Runs $bin under callgrind with ARGS for SECS, while DRIVER (a function, given the
# scenario's name and the process) runs; the driver dumps the profile where the idle
# window starts (NAME.callgrind.1) and may dump again where it ends.
profile() { # NAME SECS DRIVER ARGS...
    local name=$1 secs=$2 driver=$3
    shift 3
    mkdir -p "$work/$name/root"
    valgrind --tool=callgrind --demangle=no --compress-strings=no --dump-instr=no \
        --callgrind-out-file="$work/$name.callgrind" "$bin" --root-dir="$work/$name/root" \
        "$@" > "$work/$name.log" 2>&1 &
    local pid=$!
    "$driver" "$name" "$pid" || true
    sleep "$secs"
    kill -INT "$pid"
    wait "$pid" || true
    echo "profile-hot-functions: $name: $(cat "$work/$name".callgrind* | grep -c '^fn=') functions"
}

# The idle window starts once start-up and the pods' first syncs are over.
idle_after_30s() { sleep 30; callgrind_control --dump "$2" >/dev/null; }
idle_after_50s() { sleep 50; callgrind_control --dump "$2" >/dev/null; }

"$repo/scripts/test-env/containerd-up.sh" "$ctrd" >/dev/null
# shellcheck disable=SC1091
. "$ctrd/env"
"$repo/scripts/test-env/cluster-up.sh" "$cluster" >/dev/null
# shellcheck disable=SC1091
. "$cluster/env"
export KUBECONFIG
# The containerd node and the connected one each start on a clean runtime.
fresh_containerd() {
    "$repo/scripts/test-env/containerd-down.sh" "$ctrd" >/dev/null 2>&1
    "$repo/scripts/test-env/containerd-up.sh" "$ctrd" >/dev/null
}

api_pods() { # NAME PID (the scenario's; its node is hot-NAME)
    sleep 20
    for i in 1 2 3 4 5; do
        cat <<YAML | "$KUBECTL" apply -f - >/dev/null
apiVersion: v1
kind: Pod
metadata:
  name: $1-a$i
spec:
  nodeName: hot-$1
  automountServiceAccountToken: false
  containers:
  - name: web
    image: $BUSYBOX_IMAGE
    command: ["sh", "-c", "mkdir -p /www && echo ok > /www/index.html && httpd -f -p 8080 -h /www"]
    readinessProbe:
      exec: {command: ["cat", "/www/index.html"]}
      periodSeconds: 2
    livenessProbe:
      httpGet: {path: /index.html, port: 8080}
      periodSeconds: 2
YAML
    done
    # The pods start and their probes begin; then the idle window, probes running.
    sleep 20
    callgrind_control --dump "$2" >/dev/null
    sleep 40
    callgrind_control --dump "$2" >/dev/null
    local raw
    for raw in metrics metrics/cadvisor metrics/resource stats/summary pods; do
        "$KUBECTL" get --raw "/api/v1/nodes/hot-$1/proxy/$raw" >/dev/null || true
    done
    "$KUBECTL" logs "$1-a1" >/dev/null || true
    "$KUBECTL" exec "$1-a1" -- true || true
    "$KUBECTL" delete pod "$1-a5" --wait=false >/dev/null || true
}

n=0
for bin in $binaries; do
    n=$((n + 1))
    echo "== $bin: 1. simulated node, 30 static pods"
    static_pods "$work/b$n-fake/manifests" 30
    profile "b$n-fake" 30 idle_after_30s --container-runtime-endpoint=fake:// \
        --pod-manifest-path="$work/b$n-fake/manifests" --hostname-override="hot-b$n-fake" \
        --healthz-port="$(port)" --port="$(port)" --pod-logs-dir="$work/b$n-fake/logs"

    echo "== $bin: 2. containerd, standalone, 30 static pods"
    fresh_containerd
    static_pods "$work/b$n-containerd/manifests" 30
    profile "b$n-containerd" 40 idle_after_50s --container-runtime-endpoint="$CRI_ENDPOINT" \
        --cgroup-root="$RKUBELET_CGROUP_ROOT" --pod-manifest-path="$work/b$n-containerd/manifests" \
        --hostname-override="hot-b$n-containerd" --healthz-port="$(port)" --port="$(port)" \
        --pod-logs-dir="$work/b$n-containerd/logs"

    echo "== $bin: 3. containerd, connected"
    fresh_containerd
    static_pods "$work/b$n-connected/manifests" 10
    profile "b$n-connected" 10 api_pods --container-runtime-endpoint="$CRI_ENDPOINT" \
        --kubeconfig="$("$repo/scripts/test-env/cluster-up.sh" "$cluster" node "hot-b$n-connected")" \
        --client-ca-file="$CA_CERT" --cgroup-root="$RKUBELET_CGROUP_ROOT" \
        --pod-manifest-path="$work/b$n-connected/manifests" --hostname-override="hot-b$n-connected" \
        --healthz-port="$(port)" --port="$(port)" --pod-logs-dir="$work/b$n-connected/logs"
done

names() { sed -n 's/^fn=//p' "$@" | grep -v '^0x' | "$repo/scripts/link/hot-names" | sort -u; }
# Every function each scenario ran, and those of its idle window (after the first dump
# for the standalone nodes; between the two dumps for the connected one), named as the
# linker wrapper names the binary's.
for name in fake containerd connected; do
    names "$work"/b*-"$name".callgrind* > "$work/$name.names"
done
names "$work"/b*-fake.callgrind > "$work/fake.idle"
names "$work"/b*-containerd.callgrind > "$work/containerd.idle"
names "$work"/b*-connected.callgrind.2 > "$work/connected.idle"
sort -u "$work"/*.idle > "$work/idle"
# The names of FAKE, CONTAINERD and CONNECTED but not EXCLUDE, grouped by the scenarios
# that ran them (1 each) in the order above; alphabetical within a group.
grouped() { # EXCLUDE FAKE CONTAINERD CONNECTED
    local group
    for group in 100 110 111 011 010 001 101; do
        for i in 0 1 2 3; do sed "s/^/$i\t/" "${@:i+1:1}"; done | awk -F '\t' -v group="$group" '
            $1 == 0 { skip[$2] = 1; next }
            ($2 in skip) { next }
            !($2 in mask) { mask[$2] = "000" }
            { mask[$2] = substr(mask[$2], 1, $1 - 1) "1" substr(mask[$2], $1 + 1) }
            END { for (name in mask) if (mask[name] == group) print name }' | LC_ALL=C sort
    done
}
{
    grouped /dev/null "$work/fake.idle" "$work/containerd.idle" "$work/connected.idle"
    grouped "$work/idle" "$work/fake.names" "$work/containerd.names" "$work/connected.names"
} > packaging/hot-functions.txt
echo "profile-hot-functions: $(wc -l < packaging/hot-functions.txt) functions in packaging/hot-functions.txt, $(wc -l < "$work/idle") of them in an idle window"
