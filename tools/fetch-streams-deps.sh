#!/usr/bin/env bash
# Fetch Apache Kafka Streams (org.apache.kafka:kafka-streams + runtime deps: kafka-clients,
# rocksdbjni, slf4j) from Maven Central into .cache/java/streams/, for tools/java/StreamsApp.java
# (tests/ecosystem/test_streams.py, docs/streams.md). The version is the one
# tools/fetch-java-deps.sh settled on (.cache/java/VERSION), so Streams, the Java client and the
# Kafka oracle are one release; run `make java-deps` first (`make streams-deps` does).
# Idempotent: a no-op once .cache/java/streams/kafka-streams-<VERSION>.jar is there. Never fails
# the build: without mvn, java, .cache/java/VERSION or a download, it warns and exits 0 (the
# Streams tests then skip, saying why).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache/java"
OUT="$CACHE/streams"
warn() { echo "fetch-streams-deps: WARNING: $*" >&2; }

if [[ ! -s "$CACHE/VERSION" ]]; then
    warn "no .cache/java/VERSION (run tools/fetch-java-deps.sh first); the Streams tests will be skipped"
    exit 0
fi
version="$(cat "$CACHE/VERSION")"
ready() { [[ -f "$OUT/kafka-streams-$version.jar" ]]; }
if ready; then
    echo "streams deps: Kafka Streams $version already in .cache/java/streams"
    exit 0
fi
for tool in mvn java; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        warn "$tool not found; the Streams tests will be skipped"
        exit 0
    fi
done

# Serialise concurrent runs (two `make test` at once) when flock is available.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$CACHE/.streams.lock"
    flock 9
    if ready; then
        echo "streams deps: Kafka Streams $version already in .cache/java/streams"
        exit 0
    fi
fi

TIMEOUT=()
command -v timeout >/dev/null 2>&1 && TIMEOUT=(timeout 1800)
echo "streams deps: fetching Kafka Streams $version (kafka-streams, rocksdbjni) with mvn into .cache/java/streams"
start=$SECONDS
tmp="$OUT.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
if "${TIMEOUT[@]}" mvn -q -B -Dstyle.color=never -f "$ROOT/tools/java/pom-streams.xml" \
    -Dkafka.version="$version" dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$tmp" -Dmdep.overWriteReleases=true </dev/null >"$tmp.log" 2>&1; then
    rm -rf "$OUT"
    mv "$tmp" "$OUT"
    rm -f "$tmp.log"
    echo "streams deps: Kafka Streams $version ready in .cache/java/streams ($((SECONDS - start)) s)"
    exit 0
fi
warn "kafka-streams $version did not resolve: $(grep -m1 -E 'ERROR|Could not' "$tmp.log" | cut -c1-300)"
rm -rf "$tmp" "$tmp.log"
exit 0
