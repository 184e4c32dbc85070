#!/bin/bash
# Build the two test images as single-layer OCI image-layout tarballs, without a registry
# or any image tooling (tar, gzip, sha256sum, gcc only), and optionally import them into
# a containerd's k8s.io namespace.
#
#   registry.k8s.io/pause:3.10       -> $CACHE/pause.oci.tar    (static pause.c, user 65535)
#   docker.io/library/busybox:1.36   -> $CACHE/busybox.oci.tar  (busybox-static + applet links)
#
#   registry.rkubelet.test/gc-a:1, gc-b:1 -> $CACHE/gc-{a,b}.oci.tar (one file each; image
#                                    GC tests only, built and imported with --gc-images)
#   registry.rkubelet.test/gc-big-a:1, gc-big-b:1 -> $CACHE/gc-big-{a,b}.oci.tar (8 MiB of
#                                    random bytes each, so that they weigh on a small image
#                                    filesystem; built once per cache, --gc-big-images)
#   registry.rkubelet.test/busybox-user:1 -> $CACHE/busybox-user.oci.tar (busybox whose
#                                    config sets "User": "1000:1000"; the CVE regression
#                                    tests only, built and imported with --user-image)
#   registry.rkubelet.test/kube-{apiserver,controller-manager,scheduler}:v1.26.1, etcd:3.4.23,
#   pause:3.9 -> $CACHE/cp-*.oci.tar (the static binaries of $KUBE_BINS and the host's etcd
#                                    with the libraries it links, in /usr/local/bin; pause
#                                    3.9 is a tag of pause 3.10; kubeadm's control plane
#                                    with imageRepository registry.rkubelet.test only,
#                                    --control-plane-images)
#   registry.rkubelet.test/csi-hostpath:1 -> $CACHE/csi-hostpath.oci.tar (busybox with the
#                                    static hostpathplugin and csi-node-driver-registrar of
#                                    $KUBE_BINS; the CSI driver pod only, --csi-image)
#
# Usage: build-images.sh [--import <containerd-socket>] [--gc-images <containerd-socket>]
#                        [--gc-big-images <containerd-socket>] [--user-image <containerd-socket>]
#                        [--csi-image <containerd-socket>]
#                        [--control-plane-images <containerd-socket>] [--force]
# Env:   RKUBELET_IMAGE_CACHE  cache directory (default ${XDG_CACHE_HOME:-$HOME/.cache}/rkubelet/test-images)
#
# Output is reproducible: fixed mtimes/owners, sorted tar, gzip -n, so the digests only
# change when pause.c, /bin/busybox or this script change. A stamp file holding the hash
# of those inputs lets repeated runs skip the build.
set -euo pipefail

PAUSE_IMAGE=registry.k8s.io/pause:3.10
BUSYBOX_IMAGE=docker.io/library/busybox:1.36
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${RKUBELET_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rkubelet/test-images}
BUSYBOX_BIN=/bin/busybox

import_sock=
gc_sock=
gc_big_sock=
user_sock=
csi_sock=
cp_sock=
force=0
while [ $# -gt 0 ]; do
    case "$1" in
        --import) import_sock=${2:?--import needs a socket path}; shift 2 ;;
        --gc-images) gc_sock=${2:?--gc-images needs a socket path}; shift 2 ;;
        --gc-big-images) gc_big_sock=${2:?--gc-big-images needs a socket path}; shift 2 ;;
        --user-image) user_sock=${2:?--user-image needs a socket path}; shift 2 ;;
        --csi-image) csi_sock=${2:?--csi-image needs a socket path}; shift 2 ;;
        --control-plane-images) cp_sock=${2:?--control-plane-images needs a socket path}; shift 2 ;;
        --force) force=1; shift ;;
        *) echo "usage: $0 [--import <containerd-socket>] [--gc-images <containerd-socket>] [--gc-big-images <containerd-socket>] [--user-image <containerd-socket>] [--csi-image <containerd-socket>] [--control-plane-images <containerd-socket>] [--force]" >&2; exit 2 ;;
    esac
done

ARCH=$(dpkg --print-architecture 2>/dev/null || uname -m)
case "$ARCH" in x86_64) ARCH=amd64 ;; aarch64) ARCH=arm64 ;; esac

