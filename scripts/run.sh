#!/usr/bin/env bash
# The README's first command: build rkubelet and run it in the foreground.
# Without a container runtime on the machine it runs on the embedded simulated runtime
# (fake://), as any user. Extra arguments are passed to rkubelet.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked
state=${RKUBELET_STATE_DIR:-${TMPDIR:-/tmp}/rkubelet-run}
mkdir -p "$state"
endpoint=${RKUBELET_ENDPOINT:-fake://}
echo "rkubelet: runtime $endpoint, root dir $state/root, healthz on 127.0.0.1:10248 (Ctrl-C stops it)"
exec ./target/release/rkubelet \
    --container-runtime-endpoint="$endpoint" \
    --root-dir="$state/root" \
    --healthz-port="${RKUBELET_HEALTHZ_PORT:-10248}" \
    "$@"
