#!/usr/bin/env bash
# Builds the container images the project's container paths start, from Debian's packages, on a
# machine where no registry answers (docs: devkit/containers/README.md):
#
#   local/rabbitmq:4-management   RabbitMQ 4.0.5 + management, Debian trixie   (RABBITMQ_IMAGE)
#   local/postgres:15             PostgreSQL 15, Debian bookworm                 (POSTGRES_IMAGE)
#
# Idempotent: an image that exists is kept; the debootstrap trees stay in $CACHE (outside the
# repository) and are imported again only if their base image was removed.
#
#   build-images.sh [rabbitmq4] [postgres15]     (default: both)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
CACHE=${RM_CONTAINERS_CACHE:-/var/cache/reliable-messaging}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

step() { printf '%s\n' "$*"; }
has_image() { docker image inspect "$1" >/dev/null 2>&1; }

docker info >/dev/null 2>&1 || {
  echo "no Docker engine answers: start one with devkit/containers/engine.sh start" >&2
  exit 1
}

# base <suite>: local/debian:<suite>-minbase from a debootstrap tree (kept in $CACHE/rootfs/<suite>)
base() {
  local suite=$1 image=local/debian:$1-minbase dir=$CACHE/rootfs/$1 t=$SECONDS
  if has_image "$image"; then return; fi
  if [[ ! -e $dir/.complete ]]; then
    step "debootstrap $suite (minbase) into $dir"
    rm -rf "$dir" && mkdir -p "$dir"
    debootstrap --variant=minbase "$suite" "$dir" "$MIRROR" >"$CACHE/debootstrap-$suite.log" 2>&1 || {
      echo "debootstrap $suite failed (see $CACHE/debootstrap-$suite.log)" >&2
      exit 1
    }
    rm -rf "$dir"/var/cache/apt/archives/*.deb
    touch "$dir/.complete"
  fi
  step "importing $image"
  tar -C "$dir" --exclude=./.complete -c . | docker import - "$image" >/dev/null
  step "  $image in $((SECONDS - t)) s"
}

# build <name> <suite> <image>
build() {
  local name=$1 suite=$2 image=$3 t=$SECONDS
  if has_image "$image"; then
    step "$image: present"
    return
  fi
  base "$suite"
  step "building $image"
  # the legacy builder (no buildx in bookworm); host network: apt reaches the mirror
  DOCKER_BUILDKIT=0 docker build -q --network host -t "$image" "$here/$name" >/dev/null
  step "  $image in $((SECONDS - t)) s"
}

mkdir -p "$CACHE"
targets=("$@")
((${#targets[@]})) || targets=(rabbitmq4 postgres15)
# debootstrap, once and before the parallel builds (two apt-get runs at once fail on dpkg's lock:
# seen on a fresh machine), and only when an image is missing
missing=0
for target in "${targets[@]}"; do
  case $target in
    rabbitmq4) has_image "${LOCAL_RABBITMQ_IMAGE:-local/rabbitmq:4-management}" || missing=1 ;;
    postgres15) has_image "${LOCAL_POSTGRES_IMAGE:-local/postgres:15}" || missing=1 ;;
  esac
done
if ((missing)) && ! command -v debootstrap >/dev/null; then
  step "installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi
# The images share nothing (two suites): build them side by side, most of a cold build is waiting
# for the mirror and for dpkg.
pids=()
for target in "${targets[@]}"; do
  case $target in
    rabbitmq4) build rabbitmq4 trixie "${LOCAL_RABBITMQ_IMAGE:-local/rabbitmq:4-management}" & ;;
    postgres15) build postgres15 bookworm "${LOCAL_POSTGRES_IMAGE:-local/postgres:15}" & ;;
    *) echo "unknown image $target (rabbitmq4, postgres15)" >&2; exit 64 ;;
  esac
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
exit "$status"
