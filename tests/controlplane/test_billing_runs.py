"""Billing runs below the API (controlplane/billing.py, billing_runs.py): the schedule's
times, the record of a run, the spec's view of a secured cluster, and what happens to a
job's process when a run times out, when the control plane stops, and when a control plane
starts and finds a run the last one left RUNNING (real processes, killed by the runner)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controlplane.billing import BillingRunner, cluster_source, next_run_ms, runs_job
from controlplane.billing_runs import BillingRun, BillingRunState, BillingTrigger, Progress
from controlplane.config import Settings
from controlplane.errors import BillingRunNotFound
from controlplane.objectstore import ObjectStoreManager
from controlplane.process import read_cmdline
from controlplane.states import ClusterState
from controlplane.store import ClusterRecord, Store
from tests.controlplane.harness import wait_until
from wire.sasl import Mechanism, SaslCredentials, write_credentials

HOUR = 3_600_000


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "state.db")
    yield opened
    opened.close()


def runner(store: Store, home: Path, **settings: int) -> BillingRunner:
    values = Settings(billing_schedule_interval_ms=0, **settings)
    objects = ObjectStoreManager(home, store, values, "http://127.0.0.1:9")  # nothing started
    return BillingRunner(store, values, home, objects)


def spec_left(billing: BillingRunner, run_id: str) -> bool:
    return billing.spec_path(run_id).exists()


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def test_the_schedule_runs_at_the_offset_past_each_interval() -> None:
    at_hour = 1_764_104_400_000  # 2025-11-25T21:00:00Z
    assert next_run_ms(at_hour, HOUR, 300_000) == at_hour + 300_000
    assert next_run_ms(at_hour + 300_000, HOUR, 300_000) == at_hour + HOUR + 300_000
    assert next_run_ms(at_hour + 299_999, HOUR, 300_000) == at_hour + 300_000
    assert next_run_ms(at_hour + 400_000, HOUR, 0) == at_hour + HOUR
    assert next_run_ms(at_hour + 1, 60_000, 5_000) == at_hour + 5_000


def test_progress_lines() -> None:
    line = '{"stage": "ingest", "cluster": "a", "done": 1, "total": 2, "message": "m"}'
    parsed = Progress.parse(line)
    assert parsed == Progress("ingest", "a", 1, 2, "m")
    assert parsed is not None
    assert parsed.text() == "ingest a 1/2: m"
    assert Progress.parse(parsed.to_json()) == parsed
    assert Progress.parse('{"stage": "done", "done": true}') == Progress("done")
    for noise in ("26/11/25 WARN something", "[1, 2]", '{"no": "stage"}', ""):
        assert Progress.parse(noise) is None


def test_runs_are_recorded_and_listed(store: Store, tmp_path: Path) -> None:
    billing = runner(store, tmp_path)
    for i in range(3):
        billing.runs.insert(BillingRun(f"run-{i}", BillingTrigger.SCHEDULED, requested_at=i))
    billing.runs.started("run-1", 1234, ("a", "b"))
    billing.runs.note_progress("run-1", Progress("rollup", "a", 1, 2))
    billing.runs.finish("run-1", BillingRunState.SUCCEEDED, offsets={"a": {0: 17}})
    billing.runs.finish("run-1", BillingRunState.FAILED, "too late")  # the outcome stays
    done = billing.runs.get("run-1")
    assert (done.state, done.pid, done.clusters, done.error) == (
        BillingRunState.SUCCEEDED,
        1234,
        ("a", "b"),
        "",
    )
    assert done.progress == Progress("rollup", "a", 1, 2)
    assert done.offsets == {"a": {0: 17}}
    assert [r.id for r in billing.runs.all()] == ["run-0", "run-1", "run-2"]
    assert [r.id for r in billing.runs.all(limit=2)] == ["run-1", "run-2"]
    assert [r.id for r in billing.runs.unfinished()] == ["run-0", "run-2"]
    with pytest.raises(BillingRunNotFound, match="billing run 'run-9' not found"):
        billing.runs.get("run-9")


def test_a_secured_cluster_is_read_as_its_internal_user(tmp_path: Path) -> None:
    credentials = tmp_path / "internal.json"
    write_credentials(
        credentials, SaslCredentials("sluice-internal", "s3cret", Mechanism.SCRAM_SHA_512)
    )
    secured = ClusterRecord(
        "a", "id-a", ClusterState.ACTIVE, 2, internal_credentials=str(credentials)
    )
    assert cluster_source(secured, ["127.0.0.1:1", "127.0.0.1:2"]) == {
        "name": "a",
        "id": "id-a",
        "bootstrap": "127.0.0.1:1,127.0.0.1:2",
        "options": {
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.username": "sluice-internal",
            "kafka.sasl.password": "s3cret",
        },
    }
    open_one = ClusterRecord("b", "id-b", ClusterState.ACTIVE, 1)
    assert cluster_source(open_one, ["127.0.0.1:3"])["options"] == {}


def test_a_restarted_control_plane_fails_what_was_left_running_and_kills_the_job(
    store: Store, tmp_path: Path
) -> None:
    first = runner(store, tmp_path)
    spec = str(first.spec_path("run-left"))
    # a process that looks like the job of run-left (its command line names the module
    # and the run's spec), and one that does not (a reused pid: never killed)
    job = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)", "billing.job", "--spec", spec],
        start_new_session=True,
    )
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True
    )
    try:
        first.runs.insert(BillingRun("run-left", BillingTrigger.SCHEDULED, requested_at=1))
        first.runs.started("run-left", job.pid, ("a",))
        first.runs.insert(BillingRun("run-queued", BillingTrigger.ON_DEMAND, requested_at=2))
        first.runs.insert(BillingRun("run-reused", BillingTrigger.ON_DEMAND, requested_at=3))
        first.runs.started("run-reused", other.pid, ("a",))
        # (the command line shows a moment after exec: the kernel sets it up last)
        wait_until(lambda: runs_job(job.pid, spec), 10, "the job's command line")
        wait_until(lambda: read_cmdline(other.pid), 10, "the other's command line")
        assert not runs_job(other.pid, spec)
        runner(store, tmp_path).start()  # the next control plane
        assert job.wait(30) == -9
        assert other.poll() is None, "a process that is not the run's job is left alone"
        for run_id in ("run-left", "run-queued", "run-reused"):
            run = first.runs.get(run_id)
            assert run.state is BillingRunState.FAILED
            assert run.error.startswith("control plane restarted while the run was ")
            assert run.finished_at is not None
    finally:
        for proc in (job, other):
            proc.kill()
            proc.wait()


async def test_a_run_past_its_timeout_is_stopped(store: Store, tmp_path: Path) -> None:
    billing = runner(store, tmp_path, billing_run_timeout_ms=1)
    run, already = billing.request(BillingTrigger.ON_DEMAND)
    assert not already
    again, already = billing.request(BillingTrigger.ON_DEMAND)
    assert already
    assert again.id == run.id
    assert billing._task is not None
    await asyncio.wait_for(billing._task, 60)
    done = billing.runs.get(run.id)
    assert done.state is BillingRunState.FAILED
    assert "billing.run.timeout.ms" in done.error
    assert done.pid > 0
    assert not alive(done.pid)
    assert not spec_left(billing, run.id)
    assert billing.current is None
    after, already = billing.request(BillingTrigger.ON_DEMAND)  # a new one may start now
    assert not already
    assert after.id != run.id
    await billing.stop()


async def test_a_stopping_control_plane_stops_the_job(store: Store, tmp_path: Path) -> None:
    billing = runner(store, tmp_path)
    run, _ = billing.request(BillingTrigger.ON_DEMAND)
    deadline = time.monotonic() + 60
    while billing.runs.get(run.id).state is not BillingRunState.RUNNING:
        assert time.monotonic() < deadline, "the job never started"
        await asyncio.sleep(0.05)
    pid = billing.runs.get(run.id).pid
    await billing.stop()
    done = billing.runs.get(run.id)
    assert done.state is BillingRunState.FAILED
    assert done.error == "control plane stopped while the run was RUNNING"
    wait_until(lambda: not group_alive(pid), 30, "the job's process group to exit")


def group_alive(pgid: int) -> bool:
    """Some process of the group (the job, Spark's JVM) still runs."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
