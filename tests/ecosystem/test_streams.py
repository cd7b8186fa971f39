"""Kafka Streams (Apache Kafka's kafka-streams, tools/java/StreamsApp.java) with
``processing.guarantee=exactly_once_v2`` on Sluice, beside Apache Kafka (issue 18).

Three topologies get the same input on a Sluice broker and on an Apache Kafka broker (the
oracle), run side by side; what they wrote, read back with read_committed, must be the same on
both and what the input implies: the last count per word (and every count from 1 to N, so no
word is lost or counted twice), the last sum per (key, window), the joined records.

Then two instances of the word count on a 3-broker Sluice cluster (internal topics with
replication factor 3), input produced while they run, one killed with SIGKILL midway: the
other takes over its tasks and the counts stay exact. The same on a 3-node Apache Kafka is
marked ``long`` (``make test-long``).
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.conftest import BrokerProcess, unique
from tests.support.kafka_cluster import KafkaCluster
from tests.support.kafka_oracle import KafkaOracle, oracle_available
from tests.support.sluice_cluster import SluiceCluster
from tests.support.streams_app import (
    Record,
    StreamsApp,
    Topology,
    Writer,
    last_values,
    produce,
    read_committed,
    streams_available,
    transaction_states,
    values_by_key,
)

SETTINGS = {
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.num.partitions": "4",
    # the killed instance's open transaction is aborted soon after its timeout (Streams: 10 s)
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}
PARTITIONS = 3
WAIT_OUTPUT_S = 150.0
"""How long an app may take to write the output its input implies (a failure, not a pace)."""

WORDS = [
    *("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"),
    *("juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo"),
    *("sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu"),
]


@pytest.fixture(autouse=True)
def _streams() -> None:
    reason = streams_available()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def sluice(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("streams-sluice") / "data", SETTINGS).start()
    try:
        yield proc
    finally:
        proc.stop()
        proc.kill()


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaOracle]:
    reason = oracle_available()
    if reason:
        pytest.skip(reason)
    with KafkaOracle(tmp_path_factory.mktemp("streams-kafka"), extra_config=SETTINGS) as oracle:
        yield oracle


def create_topics(bootstrap: str, names: list[str], partitions: int, replicas: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    futures = admin.create_topics([NewTopic(n, partitions, replicas) for n in names])
    for future in futures.values():
        future.result(timeout=60)


# ---------------------------------------------------------------------- running apps


@dataclass(frozen=True)
class Run:
    """One app on one system, and when its output is complete."""

    name: str
    bootstrap: str
    app: StreamsApp
    output: str
    done: Callable[[list[Record]], bool]
    describe: Callable[[list[Record]], str]

    @property
    def app_id(self) -> str:
        return self.app.application_id


def run_to_completion(runs: list[Run]) -> dict[str, list[Record]]:
    """Start every app (from this thread, so they die with the test process), wait until each
    one's output (read_committed) is complete, stop them (Streams closes and commits), and
    return each one's whole output read after the stop."""
    try:
        for run in runs:
            run.app.start()
        for run in runs:
            run.app.wait_running()
        deadline = time.monotonic() + WAIT_OUTPUT_S
        waiting = list(runs)
        while waiting:
            for run in list(waiting):
                records = read_committed(run.bootstrap, run.output)
                if run.done(records):
                    waiting.remove(run)
                    continue
                run.app.check()
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"{run.name}: output incomplete after {WAIT_OUTPUT_S:.0f} s: "
                        f"{run.describe(records)}\n{run.app.tail(30)}"
                    )
            time.sleep(0.5)
    finally:
        for run in runs:
            run.app.stop()
    return {run.name: read_committed(run.bootstrap, run.output) for run in runs}


def differences(got: Mapping[str, object], want: Mapping[str, object], limit: int = 8) -> str:
    keys = sorted(set(got) | set(want), key=str)
    diff = [
        f"{k}: got {got.get(k)!r}, want {want.get(k)!r}" for k in keys if got.get(k) != want.get(k)
    ]
    return f"{len(diff)} keys differ: " + "; ".join(diff[:limit])


def both(sluice: BrokerProcess, kafka: KafkaOracle) -> dict[str, str]:
    return {"sluice": sluice.bootstrap, "kafka": kafka.bootstrap}


# ---------------------------------------------------------------------- word count


def word_lines(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(2, 9))]
        words = [w.capitalize() if rng.random() < 0.2 else w for w in words]
        lines.append(" ".join(words) + rng.choice(["", ".", "!", ", ok"]))
    return lines


def word_counts(lines: list[str]) -> dict[str, str]:
    """What StreamsApp's word count ends with: Java's ``toLowerCase().split("\\W+")`` (ASCII
    input), empty words dropped."""
    counts = Counter(w for line in lines for w in re.split(r"\W+", line.lower()) if w)
    return {w: str(n) for w, n in counts.items()}


