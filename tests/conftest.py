"""Shared fixtures: real broker processes on loopback, always cleaned up."""

from __future__ import annotations

import faulthandler
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker import REPO, BrokerProcess
from tests.support.processes import free_port
from tests.support.tiering import TEST_ADMIN
from tiered.embedded_s3 import EmbeddedS3

__all__ = ["REPO", "BrokerProcess", "free_port", "unique"]

STUCK_AFTER_S = 60 * 60
"""A suite process alive this long is stuck somewhere (the whole suite takes about half of
it): every thread's stack goes to stderr, whose tail is what a CI log shows. Per-test
hangs are pytest-timeout's (pyproject); this catches the rest, e.g. a worker that does not
exit after its last test."""


def pytest_configure(config: pytest.Config) -> None:
    faulthandler.dump_traceback_later(STUCK_AFTER_S, exit=False, file=sys.__stderr__ or 2)


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