mkdir -p "$CACHE"
inputs=$(cat "$HERE/pause.c" "$BUSYBOX_BIN" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)
stamp=$CACHE/inputs.sha256

# Deterministic tar of a directory tree (GNU format: no pax headers with PIDs or atimes).
det_tar() { # <dir> <out> [members...]
    local dir=$1 out=$2; shift 2
    tar -C "$dir" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
        --format=gnu -cf "$out" "$@"
}

# Move a file into blobs/sha256/<digest>; prints "<digest> <size>".
add_blob() { # <layout-dir> <file>
    local d s
    d=$(sha256sum "$2" | cut -d' ' -f1)
    s=$(stat -c %s "$2")
    mv "$2" "$1/blobs/sha256/$d"
    echo "$d $s"
}

# make_image <rootfs> <image-name> <out.tar> <config-object-json>
make_image() {
    local rootfs=$1 name=$2 out=$3 cfg=$4
    local lay diff_id layer layer_size conf conf_size man man_size
    lay=$(mktemp -d "$CACHE/.layout.XXXXXX")
    mkdir -p "$lay/blobs/sha256"

    det_tar "$rootfs" "$lay/layer.tar" .
    diff_id=$(sha256sum "$lay/layer.tar" | cut -d' ' -f1)
    # The control plane's binaries weigh 100 MiB each: level 1 packs them in seconds.
    gzip -n "-${GZIP_LEVEL:-9}" "$lay/layer.tar"
    read -r layer layer_size < <(add_blob "$lay" "$lay/layer.tar.gz")

    printf '{"architecture":"%s","config":%s,"created":"1970-01-01T00:00:00Z","history":[{"created":"1970-01-01T00:00:00Z","created_by":"rkubelet scripts/test-env/build-images.sh"}],"os":"linux","rootfs":{"diff_ids":["sha256:%s"],"type":"layers"}}' \
        "$ARCH" "$cfg" "$diff_id" > "$lay/config.json"
    read -r conf conf_size < <(add_blob "$lay" "$lay/config.json")

    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
        "$conf" "$conf_size" "$layer" "$layer_size" > "$lay/manifest.json"
    read -r man man_size < <(add_blob "$lay" "$lay/manifest.json")

    # containerd names the imported image after io.containerd.image.name.
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
        "$man" "$man_size" "$ARCH" "$name" "${name##*:}" > "$lay/index.json"
    printf '{"imageLayoutVersion":"1.0.0"}' > "$lay/oci-layout"

    # A temporary name of this process's own: parallel builds into one cache do not race.
    det_tar "$lay" "$out.$$.tmp" oci-layout index.json blobs
    mv "$out.$$.tmp" "$out"
    rm -rf "$lay"
    echo "build-images.sh: $name -> $out (image id sha256:$conf)"
}

build() {
    local work rootfs p
    work=$(mktemp -d "$CACHE/.work.XXXXXX")
    # shellcheck disable=SC2064 # expand now: $work is local
    trap "rm -rf '$work'" RETURN
    umask 022

    # pause: one static binary
    rootfs=$work/pause
    mkdir -p "$rootfs"
    gcc -static -Os -s -o "$rootfs/pause" "$HERE/pause.c"
    make_image "$rootfs" "$PAUSE_IMAGE" "$CACHE/pause.oci.tar" \
        '{"Entrypoint":["/pause"],"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"User":"65535:65535","WorkingDir":"/"}'

    # busybox: the static binary, a symlink per applet, minimal passwd/group
    rootfs=$work/busybox
    mkdir -p "$rootfs"/{bin,sbin,usr/bin,usr/sbin,etc,root,tmp,var,proc,sys,dev}
    install -m 0755 "$BUSYBOX_BIN" "$rootfs/bin/busybox"
    while read -r p; do
        [ "$p" = bin/busybox ] && continue
        mkdir -p "$rootfs/$(dirname "$p")"
        ln -sfn /bin/busybox "$rootfs/$p"
    done < <("$BUSYBOX_BIN" --list-full)
    chmod 1777 "$rootfs/tmp"
    chmod 0700 "$rootfs/root"
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$rootfs/etc/passwd"
    printf 'root:x:0:\nnobody:x:65534:\n' > "$rootfs/etc/group"
    make_image "$rootfs" "$BUSYBOX_IMAGE" "$CACHE/busybox.oci.tar" \
        '{"Cmd":["sh"],"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"WorkingDir":"/"}'

    echo "$inputs" > "$stamp"
}

