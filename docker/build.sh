#!/usr/bin/env bash
# Build the gearbox-hil image on any machine with podman or docker (docker/README.md).
#
#   docker/build.sh [--tag TAG] [--base IMAGE | --debootstrap] [--no-cache]
#
# The base: --base IMAGE when given; else the upstream python:3.11-slim-bookworm when it is present or can be
# pulled; else a base made from Debian's own packages (debootstrap, Python 3.11 and a venv on PATH), built
# once per machine and kept as localhost/gearbox-hil-base:bookworm in the engine's image store (the
# debootstrap folder is temporary, outside the source tree).  Making that base needs root and debootstrap.
# Prints the time each stage took; the image's JIT warm-up report is in the image (warmup-build.log).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HERE="$ROOT/docker"

TAG=gearbox-hil:latest
BASE=""
FORCE_DEBOOTSTRAP=0
NO_CACHE=()
UPSTREAM=docker.io/library/python:3.11-slim-bookworm
DEBOOTSTRAP_BASE=localhost/gearbox-hil-base:bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) TAG=$2; shift 2 ;;
    --base) BASE=$2; shift 2 ;;
    --debootstrap) FORCE_DEBOOTSTRAP=1; shift ;;
    --no-cache) NO_CACHE=(--no-cache); shift ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done

ENGINE=$("$HERE/engine.sh" name) || exit 1
mapfile -t GLOBAL < <("$HERE/engine.sh" global)
say() { echo "build.sh: $*"; }
since() { echo "$(( $(date +%s) - $1 )) s"; }

have_image() { "$ENGINE" "${GLOBAL[@]}" image inspect "$1" >/dev/null 2>&1; }

debootstrap_base() {
  if have_image "$DEBOOTSTRAP_BASE"; then
    say "base $DEBOOTSTRAP_BASE: built before on this machine"
    return 0
  fi
  if [ "$(id -u)" != 0 ] || ! command -v debootstrap >/dev/null 2>&1; then
    echo "build.sh: no registry reachable for $UPSTREAM and no way to make a base here: debootstrap needs" \
         "root and Debian's debootstrap package (or pass --base IMAGE)" >&2
    exit 1
  fi
  local t0 rootfs
  t0=$(date +%s)
  rootfs=$(mktemp -d "${TMPDIR:-/var/tmp}/gearbox-hil-base.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  say "base: debootstrap --variant=minbase bookworm from $MIRROR (a few minutes, once per machine)"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$rootfs" "$MIRROR" \
    > "$rootfs.log" 2>&1 || { tail -20 "$rootfs.log" >&2; exit 1; }
  # Debian's Python refuses pip installs into the system (PEP 668): the image's Python is a venv on PATH
  chroot "$rootfs" python3 -m venv /opt/venv
  cat > "$rootfs/etc/apt/sources.list" <<SOURCES
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SOURCES
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs.log"
  tar -C "$rootfs" -c . | "$ENGINE" "${GLOBAL[@]}" import \
    --change 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["python"]' - "$DEBOOTSTRAP_BASE" >/dev/null
  rm -rf "$rootfs"
  trap - EXIT
  say "base $DEBOOTSTRAP_BASE made in $(since "$t0")"
}

T_ALL=$(date +%s)
if [ -z "$BASE" ] && [ "$FORCE_DEBOOTSTRAP" = 0 ]; then
  if have_image "$UPSTREAM" || timeout 300 "$ENGINE" "${GLOBAL[@]}" pull -q "$UPSTREAM" >/dev/null 2>&1; then
    BASE=$UPSTREAM
  else
    say "$UPSTREAM cannot be pulled here: a base from Debian's packages instead"
  fi
fi
if [ -z "$BASE" ]; then
  debootstrap_base
  BASE=$DEBOOTSTRAP_BASE
fi

# the host's CA certificates as a build secret: pip inside the build then trusts what the host trusts (a
# network's HTTPS proxy with its own CA); never stored in the image
CA_BUNDLE=${GEARBOX_HIL_CA_BUNDLE:-${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}}
SECRET=()
[ -s "$CA_BUNDLE" ] && SECRET=(--secret "id=ca_bundle,src=$CA_BUNDLE")
say "building $TAG from $BASE with $ENGINE"
T_BUILD=$(date +%s)
if [ "$ENGINE" = podman ]; then
  # chroot isolation: RUN steps need no OCI runtime or cgroup set-up; docker format keeps the HEALTHCHECK
  podman "${GLOBAL[@]}" build --isolation "${BUILDAH_ISOLATION:-chroot}" --format docker --layers \
    --ignorefile "$HERE/Dockerfile.dockerignore" "${NO_CACHE[@]}" "${SECRET[@]}" \
    --build-arg "BASE=$BASE" -f "$HERE/Dockerfile" -t "$TAG" "$ROOT"
else
  DOCKER_BUILDKIT=1 docker build "${NO_CACHE[@]}" "${SECRET[@]}" --build-arg "BASE=$BASE" -f "$HERE/Dockerfile" -t "$TAG" "$ROOT"
fi
say "image $TAG built in $(since "$T_BUILD") ($(since "$T_ALL") in all)"
