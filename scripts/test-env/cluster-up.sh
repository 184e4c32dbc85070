#!/bin/bash
# Start a PRIVATE Kubernetes control plane for rkubelet's connected-mode tests, under one
# base directory: etcd (Debian's etcd-server), kube-apiserver and kube-controller-manager
# (and kube-scheduler with SCHEDULER=1), with their own CA and certificates (openssl) and an
# audit log of every request. Several instances run side by side: each has its own base
# directory and ports. Tear down with cluster-down.sh <same base>.
#
# Usage:
#   cluster-up.sh BASE                  start; prints the path of BASE/env (a file to source)
#   cluster-up.sh BASE start NAME       start a component stopped by `cluster-down.sh BASE stop NAME`
#                                       (apiserver, etcd, controller-manager, scheduler) again
#   cluster-up.sh BASE side-door PORT   a second kube-apiserver on the same etcd, on PORT
#   cluster-up.sh BASE node NAME [DAYS] a node identity (CN=system:node:NAME, O=system:nodes),
#                                       valid DAYS days (default 30; -1 gives an expired one);
#                                       prints the kubeconfig's path, BASE/node-NAME.kubeconfig
#
# Env:
#   APORT             kube-apiserver's secure port (default: a free port)
#   ETCD_PORT         etcd's client port; ETCD_PORT+1 is its peer port (default: free ports)
#   NODES             node identities to write at start-up ("a b": BASE/node-a.kubeconfig, ...)
#   SCHEDULER=1       also run kube-scheduler
#   SIGNING_DURATION  the controller manager's --cluster-signing-duration (default 720h)
#   ETCD_ON_DISK=1    keep etcd's data in BASE/etcd rather than in /dev/shm
#   KUBE_BIN_DIR      a folder with kube-apiserver, kube-controller-manager, kube-scheduler and
#                     kubectl, plain or zstd-compressed (NAME.zst); fallback: ../shared/peers/bin
#                     beside the repository. Compressed binaries are unpacked once into
#                     RKUBELET_KUBE_BIN_CACHE (default ${TMPDIR:-/tmp}/rkubelet-kube-bin).
#
# BASE/env sets: CLUSTER_BASE, APISERVER (https://127.0.0.1:APORT), APORT, ETCD_PORT,
#   KUBECONFIG (admin: system:masters), BOOTSTRAP_KUBECONFIG (a bootstrap token of
#   system:bootstrappers with kubeadm's RBAC: create CSRs, node client CSRs auto-approved,
#   nodes renew their own), CA_CERT, CA_KEY, KUBECTL, KUBE_BIN_DIR, AUDIT_LOG.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BASE=${1:?usage: cluster-up.sh BASE [node NAME [DAYS]]}
shift

die() { echo "cluster-up.sh: $*" >&2; exit 1; }

