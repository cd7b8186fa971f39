#!/usr/bin/env bash
# A Terraform binary for tests/terraform (`make terraform-bin`, a prerequisite of `make test`).
#
# `terraform` on PATH is used when present: nothing is built, and the script says which binary
# and version the tests will run. Otherwise OpenTofu is built from the Go module proxy into
# .cache/opentofu/<version>/tofu (tests/terraform/tfbin.py looks there). `go install` of
# OpenTofu fails (its go.mod has a replace directive), so the module is downloaded with
# `go mod download`, copied out of the read-only module cache and built with
# `go build ./cmd/tofu` inside the copy (~6 minutes and ~1 GB of modules the first time).
#
# Idempotent: a no-op when terraform is on PATH or the OpenTofu binary is already built.
# Everything Go touches lives under .cache/ (GOPATH=.cache/go, GOFLAGS=-modcacherw so that
# `make clean` can delete it).
#
#   tools/terraform-bin.sh           terraform from PATH, else OpenTofu (built once)
#   tools/terraform-bin.sh --tofu    build (or find) OpenTofu even when terraform is on PATH
#
# OPENTOFU_VERSION overrides the version (default v1.12.6, the one the tests are measured
# with); GO_BUILD_JOBS the parallelism of `go build` (default: Go's, the number of CPUs).
# Exit status: 0 a binary is there, 2 no terraform and no Go, 3 the module could not be
# downloaded from the Go module proxy, anything else: the build failed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODULE="github.com/opentofu/opentofu"
VERSION="${OPENTOFU_VERSION:-v1.12.6}"
OUT="$ROOT/.cache/opentofu/$VERSION"
BIN="$OUT/tofu"

if [[ "${1:-}" != "--tofu" ]] && command -v terraform >/dev/null 2>&1; then
    found="$(command -v terraform)"
    version="$(CHECKPOINT_DISABLE=1 TF_CLI_CONFIG_FILE=/dev/null HOME="${TMPDIR:-/tmp}" \
        terraform version 2>/dev/null | head -n 1 || true)"
    echo "terraform-bin: using terraform on PATH ($found${version:+, $version}); nothing to build"
    exit 0
fi
if [[ -x "$BIN" ]]; then
    echo "terraform-bin: OpenTofu $VERSION already built (${BIN#"$ROOT/"})"
    exit 0
fi
if ! command -v go >/dev/null 2>&1; then
    echo "terraform-bin: neither terraform nor Go (to build OpenTofu) is on PATH; install" \
         "Terraform (https://developer.hashicorp.com/terraform/install) or Go (https://go.dev/dl/)" >&2
    exit 2
fi

export GOPATH="$ROOT/.cache/go"
export GOMODCACHE="$GOPATH/pkg/mod"
export GOCACHE="$GOPATH/build-cache"
export GOFLAGS=-modcacherw
export GOTOOLCHAIN=local
mkdir -p "$OUT" "$GOPATH" "$GOCACHE"

if [[ "${1:-}" == "--tofu" ]]; then
    why="asked for (--tofu)"
else
    why="no terraform on PATH"
fi
echo "terraform-bin: $why; building OpenTofu $VERSION from the Go module proxy" \
     "($(go env GOPROXY); ~6 minutes and ~1 GB of modules under .cache/go the first time)"
if ! info="$(cd "$OUT" && go mod download -json "$MODULE@$VERSION" 2>&1)"; then
    error="$(printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p')"
    echo "terraform-bin: download of $MODULE@$VERSION failed: ${error:-$info}" >&2
    exit 3
fi
dir="$(printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
if [[ -z "$dir" || ! -d "$dir/cmd/tofu" ]]; then
    echo "terraform-bin: download of $MODULE@$VERSION gave no module directory with cmd/tofu:" >&2
    echo "$info" >&2
    exit 3
fi

echo "terraform-bin: copying the module to ${OUT#"$ROOT/"}/src (the module cache is read-only)"
if [[ -d "$OUT/src" ]]; then
    chmod -R u+w "$OUT/src"
    rm -rf "$OUT/src"
fi
cp -R "$dir" "$OUT/src"
chmod -R u+w "$OUT/src"

echo "terraform-bin: downloading its dependencies (go mod download in src)"
if ! (cd "$OUT/src" && go mod download); then
    echo "terraform-bin: download of the dependencies of $MODULE@$VERSION failed" >&2
    exit 3
fi

echo "terraform-bin: go build ./cmd/tofu (the longest step)"
jobs=()
if [[ -n "${GO_BUILD_JOBS:-}" ]]; then
    jobs=(-p "$GO_BUILD_JOBS")
fi
rm -f "$BIN.tmp"
(cd "$OUT/src" && go build "${jobs[@]}" -o "$BIN.tmp" ./cmd/tofu)
mv -f "$BIN.tmp" "$BIN"
chmod -R u+w "$OUT/src"
rm -rf "$OUT/src"
built="$(TF_CLI_CONFIG_FILE=/dev/null "$BIN" version 2>/dev/null | grep -m 1 'OpenTofu v' || true)"
echo "terraform-bin: built ${BIN#"$ROOT/"} (${built:-$VERSION})"