def assert_exact_counts(records: list[Record], expected: Mapping[str, str], what: str) -> None:
    """Every word's committed updates are 1, 2, ..., N: none lost, none counted twice."""
    assert last_values(records) == expected, f"{what}: " + differences(
        last_values(records), expected
    )
    for word, seen in values_by_key(records).items():
        want = [str(i) for i in range(1, int(expected[word]) + 1)]
        assert seen == want, f"{what}: {word!r} was counted {seen[:40]} (want 1..{expected[word]})"


@pytest.mark.oracle
def test_word_count_matches_kafka(
    sluice: BrokerProcess, kafka: KafkaOracle, tmp_path: Path
) -> None:
    lines = word_lines(18, 300)
    expected = word_counts(lines)
    runs = []
    for name, bootstrap in both(sluice, kafka).items():
        app_id = unique("wc")
        source, output = f"{app_id}-lines", f"{app_id}-out"
        create_topics(bootstrap, [source, output], PARTITIONS)
        produce(bootstrap, source, [(None, line, None) for line in lines])
        app = StreamsApp(
            tmp_path / name,
            Topology.WORDCOUNT,
            bootstrap,
            application_id=app_id,
            input_topic=source,
            output_topic=output,
        )
        runs.append(
            Run(
                name,
                bootstrap,
                app,
                output,
                lambda rs: last_values(rs) == expected,
                lambda rs: differences(last_values(rs), expected),
            )
        )
    outputs = run_to_completion(runs)
    for run in runs:
        assert_exact_counts(outputs[run.name], expected, run.name)
        # the state store's changelog holds the same counts (serialized longs)
        changelog = read_committed(run.bootstrap, f"{run.app_id}-counts-changelog")
        stored = {r.key or "": str(int.from_bytes(r.value or b"", "big")) for r in changelog}
        assert stored == expected, f"{run.name} changelog: " + differences(stored, expected)
    # Streams made the same internal topics on both (a changelog, a repartition topic)
    assert internal_topics(runs[0]) == internal_topics(runs[1])


def internal_topics(run: Run) -> dict[str, tuple[int, str]]:
    """The app's internal topics as Streams made them: name suffix -> (partitions,
    cleanup.policy)."""
    app_id = run.app_id
    admin = AdminClient({"bootstrap.servers": run.bootstrap, "log_level": 0})
    topics = {
        name: len(t.partitions)
        for name, t in admin.list_topics(timeout=30).topics.items()
        if name.startswith(app_id + "-") and name.endswith(("-changelog", "-repartition"))
    }
    configs = admin.describe_configs([ConfigResource("topic", name) for name in topics])
    answer = {}
    for resource, future in configs.items():
        policy = future.result(timeout=30)["cleanup.policy"].value
        answer[resource.name.removeprefix(app_id)] = (topics[resource.name], policy)
    return answer


# ---------------------------------------------------------------------- windows

WINDOW_MS = 10_000


def window_input(seed: int, base_ms: int) -> list[tuple[str, str, int]]:
    """(key, integer value, timestamp): six keys over about a minute of record time, some
    records up to 2 s out of order (well inside the app's grace)."""
    rng = random.Random(seed)
    return [
        (f"sensor-{i % 6}", str(rng.randint(1, 100)), base_ms + i * 250 - rng.randint(0, 2000))
        for i in range(240)
    ]


def window_sums(records: list[tuple[str, str, int]]) -> dict[str, list[str]]:
    """Per "<key>@<window start>" the sums the app emits, in order (records of a key are
    processed in input order: one key, one partition)."""
    sums: dict[str, list[int]] = {}
    for key, value, ts in records:
        window = f"{key}@{ts - ts % WINDOW_MS}"
        seen = sums.setdefault(window, [])
        seen.append((seen[-1] if seen else 0) + int(value))
    return {w: [str(s) for s in seq] for w, seq in sums.items()}


