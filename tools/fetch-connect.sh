#!/usr/bin/env bash
# Fetch Apache Kafka Connect and MirrorMaker 2 from Maven Central into .cache/java/connect/:
# connect-runtime (ConnectDistributed, its REST API), connect-file (FileStream connectors),
# connect-mirror + connect-mirror-client (MirrorMaker, dedicated mode) and their runtime deps
# (tools/java/pom-connect.xml). Used by tests/ecosystem/ and by the control plane's replicators
# (controlplane/replicators.py), which run MirrorMaker from that directory.
# The version is Apache Kafka's of the other Java deps (.cache/java/VERSION, written by
# tools/fetch-java-deps.sh), else the first of $SLUICE_KAFKA_VERSIONS that resolves; it is
# recorded in .cache/java/connect/VERSION. Idempotent: checks first and says what it found.
# Never fails the build: without mvn or java, or when nothing resolves, it warns and exits 0
# (the tests then skip, saying why; CreateReplicator answers FAILED_PRECONDITION).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/.cache/java/connect"
POM="$ROOT/tools/java/pom-connect.xml"
VERSIONS="${SLUICE_KAFKA_VERSIONS:-4.3.1 4.2.1 4.1.2}"
if [[ -s "$ROOT/.cache/java/VERSION" ]]; then
    VERSIONS="$(cat "$ROOT/.cache/java/VERSION")"
fi

warn() { echo "fetch-connect: WARNING: $*" >&2; }

ready() {  # version
    [[ -s "$OUT/VERSION" && "$(cat "$OUT/VERSION")" == "$1" ]] \
        && compgen -G "$OUT/connect-runtime-$1.jar" >/dev/null \
        && compgen -G "$OUT/connect-file-$1.jar" >/dev/null \
        && compgen -G "$OUT/connect-mirror-$1.jar" >/dev/null \
        && compgen -G "$OUT/connect-mirror-client-$1.jar" >/dev/null
}

for version in $VERSIONS; do
    if ready "$version"; then
        echo "connect deps: Kafka Connect and MirrorMaker 2 $version already in .cache/java/connect"
        exit 0
    fi
done

for tool in mvn java; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        warn "$tool not found; the Connect and MirrorMaker tests will be skipped and replicators cannot run"
        exit 0
    fi
done

mkdir -p "$ROOT/.cache/java"
# Serialise concurrent runs (two `make test` at once) when flock is available.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$ROOT/.cache/java/.connect.lock"
    flock 9
    for version in $VERSIONS; do
        if ready "$version"; then
            echo "connect deps: Kafka Connect and MirrorMaker 2 $version already in .cache/java/connect"
            exit 0
        fi
    done
fi

TIMEOUT=()
command -v timeout >/dev/null 2>&1 && TIMEOUT=(timeout 1800)

start=$SECONDS
for version in $VERSIONS; do
    echo "connect deps: fetching connect-runtime, connect-file, connect-mirror, connect-mirror-client $version with mvn into .cache/java/connect"
    tmp="$OUT.tmp-$version"
    rm -rf "$tmp" "$tmp.log"
    mkdir -p "$tmp"
    if "${TIMEOUT[@]}" mvn -q -B -Dstyle.color=never -f "$POM" -Dkafka.version="$version" \
        dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp" \
        -Dmdep.overWriteReleases=true </dev/null >"$tmp.log" 2>&1; then
        echo "$version" >"$tmp/VERSION"
        rm -rf "$OUT"
        mv "$tmp" "$OUT"
        rm -f "$tmp.log"
        echo "connect deps: Kafka Connect $version ready in .cache/java/connect ($(ls "$OUT"/*.jar | wc -l) jars, $((SECONDS - start)) s)"
        exit 0
    fi
    echo "connect deps: Kafka Connect $version did not resolve: $(grep -m1 -E 'ERROR|Could not' "$tmp.log" | cut -c1-300)"
    rm -rf "$tmp" "$tmp.log"
done

warn "could not fetch Kafka Connect $VERSIONS with mvn; the Connect and MirrorMaker tests will be skipped and replicators cannot run"
exit 0
