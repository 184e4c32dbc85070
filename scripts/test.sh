#!/usr/bin/env bash
# The project's test command (the README's second command). On a fresh machine it
# installs what the tests need, starts the private peers they use, runs every test,
# lint and benchmark smoke check, and stops the peers again.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

echo "== installing test dependencies"
./scripts/test-env/install-deps.sh

echo "== format and lints"
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings

echo "== build"
cargo build --locked --all-targets

echo "== tests"
# --include-ignored: the tests marked `#[ignore = "needs containerd: ..."]` run here,
# where the peers are installed; a bare `cargo test` lists them as ignored, never passed.
cargo test --locked -- --include-ignored --test-threads="$(nproc)"

echo "== comparisons with the upstream kubelet v1.26.1 (binaries from scripts/test-env/kube-bins.sh)"
cargo test --locked --test upstream_identity --test upstream_compare --test live_swap -- --ignored

echo "== benchmarks (figures printed, goals in each bench's header)"
# One invocation builds the benches once.
cargo bench --locked --bench startup --bench pods --bench cgroups --bench cgroups_systemd --bench planner
