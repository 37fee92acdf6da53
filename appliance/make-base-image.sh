#!/usr/bin/env bash
# Build the local Debian base image when this machine's Docker cannot pull one
# (no registry reachable). debootstrap fetches Debian packages, which works
# where registries do not; the result is imported as a plain image.
#   appliance/make-base-image.sh [IMAGE [EXTRA,PACKAGES]]   (default trace-tui/debian-base:bookworm)
# The image's tag names the Debian suite (bookworm, trixie). The gpu flavour's base adds python3-dev,
# gcc, libc6-dev, git and curl; the cpu flavour's vLLM base (infer, score) is trixie with what vLLM's CPU
# build loads (appliance/pins.json).
set -euo pipefail
image="${1:-trace-tui/debian-base:bookworm}"
extra="${2:-}"
suite="${image##*:}"
if docker image inspect "$image" >/dev/null 2>&1; then
  # A base made before a package was added to appliance/pins.json lacks it: check, and make it again if so.
  if [[ -z "$extra" ]] || docker run --rm --network none "$image" dpkg-query -W ${extra//,/ } >/dev/null 2>&1; then
    echo "base image $image present"
    exit 0
  fi
  echo "base image $image lacks some of $extra: building it again"
fi
command -v debootstrap >/dev/null || { echo "debootstrap missing: apt-get install -y debootstrap" >&2; exit 3; }
rootfs="$(mktemp -d)"
trap 'rm -rf "$rootfs"' EXIT
echo "building $image with debootstrap (Docker here cannot pull; a minute or two)"
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates${extra:+,$extra} "$suite" "$rootfs" >/dev/null
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | docker import --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
echo "built $image: $(docker image inspect --format '{{.Id}}' "$image")"