@pytest.mark.oracle
def test_windowed_sums_match_kafka(
    sluice: BrokerProcess, kafka: KafkaOracle, tmp_path: Path
) -> None:
    # record time ten minutes ago, aligned to a window: the same windows on both systems
    base = (int(time.time() * 1000) // WINDOW_MS - 60) * WINDOW_MS
    records = window_input(18, base)
    updates = window_sums(records)
    expected = {w: seq[-1] for w, seq in updates.items()}
    runs = []
    for name, bootstrap in both(sluice, kafka).items():
        app_id = unique("win")
        source, output = f"{app_id}-readings", f"{app_id}-out"
        create_topics(bootstrap, [source, output], PARTITIONS)
        produce(bootstrap, source, records)
        app = StreamsApp(
            tmp_path / name,
            Topology.WINDOWED,
            bootstrap,
            application_id=app_id,
            input_topic=source,
            output_topic=output,
        )
        runs.append(
            Run(
                name,
                bootstrap,
                app,
                output,
                lambda rs: last_values(rs) == expected,
                lambda rs: differences(last_values(rs), expected),
            )
        )
    outputs = run_to_completion(runs)
    for run in runs:
        got = last_values(outputs[run.name])
        assert got == expected, f"{run.name}: " + differences(got, expected)
        # every update once, in order: a record processed twice or lost would show
        assert values_by_key(outputs[run.name]) == updates, run.name
    assert last_values(outputs["sluice"]) == last_values(outputs["kafka"])


# ---------------------------------------------------------------------- stream-table join


def join_input(
    base_ms: int,
) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, int]], list[tuple[str, str]]]:
    """(customers, orders, expected joined records). c4 has no customer record (left join:
    "/null"); c1 is renamed between two of its orders, so the join must follow record time."""
    customers = [(f"c{i}", f"name{i}", base_ms + i) for i in range(4)]
    orders = [(f"c{i % 5}", f"order{i}", base_ms + 1000 + 10 * i) for i in range(100)]
    customers.append(("c1", "renamed1", base_ms + 1000 + 10 * 50 + 5))
    names: dict[str, str] = {}
    expected = []
    events = sorted(
        [(ts, 0, k, v) for k, v, ts in customers] + [(ts, 1, k, v) for k, v, ts in orders]
    )
    for _ts, kind, key, value in events:
        if kind == 0:
            names[key] = value
        else:
            expected.append((key, f"{value}/{names.get(key, 'null')}"))
    return customers, orders, sorted(expected)


@pytest.mark.oracle
def test_stream_table_join_matches_kafka(
    sluice: BrokerProcess, kafka: KafkaOracle, tmp_path: Path
) -> None:
    base = (int(time.time() * 1000) // 1000 - 600) * 1000
    customers, orders, expected = join_input(base)
    runs = []
    for name, bootstrap in both(sluice, kafka).items():
        app_id = unique("join")
        orders_topic, table, output = f"{app_id}-orders", f"{app_id}-customers", f"{app_id}-out"
        create_topics(bootstrap, [orders_topic, table, output], PARTITIONS)
        # same partitioner for both inputs: a customer's orders and record share a partition
        produce(bootstrap, table, customers)
        produce(bootstrap, orders_topic, orders)
        app = StreamsApp(
            tmp_path / name,
            Topology.JOIN,
            bootstrap,
            application_id=app_id,
            input_topic=orders_topic,
            output_topic=output,
            table_topic=table,
        )
        runs.append(
            Run(
                name,
                bootstrap,
                app,
                output,
                lambda rs: len(rs) >= len(expected),
                lambda rs: f"{len(rs)} of {len(expected)} joined records",
            )
        )
    outputs = run_to_completion(runs)
    joined = {name: sorted((r.key or "", r.text or "") for r in rs) for name, rs in outputs.items()}
    for name, got in joined.items():
        missing = sorted((Counter(expected) - Counter(got)).elements())
        extra = sorted((Counter(got) - Counter(expected)).elements())
        assert got == expected, f"{name}: missing {missing[:5]}, extra {extra[:5]}"
    assert joined["sluice"] == joined["kafka"]


# ---------------------------------------------------------------------- failover

FAILOVER_APP = {
    "replication.factor": "3",
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "1000",
    # Streams deletes what it consumed from its repartition topic (DeleteRecords) every second
    "repartition.purge.interval.ms": "1000",
}


@pytest.fixture(scope="module")
def sluice3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SluiceCluster]:
    with SluiceCluster(tmp_path_factory.mktemp("streams-sluice3"), 3, SETTINGS) as cluster:
        yield cluster


def shared(a: StreamsApp, b: StreamsApp, tasks: list[str]) -> bool:
    """Both run, each with some of ``tasks``, together all of them once."""
    mine, theirs = a.active_tasks(), b.active_tasks()
    running = a.state() == b.state() == "RUNNING"
    return running and bool(mine) and bool(theirs) and sorted(mine + theirs) == tasks


