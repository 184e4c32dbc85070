#!/bin/bash
# Find the upstream Kubernetes v1.26.1 binaries (kubelet, crictl, ...) the comparison tests
# run next to rkubelet, and print their folder.
#   kube-bins.sh [DEST]
# - $KUBE_BIN_DIR, when it holds an executable kubelet, is used as it is;
# - else the zstd archives (NAME.zst) in $KUBE_BIN_ARCHIVES (default: ../shared/peers/bin
#   beside the repository) are unpacked into DEST (default ${TMPDIR:-/tmp}/rkubelet-kube-bin-v1.26.1).
# Idempotent, and safe to run from parallel tests: a binary already unpacked and newer than
# its archive is kept, and each one is unpacked to a temporary name and renamed into place.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -n "${KUBE_BIN_DIR:-}" ] && [ -x "$KUBE_BIN_DIR/kubelet" ]; then
    echo "$KUBE_BIN_DIR"
    exit 0
fi
ARCHIVES=${KUBE_BIN_ARCHIVES:-$HERE/../../../shared/peers/bin}
DEST=${1:-${TMPDIR:-/tmp}/rkubelet-kube-bin-v1.26.1}
if [ ! -f "$ARCHIVES/kubelet.zst" ]; then
    echo "kube-bins.sh: no upstream kubelet: set KUBE_BIN_DIR to a folder with the v1.26.1" \
         "binaries, or KUBE_BIN_ARCHIVES to a folder of NAME.zst archives (looked in $ARCHIVES)" >&2
    exit 1
fi
command -v zstd >/dev/null || { echo "kube-bins.sh: zstd is needed (install-deps.sh)" >&2; exit 1; }
mkdir -p "$DEST"
for z in "$ARCHIVES"/*.zst; do
    b=$DEST/$(basename "$z" .zst)
    if [ ! -x "$b" ] || [ "$z" -nt "$b" ]; then
        tmp=$(mktemp "$b.XXXXXX")
        zstd -q -d -f "$z" -o "$tmp" && chmod 755 "$tmp" && mv -f "$tmp" "$b"
    fi
done
echo "$DEST"
