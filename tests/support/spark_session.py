"""One local SparkSession for a whole pytest run (or a benchmark), with Spark's own Kafka
connector on its classpath when ``make spark-kafka`` fetched it.

Why one: a SparkSession costs ~6.5 s to start and its first Python data source query ~7 s
more (a worker starts); and the JVM that pyspark launches first keeps its driver classpath
for the life of the process, so ``spark.jars`` must be set by the first session anyway.
``format("sluice")`` is not registered here: Spark's discovery of ``pyspark_sluice`` finds
it (tests check ``spark.register`` separately). The ``session`` fixture (imported by the
Spark and billing conftests) hands it to each test, made active for the test's thread; only
``spark_run`` stops it, at the end of the run (a module that stopped it left the modules run
next in the same worker a stopped session).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark
import pytest
from pyspark.sql import SparkSession

from spark.spark_home import use_installed_pyspark

REPO = Path(__file__).resolve().parents[2]
_session: Any = None
_scratch: Path | None = None
"""The session's scratch directory (warehouse, ``spark.local.dir``, the JVM's tmpdir),
removed when the session stops."""


def stock_connector_jars() -> list[Path]:
    """The jars of Spark's Kafka connector matching the installed pyspark
    (``tools/fetch-spark-kafka.sh``), or [] when they were not fetched."""
    directory = REPO / ".cache" / "java" / f"spark-kafka-{pyspark.__version__}"
    jars = sorted(directory.glob("*.jar"))
    if not any(j.name.startswith("spark-sql-kafka-0-10_") for j in jars):
        return []
    return jars


def local_session(cores: int = 2) -> Any:
    """The process's SparkSession (``local[cores]`` on first use), created once; made the
    active session of the JVM thread that serves the calling Python thread each time it is
    handed out (see ``activate``)."""
    global _session, _scratch
    if _session is not None:
        return activate(_session)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # workers run this interpreter (the venv's), which has pyspark, pyarrow and sluice
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    use_installed_pyspark(REPO / ".cache" / "spark-home")
    scratch = _scratch = Path(tempfile.mkdtemp(prefix="sluice-spark-"))
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
    return activate(_session)


def activate(session: Any) -> Any:
    """Make ``session`` the active session of the JVM thread serving this Python thread, as
    pyspark's own ``createDataFrame`` does on each call. The JVM keeps the active session
    per thread, and py4j may serve a Python thread from a new JVM thread later in a long
    run; ``writeStream.start()`` finds a Python data source through the active session only
    (``DATA_SOURCE_NOT_FOUND: sluice`` without one, seen in a full run)."""
    session._jvm.SparkSession.setActiveSession(session._jsparkSession)
    return session


@pytest.fixture(scope="session")
def spark_run() -> Iterator[None]:
    """Stops the run's session at the end of the run, and only then."""
    try:
        yield
    finally:
        stop_session()


@pytest.fixture
def session(spark_run: None) -> Any:
    """The run's local[2] SparkSession, shared by every test that uses Spark, made the
    active session of this test's thread (``activate``). ``format("sluice")`` is found by
    Spark's discovery of pyspark_sluice."""
    return local_session()


def stop_session() -> None:
    global _session, _scratch
    if _session is not None:
        _session.stop()
        _session = None
    if _scratch is not None:
        shutil.rmtree(_scratch, ignore_errors=True)
        _scratch = None
