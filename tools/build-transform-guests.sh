#!/usr/bin/env bash
# Build the WebAssembly transform guests the tests run (tests/transforms) into .cache/transforms/:
#   go/<name>.wasm   Redpanda's Go SDK (github.com/redpanda-data/redpanda/src/transform-sdk/go/transform
#                    v1.1.0, from the Go module proxy), GOOS=wasip1 GOARCH=wasm go build, one per
#                    directory of transforms/examples/go
#   c/<name>.wasm    Sluice's batch ABI, C SDK (transforms/sdk/c), clang --target=wasm32 -nostdlib
#   as/<name>.wasm   Sluice's batch ABI, AssemblyScript SDK (transforms/sdk/assemblyscript), npx asc
#                    --runtime stub (npm package assemblyscript, installed under .cache/transforms/npm)
#   wat/<name>.wasm  hand-written reference guests (transforms/examples/wat), wabt's wat2wasm
#
# Idempotent: a module is built only when it is missing or older than its sources or this script;
# each step says what it does. Toolchains are checked first and installed only when missing:
# Debian's clang, lld and wabt with apt-get (as root or with passwordless sudo), Go modules under
# .cache/go (GOPATH, GOMODCACHE, GOCACHE), npm packages under .cache/transforms/npm.
# A toolchain that cannot be had is reported (one line in .cache/transforms/STATUS per family:
# "go ok" or "go missing: <why>") and its tests skip saying why; the script still exits 0, unless
# a build itself fails (a compiler error in a guest's source), which exits 1.
set -uo pipefail
shopt -s nullglob

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPT="$ROOT/tools/build-transform-guests.sh"
EXAMPLES="$ROOT/transforms/examples"
SDK="$ROOT/transforms/sdk"
OUT="$ROOT/.cache/transforms"
STATUS="$OUT/STATUS"
ASSEMBLYSCRIPT_VERSION="0.28.20"
export DEBIAN_FRONTEND=noninteractive

mkdir -p "$OUT"
: >"$STATUS.tmp"
failed=0
say() { echo "transform guests: $*"; }
status() { echo "$1" >>"$STATUS.tmp"; }
have() { command -v "$1" >/dev/null 2>&1; }

# stale OUT SOURCES...: true when OUT is missing or older than any SOURCE (or this script)
stale() {
    local out="$1"
    shift
    [[ -f "$out" ]] || return 0
    local src
    for src in "$SCRIPT" "$@"; do
        [[ "$src" -nt "$out" ]] && return 0
    done
    return 1
}

apt_install() {  # apt_install PACKAGE...: Debian packages, only as root or with sudo -n
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        if have sudo && sudo -n true 2>/dev/null; then sudo=(sudo -n); else return 1; fi
    fi
    have apt-get || return 1
    local apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -y -q
               -o DPkg::Lock::Timeout=300 -o Dpkg::Options::=--force-confdef
               -o Dpkg::Options::=--force-confold)
    local log
    log="$(mktemp /tmp/build-transform-guests.XXXXXX.log)"
    if [[ ! -f /tmp/.sluice-apt-updated ]]; then
        "${apt[@]}" update -qq </dev/null >"$log" 2>&1 && touch /tmp/.sluice-apt-updated
    fi
    if "${apt[@]}" install --no-install-recommends "$@" </dev/null >>"$log" 2>&1; then
        rm -f "$log"
        return 0
    fi
    tail -n 5 "$log" >&2
    rm -f "$log"
    return 1
}