if [ "$force" = 1 ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$inputs" ] \
    || [ ! -s "$CACHE/pause.oci.tar" ] || [ ! -s "$CACHE/busybox.oci.tar" ]; then
    build
else
    echo "build-images.sh: cached in $CACHE"
fi

if [ -n "$import_sock" ]; then
    for t in pause busybox; do
        ctr --address "$import_sock" -n k8s.io images import "$CACHE/$t.oci.tar" >/dev/null
    done
    echo "build-images.sh: imported $PAUSE_IMAGE and $BUSYBOX_IMAGE into $import_sock (namespace k8s.io)"
fi

# Two small images no pod of the other tests uses, for image garbage collection.
if [ -n "$gc_sock" ]; then
    for t in gc-a gc-b; do
        if [ ! -s "$CACHE/$t.oci.tar" ]; then
            work=$(mktemp -d "$CACHE/.work.XXXXXX")
            mkdir -p "$work/rootfs"
            echo "$t" > "$work/rootfs/$t"
            make_image "$work/rootfs" "registry.rkubelet.test/$t:1" "$CACHE/$t.oci.tar" \
                '{"Entrypoint":["/'"$t"'"],"WorkingDir":"/"}'
            rm -rf "$work"
        fi
        ctr --address "$gc_sock" -n k8s.io images import "$CACHE/$t.oci.tar" >/dev/null
    done
    echo "build-images.sh: imported registry.rkubelet.test/gc-a:1 and gc-b:1 into $gc_sock"
fi

# Two images of 8 MiB each (random, so gzip cannot shrink them), for image garbage
# collection on a small real filesystem.
if [ -n "$gc_big_sock" ]; then
    for t in gc-big-a gc-big-b; do
        if [ ! -s "$CACHE/$t.oci.tar" ]; then
            work=$(mktemp -d "$CACHE/.work.XXXXXX")
            mkdir -p "$work/rootfs"
            head -c 8388608 /dev/urandom > "$work/rootfs/$t"
            make_image "$work/rootfs" "registry.rkubelet.test/$t:1" "$CACHE/$t.oci.tar" \
                '{"Entrypoint":["/'"$t"'"],"WorkingDir":"/"}'
            rm -rf "$work"
        fi
        ctr --address "$gc_big_sock" -n k8s.io images import "$CACHE/$t.oci.tar" >/dev/null
    done
    echo "build-images.sh: imported registry.rkubelet.test/gc-big-a:1 and gc-big-b:1 into $gc_big_sock"
fi

# busybox with a non-root USER in its config (uid 1000, named in /etc/passwd), for the
# check that a container without runAsUser runs as the image's user, restarts included.
if [ -n "$user_sock" ]; then
    if [ ! -s "$CACHE/busybox-user.oci.tar" ]; then
        work=$(mktemp -d "$CACHE/.work.XXXXXX")
        rootfs=$work/rootfs
        mkdir -p "$rootfs"/{bin,etc,tmp,proc,sys,dev}
        install -m 0755 "$BUSYBOX_BIN" "$rootfs/bin/busybox"
        for applet in sh id sleep cat echo dd; do ln -sfn busybox "$rootfs/bin/$applet"; done
        chmod 1777 "$rootfs/tmp"
        printf 'root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/tmp:/bin/sh\n' > "$rootfs/etc/passwd"
        printf 'root:x:0:\nuser:x:1000:\n' > "$rootfs/etc/group"
        make_image "$rootfs" "registry.rkubelet.test/busybox-user:1" "$CACHE/busybox-user.oci.tar" \
            '{"Cmd":["sh"],"Env":["PATH=/bin"],"User":"1000:1000","WorkingDir":"/"}'
        rm -rf "$work"
    fi
    ctr --address "$user_sock" -n k8s.io images import "$CACHE/busybox-user.oci.tar" >/dev/null
    echo "build-images.sh: imported registry.rkubelet.test/busybox-user:1 into $user_sock"
fi

# The CSI hostpath driver's node side as clusters run it (a pod): busybox (its mount
# applet serves the driver's bind mounts) with the two static binaries of $KUBE_BINS.
# Rebuilt every time: the binaries come from the peers' folder, not this cache's inputs.
if [ -n "$csi_sock" ]; then
    bins=${KUBE_BINS:?--csi-image needs KUBE_BINS, the folder with hostpathplugin and csi-node-driver-registrar}
    work=$(mktemp -d "$CACHE/.work.XXXXXX")
    rootfs=$work/rootfs
    mkdir -p "$rootfs"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,proc,sys,dev,csi,registration}
    install -m 0755 "$BUSYBOX_BIN" "$rootfs/bin/busybox"
    while read -r p; do
        [ "$p" = bin/busybox ] && continue
        mkdir -p "$rootfs/$(dirname "$p")"
        ln -sfn /bin/busybox "$rootfs/$p"
    done < <("$BUSYBOX_BIN" --list-full)
    chmod 1777 "$rootfs/tmp"
    install -m 0755 "$bins/hostpathplugin" "$rootfs/hostpathplugin"
    install -m 0755 "$bins/csi-node-driver-registrar" "$rootfs/csi-node-driver-registrar"
    make_image "$rootfs" "registry.rkubelet.test/csi-hostpath:1" "$CACHE/csi-hostpath.oci.tar" \
        '{"Entrypoint":["/hostpathplugin"],"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"WorkingDir":"/"}'
    rm -rf "$work"
    ctr --address "$csi_sock" -n k8s.io images import "$CACHE/csi-hostpath.oci.tar" >/dev/null
    echo "build-images.sh: imported registry.rkubelet.test/csi-hostpath:1 into $csi_sock"