# ---- binaries ----
# A folder holding every binary we need, unpacking .zst files into the cache when needed.
kube_bins() {
    local need=(kube-apiserver kube-controller-manager kube-scheduler) dir candidates=()
    [ -n "${KUBE_BIN_DIR:-}" ] && candidates+=("$KUBE_BIN_DIR")
    candidates+=("$REPO/../shared/peers/bin")
    for dir in "${candidates[@]}"; do
        [ -d "$dir" ] || continue
        if [ -x "$dir/kube-apiserver" ]; then
            for b in "${need[@]}"; do [ -x "$dir/$b" ] || die "$dir has kube-apiserver but not $b"; done
            (cd "$dir" && pwd); return
        fi
        if [ -f "$dir/kube-apiserver.zst" ]; then
            command -v zstd >/dev/null || die "zstd is needed to unpack $dir/*.zst (scripts/test-env/install-deps.sh)"
            local cache=${RKUBELET_KUBE_BIN_CACHE:-${TMPDIR:-/tmp}/rkubelet-kube-bin}
            mkdir -p "$cache"
            # One unpacker at a time: parallel tests share the cache.
            (
                flock 9
                for z in "$dir"/*.zst; do
                    local out
                    out=$cache/$(basename "$z" .zst)
                    if [ ! -x "$out" ] || [ "$z" -nt "$out" ]; then
                        zstd -q -d -f "$z" -o "$out.tmp.$$" && chmod 755 "$out.tmp.$$" && mv "$out.tmp.$$" "$out"
                    fi
                done
            ) 9>"$cache/.lock"
            for b in "${need[@]}"; do [ -x "$cache/$b" ] || die "$dir has no $b.zst"; done
            echo "$cache"; return
        fi
    done
    die "no Kubernetes binaries found (kube-apiserver, kube-controller-manager, kube-scheduler, plain or .zst): set KUBE_BIN_DIR; looked in: ${candidates[*]}"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# ---- certificates (ECDSA P-256: quick to make; the API server and signer take them) ----
new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# cert NAME CN O SANs DAYS: PKI/NAME.crt and PKI/NAME.key signed by the CA
cert() {
    local n=$1 cn=$2 o=$3 san=$4 days=$5 subj pki=$BASE/pki
    new_key "$pki/$n.key"
    subj="/CN=$cn"; [ -n "$o" ] && subj="/O=$o/CN=$cn"
    openssl req -new -key "$pki/$n.key" -subj "$subj" -out "$pki/$n.csr" 2>/dev/null
    {
        echo "basicConstraints=CA:FALSE"
        echo "keyUsage=critical,digitalSignature,keyEncipherment"
        echo "extendedKeyUsage=serverAuth,clientAuth"
        [ -n "$san" ] && echo "subjectAltName=$san"
    } > "$pki/$n.ext"
    openssl x509 -req -in "$pki/$n.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
        -days "$days" -extfile "$pki/$n.ext" -out "$pki/$n.crt" 2>/dev/null
}

# kubeconfig OUT USER (cert NAME | token T)
kubeconfig() {
    local out=$1 user=$2 kind=$3 value=$4 creds
    if [ "$kind" = token ]; then
        creds="token: $value"
    else
        creds="client-certificate-data: $(base64 -w0 < "$BASE/pki/$value.crt")
    client-key-data: $(base64 -w0 < "$BASE/pki/$value.key")"
    fi
    cat > "$out.tmp" <<EOT
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$APORT
    certificate-authority-data: $(base64 -w0 < "$BASE/pki/ca.crt")
users:
- name: $user
  user:
    $creds
contexts:
- name: local
  context: {cluster: local, user: $user}
current-context: local
EOT
    mv "$out.tmp" "$out"
}

node_kubeconfig() { # NAME DAYS
    cert "node-$1" "system:node:$1" system:nodes "" "$2"
    kubeconfig "$BASE/node-$1.kubeconfig" "system:node:$1" cert "node-$1"
    echo "$BASE/node-$1.kubeconfig"
}

# launch NAME CMD...: runs CMD in its own session, logs to BASE/NAME.log, records the pid,
# and keeps the command in BASE/NAME.cmd so `cluster-up.sh BASE start NAME` can start it
# again after an outage test stopped it.
launch() {
    local name=$1; shift
    printf '%q ' "$@" > "$BASE/$name.cmd"
    setsid "$@" > "$BASE/$name.log" 2>&1 < /dev/null &
    echo $! > "$BASE/$name.pid"
}

# ---- subcommand: start one stopped component again (its saved command line) ----
if [ "${1:-}" = start ]; then
    name=${2:?usage: cluster-up.sh BASE start NAME}
    [ -f "$BASE/$name.cmd" ] || die "$BASE/$name.cmd absent: no component $name was started there"
    if [ -f "$BASE/$name.pid" ] && kill -0 "$(cat "$BASE/$name.pid")" 2>/dev/null; then
        die "$name is already running (pid $(cat "$BASE/$name.pid"))"
    fi
    eval "cmd=($(cat "$BASE/$name.cmd"))"
    # shellcheck disable=SC2154
    setsid "${cmd[@]}" >> "$BASE/$name.log" 2>&1 < /dev/null &
    echo $! > "$BASE/$name.pid"
    exit 0
fi

# ---- subcommand: a second API server on the same etcd, on PORT ----
# For outage tests: while the node's API server is down, a change made through this one
# (a pod deleted, say) reaches etcd, as when the node alone is cut off. Its own audit log;
# `cluster-down.sh BASE stop side-door` stops it.
if [ "${1:-}" = side-door ]; then
    port=${2:?usage: cluster-up.sh BASE side-door PORT}
    [ -f "$BASE/apiserver.cmd" ] || die "$BASE/apiserver.cmd absent: start the control plane first"
    eval "cmd=($(cat "$BASE/apiserver.cmd"))"
    # pflag keeps a repeated flag's last value.
    # shellcheck disable=SC2154
    setsid "${cmd[@]}" --secure-port="$port" --audit-log-path="$BASE/side-door-audit.log" \
        > "$BASE/side-door.log" 2>&1 < /dev/null &
    echo $! > "$BASE/side-door.pid"
    exit 0
fi

# ---- subcommand: a node identity for a running control plane ----
if [ "${1:-}" = node ]; then
    [ -f "$BASE/env" ] || die "$BASE/env absent: start the control plane first (cluster-up.sh $BASE)"
    # shellcheck disable=SC1091
    . "$BASE/env"
    node_kubeconfig "${2:?usage: cluster-up.sh BASE node NAME [DAYS]}" "${3:-30}"
    exit 0
fi
[ $# -eq 0 ] || die "unknown arguments: $*"

# ---- start ----
command -v etcd >/dev/null || die "etcd not found: apt-get install etcd-server (scripts/test-env/install-deps.sh)"
command -v openssl >/dev/null || die "openssl not found (scripts/test-env/install-deps.sh)"
KB=$(kube_bins)
KUBECTL=$KB/kubectl
[ -x "$KUBECTL" ] || KUBECTL=$(command -v kubectl) || die "kubectl found neither in $KB nor on PATH"

mkdir -p "$BASE"
BASE=$(cd "$BASE" && pwd -P)
if [ -f "$BASE/apiserver.pid" ] && kill -0 "$(cat "$BASE/apiserver.pid")" 2>/dev/null; then
    echo "cluster-up.sh: already running under $BASE" >&2
    echo "$BASE/env"; exit 0
fi
touch "$BASE/.rkubelet-cluster"   # cluster-down.sh removes only folders carrying this mark
mkdir -p "$BASE/pki"
# etcd's data lives in memory (/dev/shm) when it can: etcd fsyncs every write, and on CI's
# shared disk, beside the soaks' containers, one commit once took 3 s and a control plane
# a minute to come up, so that kubectl calls timed out. BASE/etcd is a link to it, so that
# etcd's command line still names BASE (cluster-down.sh signals only such processes);
# the folder's `base` file names its owner for sweep-leftovers.sh.
if [ ! -e "$BASE/etcd" ]; then
    if [ -z "${ETCD_ON_DISK:-}" ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && [ -w /dev/shm ]; then
        shm=/dev/shm/rkubelet-etcd-$(basename "$BASE")-$(printf %s "$BASE" | sha256sum | cut -c1-8)
        mkdir -p "$shm/data"
        chmod 700 "$shm/data"
        printf '%s\n' "$BASE" > "$shm/base"
        ln -s "$shm/data" "$BASE/etcd"
    else
        mkdir -p "$BASE/etcd"
    fi
fi

APORT=${APORT:-$(free_port)}
if [ -z "${ETCD_PORT:-}" ]; then
    ETCD_PORT=$(free_port)
    ETCD_PEER_PORT=$(free_port)
else
    ETCD_PEER_PORT=$((ETCD_PORT + 1))
fi

pki=$BASE/pki
new_key "$pki/ca.key"
openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=rkubelet-test-ca-$(basename "$BASE")" -days 30 \
    -out "$pki/ca.crt" 2>/dev/null
cert apiserver kube-apiserver "" \
    "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc" 30
cert admin admin system:masters "" 30
cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters "" 30
new_key "$pki/sa.key"
openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
kubeconfig "$BASE/admin.kubeconfig" admin cert admin
cat > "$BASE/audit-policy.yaml" <<EOT
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules: [{level: Metadata}]
EOT

launch etcd etcd --name rk --data-dir "$BASE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "rk=http://127.0.0.1:$ETCD_PEER_PORT"

# The advertised address is loopback: several instances on one host, none reachable from outside.
launch apiserver "$KB/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --secure-port="$APORT" --bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc --service-cluster-ip-range=10.0.0.0/24 \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction --allow-privileged=true \
    --enable-bootstrap-token-auth=true \
    --audit-policy-file="$BASE/audit-policy.yaml" --audit-log-path="$BASE/audit.log" \
    --cert-dir="$pki/apiserver-generated"

export KUBECONFIG=$BASE/admin.kubeconfig
up=0
for _ in $(seq 1 300); do
    if "$KUBECTL" get --raw /readyz >/dev/null 2>&1; then up=1; break; fi
    kill -0 "$(cat "$BASE/etcd.pid")" 2>/dev/null || { tail -20 "$BASE/etcd.log" >&2; die "etcd died (log above, $BASE/etcd.log)"; }
    kill -0 "$(cat "$BASE/apiserver.pid")" 2>/dev/null || { tail -20 "$BASE/apiserver.log" >&2; die "kube-apiserver died (log above)"; }
    sleep 0.2
done
[ "$up" = 1 ] || die "kube-apiserver not ready after 60 s ($BASE/apiserver.log)"

launch controller-manager "$KB/kube-controller-manager" --kubeconfig="$BASE/admin.kubeconfig" \
    --authentication-kubeconfig="$BASE/admin.kubeconfig" --authorization-kubeconfig="$BASE/admin.kubeconfig" \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
    --cluster-signing-duration="${SIGNING_DURATION:-720h}" \
    --use-service-account-credentials=true --controllers='*,bootstrapsigner,tokencleaner' \
    --secure-port=0 --leader-elect=false

if [ "${SCHEDULER:-0}" = 1 ]; then
    launch scheduler "$KB/kube-scheduler" --kubeconfig="$BASE/admin.kubeconfig" \
        --authentication-kubeconfig="$BASE/admin.kubeconfig" --authorization-kubeconfig="$BASE/admin.kubeconfig" \
        --secure-port=0 --leader-elect=false
fi

# ---- bootstrap token with kubeadm's RBAC ----
token_id=$(head -c 3 /dev/urandom | od -An -tx1 | tr -d ' \n')
token_secret=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
"$KUBECTL" -n kube-system create secret generic "bootstrap-token-$token_id" \
    --type=bootstrap.kubernetes.io/token \
    --from-literal=token-id="$token_id" --from-literal=token-secret="$token_secret" \
    --from-literal=usage-bootstrap-authentication=true --from-literal=usage-bootstrap-signing=true \
    --from-literal=auth-extra-groups=system:bootstrappers:kubeadm:default-node-token >/dev/null
# kubeadm's bindings: bootstrappers create CSRs and have node client CSRs approved; nodes
# have their renewals approved.
"$KUBECTL" create clusterrolebinding kubeadm:kubelet-bootstrap \
    --clusterrole=system:node-bootstrapper --group=system:bootstrappers:kubeadm:default-node-token >/dev/null
"$KUBECTL" create clusterrolebinding kubeadm:node-autoapprove-bootstrap \
    --clusterrole=system:certificates.k8s.io:certificatesigningrequests:nodeclient \
    --group=system:bootstrappers:kubeadm:default-node-token >/dev/null
"$KUBECTL" create clusterrolebinding kubeadm:node-autoapprove-certificate-rotation \
    --clusterrole=system:certificates.k8s.io:certificatesigningrequests:selfnodeclient --group=system:nodes >/dev/null
kubeconfig "$BASE/bootstrap.kubeconfig" kubelet-bootstrap token "$token_id.$token_secret"

for n in ${NODES:-}; do node_kubeconfig "$n" 30 >/dev/null; done

cat > "$BASE/env.tmp" <<EOT
export CLUSTER_BASE=$BASE
export APISERVER=https://127.0.0.1:$APORT
export APORT=$APORT
export ETCD_PORT=$ETCD_PORT
export KUBECONFIG=$BASE/admin.kubeconfig
export BOOTSTRAP_KUBECONFIG=$BASE/bootstrap.kubeconfig
export CA_CERT=$pki/ca.crt
export CA_KEY=$pki/ca.key
export KUBECTL=$KUBECTL
export KUBE_BIN_DIR=$KB
export AUDIT_LOG=$BASE/audit.log
EOT
mv "$BASE/env.tmp" "$BASE/env"

# The controller manager makes the default service account and kube-root-ca.crt: wait for it,
# so a test starts on a control plane that behaves like a finished one.
for _ in $(seq 1 150); do
    "$KUBECTL" -n default get sa default >/dev/null 2>&1 && break
    kill -0 "$(cat "$BASE/controller-manager.pid")" 2>/dev/null \
        || { tail -20 "$BASE/controller-manager.log" >&2; die "kube-controller-manager died (log above)"; }
    sleep 0.2
done
echo "$BASE/env"