# ------------------------------------------------------------------ system packages
missing=()
have clang || missing+=(clang)
have wasm-ld || have wasm-ld-14 || missing+=(lld)
have wat2wasm || missing+=(wabt)
if [[ ${#missing[@]} -gt 0 ]]; then
    say "installing ${missing[*]} with apt-get (missing)"
    apt_install "${missing[@]}" || say "WARNING: apt-get install ${missing[*]} failed"
else
    say "clang, wasm-ld and wat2wasm already installed"
fi

# ------------------------------------------------------------------ Go: Redpanda's SDK
build_go() {
    if ! have go; then
        status "go missing: Go is not on PATH (https://go.dev/dl/)"
        return
    fi
    export GOPATH="$ROOT/.cache/go" GOMODCACHE="$ROOT/.cache/go/pkg/mod"
    export GOCACHE="$ROOT/.cache/go/build-cache" GOFLAGS=-modcacherw GOTOOLCHAIN=local
    mkdir -p "$GOPATH" "$GOCACHE" "$OUT/go"
    local src="$EXAMPLES/go"
    if ! (cd "$src" && go mod download 2>"$OUT/go/download.log"); then
        status "go missing: go mod download of Redpanda's transform SDK v1.1.0 failed: $(tail -n 1 "$OUT/go/download.log")"
        return
    fi
    local dir name built=0
    for dir in "$src"/*/; do
        name="$(basename "$dir")"
        if stale "$OUT/go/$name.wasm" "$dir"*.go "$src/go.mod" "$src/go.sum"; then
            say "go build $name (GOOS=wasip1 GOARCH=wasm, Redpanda's Go SDK v1.1.0)"
            if ! (cd "$src" && GOOS=wasip1 GOARCH=wasm go build -o "$OUT/go/$name.wasm.tmp" "./$name"); then
                failed=1
                continue
            fi
            mv -f "$OUT/go/$name.wasm.tmp" "$OUT/go/$name.wasm"
            built=$((built + 1))
        fi
    done
    [[ $built -eq 0 ]] && say "go guests up to date"
    status "go ok"
}

# ------------------------------------------------------------------ C: batch ABI
build_c() {
    local linker=""
    have wasm-ld && linker=wasm-ld
    [[ -z "$linker" ]] && have wasm-ld-14 && linker=wasm-ld-14
    if ! have clang || [[ -z "$linker" ]]; then
        status "c missing: clang and lld (wasm-ld) are needed (Debian: apt-get install clang lld)"
        return
    fi
    mkdir -p "$OUT/c"
    local f name built=0
    for f in "$EXAMPLES"/c/*.c; do
        name="$(basename "$f" .c)"
        if stale "$OUT/c/$name.wasm" "$f" "$SDK"/c/*.h; then
            say "clang --target=wasm32 -nostdlib $name.c (batch ABI, C SDK)"
            if ! clang --target=wasm32 -nostdlib -O2 -mbulk-memory -fuse-ld="$(command -v "$linker")" \
                -I "$SDK/c" -Wl,--no-entry -Wl,-z,stack-size=65536 \
                -o "$OUT/c/$name.wasm.tmp" "$f"; then
                failed=1
                continue
            fi
            mv -f "$OUT/c/$name.wasm.tmp" "$OUT/c/$name.wasm"
            built=$((built + 1))
        fi
    done
    [[ $built -eq 0 ]] && say "c guests up to date"
    status "c ok"
}

# ------------------------------------------------------------------ AssemblyScript: batch ABI
build_as() {
    if ! have npm || ! have node; then
        status "as missing: node and npm are needed for AssemblyScript"
        return
    fi
    local npm_dir="$OUT/npm"
    local asc="$npm_dir/node_modules/.bin/asc"
    if [[ ! -x "$asc" || "$(cat "$npm_dir/VERSION" 2>/dev/null)" != "$ASSEMBLYSCRIPT_VERSION" ]]; then
        say "npm install assemblyscript@$ASSEMBLYSCRIPT_VERSION into ${npm_dir#"$ROOT/"}"
        mkdir -p "$npm_dir"
        [[ -f "$npm_dir/package.json" ]] || echo '{"private": true}' >"$npm_dir/package.json"
        if ! (cd "$npm_dir" && npm install --no-audit --no-fund --silent \
            --cache "$npm_dir/cache" "assemblyscript@$ASSEMBLYSCRIPT_VERSION" >"$npm_dir/install.log" 2>&1); then
            status "as missing: npm install assemblyscript@$ASSEMBLYSCRIPT_VERSION failed: $(tail -n 1 "$npm_dir/install.log")"
            return
        fi
        echo "$ASSEMBLYSCRIPT_VERSION" >"$npm_dir/VERSION"
    fi
    mkdir -p "$OUT/as"
    local f name built=0
    for f in "$EXAMPLES"/assemblyscript/*.ts; do
        name="$(basename "$f" .ts)"
        if stale "$OUT/as/$name.wasm" "$f" "$SDK"/assemblyscript/*.ts; then
            say "asc $name.ts -O3 --runtime stub (batch ABI, AssemblyScript SDK)"
            # the SDK's abort handler replaces env.abort (an import the host does not provide)
            if ! (cd "$ROOT" && "$asc" "transforms/examples/assemblyscript/$name.ts" -O3 \
                --runtime stub --use abort=transforms/sdk/assemblyscript/sluice/abort \
                -o "$OUT/as/$name.wasm.tmp"); then
                failed=1
                continue
            fi
            mv -f "$OUT/as/$name.wasm.tmp" "$OUT/as/$name.wasm"
            built=$((built + 1))
        fi
    done
    [[ $built -eq 0 ]] && say "assemblyscript guests up to date"
    status "as ok"
}

# ------------------------------------------------------------------ WAT: reference guests
build_wat() {
    mkdir -p "$OUT/wat"
    local f name built=0 how
    if have wat2wasm; then how="wat2wasm"; else how="python -m wasmtime (wat2wasm missing)"; fi
    for f in "$EXAMPLES"/wat/*.wat; do
        name="$(basename "$f" .wat)"
        if stale "$OUT/wat/$name.wasm" "$f"; then
            say "$how $name.wat"
            if have wat2wasm; then
                wat2wasm --enable-all -o "$OUT/wat/$name.wasm.tmp" "$f" || { failed=1; continue; }
            else
                "$ROOT/.venv/bin/python" -c 'import sys, wasmtime; open(sys.argv[2], "wb").write(wasmtime.wat2wasm(open(sys.argv[1]).read()))' \
                    "$f" "$OUT/wat/$name.wasm.tmp" || { failed=1; continue; }
            fi
            mv -f "$OUT/wat/$name.wasm.tmp" "$OUT/wat/$name.wasm"
            built=$((built + 1))
        fi
    done
    [[ $built -eq 0 ]] && say "wat guests up to date"
    status "wat ok"
}

build_go
build_c
build_as
build_wat
mv -f "$STATUS.tmp" "$STATUS"
while read -r line; do
    [[ "$line" == *" ok" ]] || say "WARNING: $line"
done <"$STATUS"
if [[ $failed -ne 0 ]]; then
    say "a guest failed to build (see above)"
    exit 1
fi
say "done (${OUT#"$ROOT/"})"
