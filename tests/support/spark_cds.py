"""A class-data-sharing archive for the Spark drivers the tests start (``make spark-cds``).

A local Spark driver loads and verifies some 10,000 classes from its jars at every start:
a short job's JVM took 12 CPU-s (C1 only, 2 cores), 5.7-6.6 with this archive (the classes
already parsed and verified, mapped from one file), and its session started in 2.6-3.1 s
instead of 5.3-6.0. The suite starts dozens of Spark drivers (a session per pytest worker,
a JVM per billing run). JDK 17 writes a dynamic archive when a JVM started with
``-XX:ArchiveClassesAtExit`` exits; this module runs a small job that loads what the
tests' drivers load (session, SQL, Parquet, Python UDFs and data sources, a stream) and
renames the archive into place only once that JVM has exited and a JVM has mapped it
(a truncated archive crashes the JVM that maps it: SIGBUS).

``tests/conftest.py`` passes it to every Spark driver started under the tests
(``SPARK_SUBMIT_OPTS``, read by Spark's launcher). The archive names the JDK and the
pyspark it was made with, and the checkout (a hash of its Spark home's path: the class
path it was made with); a JVM whose class path or JDK differs ignores it, and its warning
goes to stderr (the JVM logs warnings to stdout by default, which broke the billing job's
one-JSON-object-per-line stdout when a checkout was moved).

    python -m tests.support.spark_cds    # prints what it did; exit 0 even when skipped
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyspark

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "jvm"
SPARK_HOME_DIR = REPO / ".cache" / "spark-home"
"""The Spark home the tests use (:mod:`spark.spark_home`); the archive's class path is its
``jars``."""


def java_version() -> str | None:
    try:
        out = subprocess.run(
            ["java", "-XshowSettings:properties", "-version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.splitlines():
        if line.strip().startswith("java.runtime.version ="):
            return line.split("=", 1)[1].strip()
    return None


def archive_path(java: str | None = None) -> Path | None:
    """Where the archive for this pyspark and JDK lives (None: no ``java``)."""
    java = java or java_version()
    if java is None:
        return None
    name = f"{_prefix()}-java-{java}-{platform.machine()}.jsa"
    return CACHE / name.replace("/", "_").replace(" ", "_")


def _prefix() -> str:
    """Archives of this pyspark made in this checkout (its Spark home's path hashed)."""
    where = hashlib.sha256(str(SPARK_HOME_DIR).encode()).hexdigest()[:10]
    return f"spark-{pyspark.__version__}-{where}"


def existing_archive() -> Path | None:
    """The archive made for this pyspark in this checkout, without asking ``java`` which
    JDK it is (a JVM of another JDK ignores it)."""
    return next(iter(sorted(CACHE.glob(f"{_prefix()}-java-*.jsa"))), None)


def options(path: Path) -> str:
    """The driver JVM's options that map the archive; the JVM's warnings (one that cannot
    use it, among them) go to stderr, not stdout."""
    return f"-XX:SharedArchiveFile={path} -Xlog:disable -Xlog:all=warning:stderr"


WORKLOAD = r"""
import os, shutil, tempfile
from pyspark.sql import SparkSession, functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader

class Numbers(DataSource):
    @classmethod
    def name(cls):
        return "numbers"
    def schema(self):
        return "n long"
    def reader(self, schema):
        return NumbersReader()

class NumbersReader(DataSourceReader):
    def read(self, partition):
        for i in range(100):
            yield (i,)

out = tempfile.mkdtemp(prefix="spark-cds-")
session = (
    SparkSession.builder.master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "4")
    .config("spark.local.dir", out)
    .getOrCreate()
)
session.sparkContext.setLogLevel("ERROR")
session.dataSource.register(Numbers)
df = session.read.format("numbers").load()
plus = F.udf(lambda n: n + 1, "long")
df.select(plus("n").alias("m")).groupBy((F.col("m") % 3).alias("k")).count().collect()
df.withColumn("k", F.col("n") % 4).write.mode("overwrite").partitionBy("k").parquet(
    os.path.join(out, "t")
)
session.read.parquet(os.path.join(out, "t")).agg(F.sum("n")).collect()
query = (
    session.readStream.format("rate").option("rowsPerSecond", "10").load()
    .writeStream.format("parquet").option("path", os.path.join(out, "s"))
    .option("checkpointLocation", os.path.join(out, "c")).trigger(availableNow=True).start()
)
query.awaitTermination(60)
session.stop()
shutil.rmtree(out, ignore_errors=True)
"""


def build(path: Path) -> str:
    """Run the workload under ``-XX:ArchiveClassesAtExit`` and move the archive to ``path``;
    what happened, in a line."""
    from spark.spark_home import use_installed_pyspark  # noqa: PLC0415 - a module of the repo

    os.environ.pop("SPARK_HOME", None)
    use_installed_pyspark(SPARK_HOME_DIR)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".spark-cds-", dir=path.parent))
    partial = staging / path.name
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_SUBMIT_OPTS": f"-XX:ArchiveClassesAtExit={partial}",
    }
    started = time.monotonic()
    try:
        # the driver's JVM is the Python process's child: both have exited when run returns
        done = subprocess.run(
            [sys.executable, "-c", WORKLOAD],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0 or not partial.is_file():
            return f"no archive (the workload exited {done.returncode}): {done.stderr[-800:]}"
        mapped = subprocess.run(
            ["java", f"-XX:SharedArchiveFile={partial}", "-version"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        if mapped.returncode != 0:
            return f"no archive (a JVM could not map it, exit {mapped.returncode})"
        partial.rename(path)
    finally:
        for leftover in staging.iterdir():
            leftover.unlink()
        staging.rmdir()
    size = path.stat().st_size / 2**20
    return f"wrote {path.relative_to(REPO)} ({size:.0f} MiB, {time.monotonic() - started:.0f} s)"


def main() -> int:
    path = archive_path()
    if path is None:
        print("spark-cds: no `java` on PATH; the tests' Spark drivers start without an archive")
        return 0
    if path.is_file():
        print(f"spark-cds: {path.relative_to(REPO)} already there")
        return 0
    for stale in CACHE.glob("spark-*.jsa"):
        stale.unlink()
    print("spark-cds: a class-data-sharing archive for the tests' Spark drivers (~30 s)")
    print(f"spark-cds: {build(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
