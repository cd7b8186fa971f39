#!/usr/bin/env bash
# Build franz-go's pkg/kgo test binary (its own integration tests) from the Go module proxy into
# .cache/peers/franz-go/kgo.test, for tests/peers (`make test-peers`, tests/peers/test_franz_go.py).
#
# Idempotent: nothing is done when the binary exists and is newer than this script. Everything Go
# touches (module cache, build cache) lives under .cache/ (gitignored): GOPATH=.cache/go,
# GOCACHE=.cache/go/build-cache, GOFLAGS=-modcacherw (so `make clean` can delete it).
# The module cache is read-only by default, so the module's directory is copied out to
# .cache/peers/franz-go/src and made writable before `go test -c` runs there.
#
# FRANZ_GO_VERSION overrides the module version (default v1.22.3, the one tests/peers is
# measured with).
#
# Exit status: 0 built (or already built), 2 Go is not on PATH, 3 the module could not be
# downloaded from the Go module proxy, anything else: the build failed (tests/peers skips on 2
# and 3 only).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODULE="github.com/twmb/franz-go"
VERSION="${FRANZ_GO_VERSION:-v1.22.3}"
OUT="$ROOT/.cache/peers/franz-go"
BIN="$OUT/kgo.test"
SCRIPT="${BASH_SOURCE[0]}"

if [[ -x "$BIN" && "$BIN" -nt "$SCRIPT" && -f "$OUT/VERSION" && "$(cat "$OUT/VERSION")" == "$VERSION" ]]; then
    echo "franz-go: $MODULE@$VERSION pkg/kgo test binary already built ($BIN)"
    exit 0
fi
if ! command -v go >/dev/null 2>&1; then
    echo "franz-go: Go is needed to build franz-go's tests (https://go.dev/dl/), and is not on PATH" >&2
    exit 2
fi

export GOPATH="$ROOT/.cache/go"
export GOMODCACHE="$GOPATH/pkg/mod"
export GOCACHE="$GOPATH/build-cache"
export GOFLAGS=-modcacherw
export GOTOOLCHAIN=local
mkdir -p "$OUT" "$GOPATH" "$GOCACHE"

echo "franz-go: downloading $MODULE@$VERSION from the Go module proxy ($(go env GOPROXY))"
if ! info="$(cd "$OUT" && go mod download -json "$MODULE@$VERSION" 2>&1)"; then
    error="$(printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p')"
    echo "franz-go: download of $MODULE@$VERSION failed: ${error:-$info}" >&2
    exit 3
fi
dir="$(printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
if [[ -z "$dir" || ! -d "$dir/pkg/kgo" ]]; then
    echo "franz-go: download of $MODULE@$VERSION gave no module directory with pkg/kgo:" >&2
    echo "$info" >&2
    exit 3
fi

echo "franz-go: copying $dir to ${OUT#"$ROOT/"}/src (writable)"
if [[ -d "$OUT/src" ]]; then
    chmod -R u+w "$OUT/src"
    rm -rf "$OUT/src"
fi
cp -R "$dir" "$OUT/src"
chmod -R u+w "$OUT/src"

echo "franz-go: downloading its dependencies (go mod download in src)"
if ! (cd "$OUT/src" && go mod download); then
    echo "franz-go: download of the dependencies of $MODULE@$VERSION failed" >&2
    exit 3
fi

echo "franz-go: go test -c ./pkg/kgo (compiles the package and its tests; ~30 s)"
rm -f "$BIN.tmp"
(cd "$OUT/src" && go test -c -o "$BIN.tmp" ./pkg/kgo)
mv -f "$BIN.tmp" "$BIN"
echo "$VERSION" >"$OUT/VERSION"
echo "franz-go: built $BIN"
