#!/usr/bin/env bash
# scripts/release.sh builds acpguard's release binaries: static (no cgo),
# reproducible (-trimpath, the VCS revision stamped, no build id path), for
# linux/amd64 and linux/arm64, with a SHA256SUMS file beside them.
#
# Usage: scripts/release.sh [OUTDIR]   (default: dist)
# Verify a download with: sha256sum -c --ignore-missing SHA256SUMS
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-dist}
mkdir -p "$out"
version=$(git describe --tags --always --dirty 2>/dev/null || echo unknown)
platforms=(linux/amd64 linux/arm64)

names=()
for p in "${platforms[@]}"; do
  os=${p%/*} arch=${p#*/}
  name="acpguard-$version-$os-$arch"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -buildvcs=true -trimpath -ldflags='-s -w -buildid=' -o "$out/$name" .
  names+=("$name")
done
(cd "$out" && sha256sum "${names[@]}" > SHA256SUMS)
cat "$out/SHA256SUMS"
