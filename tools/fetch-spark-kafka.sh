#!/usr/bin/env bash
# Fetch Spark's Kafka connector (org.apache.spark:spark-sql-kafka-0-10_2.13) matching the pyspark
# installed in .venv, with the dependencies the pyspark wheel does not ship (kafka-clients,
# spark-token-provider-kafka, commons-pool2), from Maven Central into .cache/java/spark-kafka-VERSION/.
# Used by tests/spark/test_stock_connector.py and bench/bench_spark.py (`spark.jars`).
# Idempotent. Never fails the build: without mvn, java or a published connector it warns and
# exits 0 (those tests then skip, saying why).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$ROOT/.venv/bin/python"
warn() { echo "fetch-spark-kafka: WARNING: $*" >&2; }

version="$("$PY" -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null)"
if [[ -z "$version" ]]; then
    warn "pyspark is not installed in .venv; the stock-connector tests will be skipped"
    exit 0
fi
OUT="$ROOT/.cache/java/spark-kafka-$version"
if compgen -G "$OUT/spark-sql-kafka-0-10_2.13-*.jar" >/dev/null; then
    echo "spark-kafka: Spark's Kafka connector $version already in .cache/java"
    exit 0
fi
for tool in mvn java; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        warn "$tool not found; the stock-connector tests will be skipped"
        exit 0
    fi
done

echo "spark-kafka: fetching spark-sql-kafka-0-10_2.13 $version with mvn into .cache/java"
tmp="$OUT.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
TIMEOUT=()
command -v timeout >/dev/null 2>&1 && TIMEOUT=(timeout 900)
# the rest (scala, hadoop client, lz4, snappy, slf4j) is in pyspark's own jars/
if "${TIMEOUT[@]}" mvn -q -B -Dstyle.color=never -f "$ROOT/tools/java/pom-spark-kafka.xml" \
    -Dspark.version="$version" dependency:copy-dependencies -DincludeScope=runtime \
    -DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2 \
    -DoutputDirectory="$tmp" </dev/null >"$tmp.log" 2>&1; then
    rm -rf "$OUT"
    mv "$tmp" "$OUT"
    rm -f "$tmp.log"
    echo "spark-kafka: $(ls "$OUT" | tr '\n' ' ')"
    exit 0
fi
warn "spark-sql-kafka-0-10_2.13 $version did not resolve: $(grep -m1 -E 'ERROR|Could not' "$tmp.log" | cut -c1-300)"
rm -rf "$tmp"
exit 0