fi

# kubeadm's control plane as static pods (imageRepository registry.rkubelet.test): each
# binary in /usr/local/bin, where the upstream images keep it (kubeadm's manifests name the
# command only). etcd is the host's (Debian's etcd-server), with the libraries it links.
# A tarball is rebuilt when its binary is newer than it.
if [ -n "$cp_sock" ]; then
    bins=${KUBE_BINS:?--control-plane-images needs KUBE_BINS, the folder with kube-apiserver, kube-controller-manager and kube-scheduler}
    etcd_bin=$(command -v etcd) || { echo "build-images.sh: etcd not found (install-deps.sh installs etcd-server)" >&2; exit 1; }
    etcd_version=$("$etcd_bin" --version | sed -n 's/^etcd Version: //p')
    [ -n "$etcd_version" ] || { echo "build-images.sh: cannot read the version of $etcd_bin" >&2; exit 1; }
    cp_image() { # <name> <tag> <binary>
        local name=$1 tag=$2 bin=$3 out=$CACHE/cp-$1.oci.tar work lib
        if [ ! -s "$out" ] || [ "$bin" -nt "$out" ] || [ "${BASH_SOURCE[0]}" -nt "$out" ]; then
            work=$(mktemp -d "$CACHE/.work.XXXXXX")
            mkdir -p "$work/rootfs"/{usr/local/bin,etc,tmp,proc,sys,dev,var/lib}
            chmod 1777 "$work/rootfs/tmp"
            install -m 0755 "$bin" "$work/rootfs/usr/local/bin/$name"
            for lib in $(ldd "$bin" 2>/dev/null | grep -o '/[^ ]*' || true); do
                mkdir -p "$work/rootfs$(dirname "$lib")"
                cp -L "$lib" "$work/rootfs$lib"
            done
            printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$work/rootfs/etc/passwd"
            GZIP_LEVEL=1 make_image "$work/rootfs" "registry.rkubelet.test/$name:$tag" "$out" \
                '{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"WorkingDir":"/"}'
            rm -rf "$work"
        fi
        ctr --address "$cp_sock" -n k8s.io images import "$out" >/dev/null
    }
    for c in kube-apiserver kube-controller-manager kube-scheduler; do
        cp_image "$c" v1.26.1 "$bins/$c"
    done
    cp_image etcd "$etcd_version" "$etcd_bin"
    ctr --address "$cp_sock" -n k8s.io images import "$CACHE/pause.oci.tar" >/dev/null
    ctr --address "$cp_sock" -n k8s.io images tag --force "$PAUSE_IMAGE" registry.rkubelet.test/pause:3.9 >/dev/null
    echo "build-images.sh: imported the control plane's images (registry.rkubelet.test, etcd $etcd_version) into $cp_sock"
fi