def kill_one_of_two(bootstrap: str, workdir: Path) -> None:
    """Two word-count instances; input produced while they run; instance A killed with
    SIGKILL midway (its transaction left open); B must take over every task and the counts
    must stay exact."""
    app_id = unique("wc2")
    lines_topic, output = f"{app_id}-lines", f"{app_id}-out"
    brokers = bootstrap.split(",")
    partitions = 4
    create_topics(bootstrap, [lines_topic, output], partitions, replicas=3)
    all_tasks = sorted(f"{sub}_{p}" for sub in (0, 1) for p in range(partitions))

    def instance(name: str) -> StreamsApp:
        return StreamsApp(
            workdir / name,
            Topology.WORDCOUNT,
            bootstrap,
            application_id=app_id,
            input_topic=lines_topic,
            output_topic=output,
            config=FAILOVER_APP,
        )

    a, b = instance("a"), instance("b")
    lines = word_lines(7, 3000)
    expected = word_counts(lines)
    chunks = [lines[i : i + 50] for i in range(0, len(lines), 50)]
    halfway = threading.Event()
    feed_errors: list[BaseException] = []

    def feed() -> None:  # input keeps coming while A is killed and B takes over
        try:
            writer = Writer(bootstrap)
            for n, chunk in enumerate(chunks):
                writer.write(lines_topic, [(None, line, None) for line in chunk])
                if n == len(chunks) // 2:
                    halfway.set()
                time.sleep(0.05)
        except BaseException as exc:
            feed_errors.append(exc)
            halfway.set()

    feeder = threading.Thread(target=feed, name="feed", daemon=True)
    try:
        a.start()
        a.wait_running()
        b.start()
        b.wait_running()
        deadline = time.monotonic() + 120
        while not shared(a, b, all_tasks):  # the rebalance shares the tasks out
            a.check()
            b.check()
            assert time.monotonic() < deadline, (a.active_tasks(), b.active_tasks())
            time.sleep(0.2)
        killed_tasks = a.active_tasks()
        feeder.start()
        assert halfway.wait(120), "the input was not half written in 120 s"
        a_txn = kill_mid_transaction(a, brokers)
        deadline = time.monotonic() + 120
        while sorted(b.active_tasks()) != all_tasks:  # after A's session times out
            b.check()
            assert time.monotonic() < deadline, f"B has {b.active_tasks()}\n{b.tail(30)}"
            time.sleep(0.2)
        feeder.join(120)
        assert not feeder.is_alive(), "the input was not written in time"
        assert not feed_errors, feed_errors
        deadline = time.monotonic() + WAIT_OUTPUT_S
        while (got := last_values(read_committed(bootstrap, output))) != expected:
            b.check()
            assert time.monotonic() < deadline, differences(got, expected) + "\n" + b.tail(30)
            if any(int(n or 0) > int(expected.get(w, "0")) for w, n in got.items()):
                break  # counted twice: it cannot come right (assert_exact_counts says where)
            time.sleep(0.5)
    finally:
        a.kill()
        b.stop()
        if feeder.is_alive():
            feeder.join(60)
    assert killed_tasks, "A had no tasks when it was killed"
    assert_exact_counts(read_committed(bootstrap, output), expected, "after the failover")
    # Streams deleted what it had consumed of its repartition topic (DeleteRecords)
    starts = start_offsets(bootstrap, f"{app_id}-words-repartition")
    assert len(starts) == partitions, starts
    assert all(start > 0 for start in starts.values()), starts
    # A's transaction was left open; its coordinator aborts it (transaction.timeout.ms)
    deadline = time.monotonic() + 60
    while (state := transaction_states(brokers).get(a_txn)) != "CompleteAbort":
        assert time.monotonic() < deadline, f"A's transaction {a_txn} is {state}"
        time.sleep(0.2)


def start_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's log start offset."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "log_level": 0})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[0]
            for p in partitions
        }
    finally:
        consumer.close()


def kill_mid_transaction(app: StreamsApp, brokers: list[str]) -> str:
    """SIGKILL the app while its stream thread's transaction is open (it is paused with
    SIGSTOP until ListTransactions shows it Ongoing); its transactional id."""
    (txn_id,) = app.transactional_ids()
    deadline = time.monotonic() + 60
    while True:
        app.pause()
        time.sleep(0.2)  # what it sent before the pause is answered
        state = transaction_states(brokers).get(txn_id)
        if state == "Ongoing":
            app.kill()
            return txn_id
        app.resume()
        assert time.monotonic() < deadline, f"{txn_id} is never Ongoing (last: {state})"
        time.sleep(0.05)


def test_killed_instance_hands_over_exactly_on_sluice(
    sluice3: SluiceCluster, tmp_path: Path
) -> None:
    kill_one_of_two(sluice3.bootstrap, tmp_path)


@pytest.mark.oracle
@pytest.mark.long
def test_killed_instance_hands_over_exactly_on_kafka(tmp_path: Path) -> None:
    reason = oracle_available()
    if reason:
        pytest.skip(reason)
    with KafkaCluster(tmp_path / "kafka", 3, extra_config=SETTINGS) as cluster:
        kill_one_of_two(cluster.bootstrap, tmp_path)
