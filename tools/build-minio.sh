#!/usr/bin/env bash
# Build MinIO (a real S3-compatible server) from the Go module proxy into .cache/minio/minio,
# for tests/tiered/test_minio.py (`make test-minio`). Idempotent; needs Go.
# MinIO publishes no tagged Go module versions any more: the version is a pinned pseudo-version.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"
OUT="$ROOT/.cache/minio"

if [[ -x "$OUT/minio" ]]; then
    echo "minio: already built in .cache/minio"
    exit 0
fi
if ! command -v go >/dev/null 2>&1; then
    echo "minio: Go is needed to build MinIO (https://go.dev/dl/), and is not on PATH" >&2
    exit 1
fi
echo "minio: building github.com/minio/minio@$VERSION from the Go module proxy" \
     "(~1 GB of modules under .cache/go, a few minutes)"
mkdir -p "$OUT"
GOPATH="$ROOT/.cache/go" GOBIN="$OUT" GOFLAGS=-mod=mod \
    go install "github.com/minio/minio@$VERSION"
echo "minio: built $OUT/minio"
