#!/usr/bin/env bash
# Fetch the Java reference implementations the tests compare Sluice against, from Maven Central:
#   .cache/java/clients/  org.apache.kafka:kafka-clients + runtime deps (tools/java/ClientHarness.java)
#   .cache/java/kafka/    Apache Kafka broker kafka_2.13 + kafka-tools (+ log4j2) for the KRaft oracle
#                         (tests/support/kafka_oracle.py) and ProducerPerformance/ConsumerPerformance
# Both use the same Kafka version: the first of $SLUICE_KAFKA_VERSIONS that fully resolves.
# Idempotent: a no-op once .cache/java/VERSION is written. Never fails the build: if Maven or Java
# is missing or the download fails, it prints a warning and exits 0 (the tests then skip, saying why).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/.cache/java"
POMS="$ROOT/tools/java"
# Newest first. (4.4.0 is listed in Central's metadata, but kafka-tools 4.4.0 is not published.)
VERSIONS="${SLUICE_KAFKA_VERSIONS:-4.3.1 4.2.1 4.1.2}"

warn() { echo "fetch-java-deps: WARNING: $*" >&2; }

has_jars() { compgen -G "$1/*.jar" >/dev/null; }

if [[ -s "$OUT/VERSION" ]] && has_jars "$OUT/clients" && has_jars "$OUT/kafka"; then
    echo "java deps: Apache Kafka $(cat "$OUT/VERSION") already in .cache/java"
    exit 0
fi

if ! command -v mvn >/dev/null 2>&1; then
    warn "mvn not found; Java-client and Apache Kafka oracle tests will be skipped"
    exit 0
fi
if ! command -v java >/dev/null 2>&1; then
    warn "java not found; Java-client and Apache Kafka oracle tests will be skipped"
    exit 0
fi

mkdir -p "$OUT"
# Serialise concurrent runs (two `make test` at once) when flock is available.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$OUT/.lock"
    flock 9
    if [[ -s "$OUT/VERSION" ]] && has_jars "$OUT/clients" && has_jars "$OUT/kafka"; then
        echo "java deps: Apache Kafka $(cat "$OUT/VERSION") already in .cache/java"
        exit 0
    fi
fi

TIMEOUT=()
command -v timeout >/dev/null 2>&1 && TIMEOUT=(timeout 1800)

copy_deps() {  # pom version outdir
    "${TIMEOUT[@]}" mvn -q -B -Dstyle.color=never -f "$POMS/$1" -Dkafka.version="$2" \
        dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$3" \
        -Dmdep.overWriteReleases=true </dev/null
}

start=$SECONDS
for version in $VERSIONS; do
    echo "java deps: fetching Apache Kafka $version (kafka-clients, kafka_2.13, kafka-tools) with mvn into .cache/java"
    tmp="$OUT/.tmp-$version"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    if copy_deps pom-clients.xml "$version" "$tmp/clients" >"$tmp/mvn.log" 2>&1 \
        && copy_deps pom-kafka.xml "$version" "$tmp/kafka" >>"$tmp/mvn.log" 2>&1; then
        rm -rf "$OUT/clients" "$OUT/kafka"
        mv "$tmp/clients" "$tmp/kafka" "$OUT/"
        echo "$version" >"$OUT/VERSION"
        rm -rf "$tmp"
        echo "java deps: Apache Kafka $version ready in .cache/java ($((SECONDS - start)) s)"
        exit 0
    fi
    echo "java deps: Kafka $version did not resolve: $(grep -m1 -E 'ERROR|Could not' "$tmp/mvn.log" | cut -c1-300)"
    rm -rf "$tmp"
done

warn "could not fetch any of Apache Kafka $VERSIONS with mvn; Java-client and Apache Kafka oracle tests will be skipped"
exit 0
