"""A short subset of franz-go's own integration tests against Sluice, in the normal suite.

* TestClient_Produce (idempotent produce of 1000 records, checking offsets) against one
  broker;
* TestGroupETL with KGO_TEST_RECORDS=20000 (a producer, then chains of consumer groups with the
  range, cooperative-sticky and static-membership balancers that consume, re-produce and commit
  while members join and leave, checking nothing is consumed twice or out of order) against a
  3-broker cluster with replication factor 3.

The test binary is built by tools/build-franz-go.sh (cached in .cache/peers); the tests skip only
when Go is absent or the module cannot be downloaded. The full table against Kafka is
``python -m tests.peers.run`` (README.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import BrokerProcess
from tests.peers import franz_go, targets
from tests.support.sluice_cluster import SluiceCluster

ETL_RECORDS = 20000


@pytest.fixture(scope="module")
def kgo_binary() -> Path:
    try:
        return franz_go.build(quiet=True)
    except franz_go.BuildUnavailable as exc:
        pytest.skip(f"franz-go's tests cannot be built here: {exc}")


@pytest.fixture
def sluice3(tmp_path: Path) -> Iterator[SluiceCluster]:
    with SluiceCluster(tmp_path / "cluster", brokers=3) as cluster:
        yield cluster


def _run(
    binary: Path, test: str, bootstrap: str, log: Path, *, rf: int, records: int | None = None
) -> franz_go.Outcome:
    return franz_go.run_kgo_test(
        test,
        franz_go.kgo_env(bootstrap, rf, records),
        log,
        timeout=240,
        binary=binary,
        tail_lines=40,
    )


def _explain(outcome: franz_go.Outcome, logs: dict[Path, str]) -> str:
    parts = [
        f"franz-go {outcome.test}: {outcome.status} after {outcome.seconds:.1f} s "
        f"(full output {outcome.log_path}); last lines:",
        *outcome.tail,
    ]
    for path, text in logs.items():
        tracebacks = targets.find_tracebacks(text, franz_go.REPO)
        tail = "\n".join(text.splitlines()[-30:])
        parts.append(f"--- {path.name}: {len(tracebacks)} traceback(s) during the test; tail:")
        parts += [f"  {tb.short()}" for tb in tracebacks[:5]]
        parts.append(tail)
    return "\n".join(parts)


def test_produce_single_broker(kgo_binary: Path, broker: BrokerProcess, tmp_path: Path) -> None:
    watch = targets.LogWatch([broker.log_path])
    outcome = _run(kgo_binary, "TestClient_Produce", broker.bootstrap, tmp_path / "kgo.log", rf=1)
    assert outcome.status == "pass", _explain(outcome, watch.new_text())


# three brokers at RF 3 under franz-go's group client; test_produce_single_broker runs
# franz-go in `make test`
@pytest.mark.long
def test_group_etl_three_brokers_rf3(
    kgo_binary: Path, sluice3: SluiceCluster, tmp_path: Path
) -> None:
    watch = targets.LogWatch([b.log_path for b in sluice3.brokers])
    outcome = _run(
        kgo_binary,
        "TestGroupETL",
        sluice3.bootstrap,
        tmp_path / "kgo.log",
        rf=3,
        records=ETL_RECORDS,
    )
    assert outcome.status == "pass", _explain(outcome, watch.new_text())
