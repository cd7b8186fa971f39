"""Shared fixtures: real broker processes on loopback, always cleaned up."""

from __future__ import annotations

import faulthandler
import os
import sys
import time
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from pytest_timeout import _get_item_settings

from spark.spark_home import use_installed_pyspark
from tests.support import kafka_python_registry, spark_cds
from tests.support.broker import REPO, BrokerProcess
from tests.support.processes import free_port
from tests.support.tiering import TEST_ADMIN
from tiered.embedded_s3 import EmbeddedS3

kafka_python_registry.install()

__all__ = ["REPO", "BrokerProcess", "free_port", "unique"]

STUCK_AFTER_S = 60 * 60
"""A suite process alive this long is stuck somewhere (the whole suite takes about half of
it): every thread's stack goes to stderr, whose tail is what a CI log shows. Per-test
hangs are pytest-timeout's (pyproject); this catches the rest, e.g. a worker that does not
exit after its last test."""


STUCK_IN_C_AFTER_S = 120
"""pytest-timeout's signal fails a test over its time unless the test is stuck inside C,
where no Python signal handler runs: this long after the test's own limit, every stack goes
to stderr and the worker process ends (pytest-xdist reports the test failed and replaces
the worker)."""

_SUITE_STARTED = time.monotonic()


def _arm_suite_dump() -> None:
    """Every stack once, STUCK_AFTER_S after the suite began (past it: never again)."""
    left = STUCK_AFTER_S - (time.monotonic() - _SUITE_STARTED)
    if left > 0:
        faulthandler.dump_traceback_later(left, exit=False, file=sys.__stderr__ or 2)
    else:
        faulthandler.cancel_dump_traceback_later()


TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
"""Every JVM the tests start (Spark, Apache Kafka, Connect, MirrorMaker, Streams, the Java
client) lives seconds to minutes and handles little data: C1 alone roughly halves its CPU
(a short local[2] Spark job: 40 CPU-s with C2, 22 with C1 only, on 2 cores), and the suite
is bound by CPU. Set as JAVA_TOOL_OPTIONS unless the environment sets that already."""


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("JAVA_TOOL_OPTIONS", TEST_JVM_OPTIONS)
    # every Spark process under the tests (sessions, billing runs made by control planes)
    # shares one Spark home (Python workers import the installed pyspark) and maps the
    # drivers' class archive, when `make spark-cds` made one (tests/support/spark_cds.py)
    use_installed_pyspark(spark_cds.SPARK_HOME_DIR)
    archive = spark_cds.existing_archive()
    if archive is not None:
        os.environ.setdefault("SPARK_SUBMIT_OPTS", spark_cds.options(archive))
    _arm_suite_dump()


LONGEST_FILES = (
    "tests/billing/test_pipeline.py",
    "tests/e2e/test_billing_workload.py",
    "tests/cli/test_formats.py",
    "tests/terraform/test_lifecycle.py",
    "tests/controlplane/test_metering.py",
    "tests/ecosystem/test_streams.py",
    "tests/terraform/test_configurations.py",
    "tests/transforms/test_broker.py",
    "tests/cli/test_billing.py",
    "tests/dataplane/test_disk_full.py",
    "tests/spark/test_cluster_name.py",
    "tests/cluster/test_many_producers.py",
    "tests/tiered/test_broker_tiering.py",
    "tests/compat/test_transactions_java.py",
    "tests/cli/test_private_endpoints.py",
    "tests/ecosystem/test_replicator.py",
    "tests/e2e/test_demo.py",
)
"""The files that take longest (minutes each on 2 loaded cores), longest first. They are
collected first, and the Makefile keeps pytest-xdist from reordering (its default sends
the files with most tests first): a file's tests run on one worker, so a long file that
starts last would finish minutes after the rest."""


@pytest.hookimpl(trylast=True)  # after pytest's own ordering by fixture, kept within a file
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    # the limit pytest-timeout itself applies (marker, --timeout, PYTEST_TIMEOUT or the ini;
    # the plugin is pinned in pyproject, so its helper's name is too)
    limit = _get_item_settings(item).timeout or 0
    if limit > 0:
        faulthandler.dump_traceback_later(
            limit + STUCK_IN_C_AFTER_S, exit=True, file=sys.__stderr__ or 2
        )
    try:
        return (yield)
    finally:
        _arm_suite_dump()


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched: object) -> None:
    """A test whose worker died is reported failed once. pytest-xdist's loadfile scheduler
    puts the dead worker's unfinished tests back in its queue, the dead one among them, so
    without this a test that kills its worker (a hang past its limit) ran again on every
    replacement worker, minutes each, until the suite ran out of time."""
    for work_unit in getattr(sched, "workqueue", {}).values():
        if crashitem in work_unit:
            work_unit[crashitem] = True


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker per test module (reuse: tests create their own topics)."""
    proc = BrokerProcess(tmp_path_factory.mktemp("broker") / "data").start()
    try:
        yield proc
    finally:
        proc.stop()
        proc.kill()


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedS3]:
    """The embedded S3 server (moto and its disk mirror) as a real process on loopback, one
    per test module (tests use their own buckets or topics)."""
    server = EmbeddedS3(tmp_path_factory.mktemp("s3") / "data", admin=TEST_ADMIN).start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[object]:
    """Factory for brokers a test owns (restarts, kills, special settings)."""
    started: list[BrokerProcess] = []

    def factory(settings: dict[str, str] | None = None, name: str = "data") -> BrokerProcess:
        proc = BrokerProcess(tmp_path / name, settings).start()
        started.append(proc)
        return proc

    yield factory
    for proc in started:
        proc.stop()
        proc.kill()


def unique(prefix: str) -> str:
    return f"{prefix}-{time.monotonic_ns()}"
