"""One local SparkSession for a whole pytest run (or a benchmark), with Spark's own Kafka
connector on its classpath when ``make spark-kafka`` fetched it.

Why one: a SparkSession costs ~6.5 s to start and its first Python data source query ~7 s
more (a worker starts); and the JVM that pyspark launches first keeps its driver classpath
for the life of the process, so ``spark.jars`` must be set by the first session anyway.
``format("sluice")`` is not registered here: Spark's discovery of ``pyspark_sluice`` finds
it (tests check ``spark.register`` separately). Fixtures that hand it out are
session-scoped and stop it only at the end of the run: a stopped session is not replaced
under a fixture that holds it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyspark
from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[2]
_session: Any = None


def stock_connector_jars() -> list[Path]:
    """The jars of Spark's Kafka connector matching the installed pyspark
    (``tools/fetch-spark-kafka.sh``), or [] when they were not fetched."""
    directory = REPO / ".cache" / "java" / f"spark-kafka-{pyspark.__version__}"
    jars = sorted(directory.glob("*.jar"))
    if not any(j.name.startswith("spark-sql-kafka-0-10_") for j in jars):
        return []
    return jars


def local_session(cores: int = 2) -> Any:
    """The process's SparkSession (``local[cores]`` on first use), created once."""
    global _session
    if _session is not None:
        return _session
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # workers run this interpreter (the venv's), which has pyspark, pyarrow and sluice
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    scratch = Path(tempfile.mkdtemp(prefix="sluice-spark-"))
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("sluice")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
        .config("spark.local.dir", str(scratch / "local"))
        .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={scratch}")
    )
    jars = stock_connector_jars()
    if jars:
        builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
    _session = builder.getOrCreate()
    _session.sparkContext.setLogLevel("ERROR")
    return _session


def stop_session() -> None:
    global _session
    if _session is not None:
        _session.stop()
        _session = None
