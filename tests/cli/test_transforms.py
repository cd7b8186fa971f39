"""WebAssembly transforms through cloudctl (the Transforms service) on the shared 3-broker
cluster, with real guests (``make transform-guests``: Redpanda's Go SDK and Sluice's C batch
SDK) and a real Kafka client (confluent-kafka) producing the input and reading the outputs.

Outputs are the inputs (at least once: in order, a replay only from an earlier record) for
identity guests; describe merges every broker's runners into
one row per input partition (state, broker, committed offset, lag); pause stops, resume and
redeploy continue from the committed offsets (nothing processed twice); a guest's panic
fails its partition only, with the panic in describe and in transform-logs; delete removes
the transform and keeps the topics; refused deploys change nothing; errors carry their
ErrorInfo reason through gRPC. Four deploys in all: the transforms are compiled by every
broker, which is the slow part.
"""

from __future__ import annotations

import contextlib
import json
import queue
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml  # type: ignore[import-untyped]  # PyYAML ships no type information
from confluent_kafka import Consumer, Producer

from proto.sluice.v1 import errors_pb2 as epb
from proto.sluice.v1 import transforms_pb2 as pb
from sluice_client.client import ApiError, Client
from tests.cli.conftest import SHARED_CLUSTER, Cloud
from tests.support import cluster_workload
from tests.support.cluster_workload import high_watermark
from tests.transforms.conftest import BUILD, GUESTS, Guests
from tests.transforms.kafka_io import Row, read_all

pytestmark = pytest.mark.timeout(600)  # builds and deploys Wasm guests on a cluster

CLUSTER = SHARED_CLUSTER
PARTITIONS = 3
GO, GO_IN, GO_OUT = "tf-go", "tf-go-in", "tf-go-out"
C, C_IN, C_OUT = "tf-c", "tf-c-in", "tf-c-out"
PANIC, PANIC_IN, PANIC_OUT = "tf-panic", "tf-panic-in", "tf-panic-out"
TOPICS = [GO_IN, GO_OUT, C_IN, C_OUT, PANIC_IN, PANIC_OUT]
WAIT = 240.0
"""Deadline of a transform to reach a state (every broker compiles the module first; a
Go module takes seconds on a busy 2-core machine)."""

Rows = dict[int, list[Row]]
"""Per partition, the records (key, value, headers) in order."""


# ---------------------------------------------------------------------- helpers


def cli(cloud: Cloud, *args: str) -> Any:
    done = cloud.run(*args, "--cluster", CLUSTER, "-o", "json")
    assert done.returncode == 0, f"cloudctl {' '.join(args)}: {done.stderr}"
    return json.loads(done.stdout)


def refused(cloud: Cloud, *args: str, code: int = 1) -> str:
    """The one error line of a command that must fail with exit ``code``."""
    done = cloud.run(*args)
    assert done.returncode == code, f"cloudctl {' '.join(args)}: {done.stdout} {done.stderr}"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("cloudctl: error: "), lines
    return lines[0]


def describe(cloud: Cloud, name: str) -> dict[str, Any]:
    found: dict[str, Any] = cli(cloud, "describe-transform", name)
    return found


def wait_for(
    cloud: Cloud, name: str, check: Callable[[dict[str, Any]], bool], what: str
) -> dict[str, Any]:
    """The transform once ``check`` holds of its description (polled until ``WAIT``)."""
    deadline = time.monotonic() + WAIT
    seen: dict[str, Any] = {}
    while time.monotonic() < deadline:
        seen = describe(cloud, name)
        if check(seen):
            return seen
        time.sleep(0.5)
    raise AssertionError(f"transform {name} not {what} after {WAIT}s: {json.dumps(seen)}")


def caught_up(ends: dict[int, int]) -> Callable[[dict[str, Any]], bool]:
    """RUNNING on every partition, nothing left: committed offset = input end offset."""

    def check(t: dict[str, Any]) -> bool:
        return t["state"] == "RUNNING" and [
            (p["partition"], p["state"], p["committed_offset"], p["lag"]) for p in t["partitions"]
        ] == [(p, "PARTITION_RUNNING", end, 0) for p, end in sorted(ends.items())]

    return check


def produce(servers: str, topic: str, rows: Rows) -> None:
    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True})
    for partition, records in rows.items():
        for key, value, headers in records:
            producer.produce(
                topic,
                key=key,
                value=value,
                partition=partition,
                headers=[(k.decode(), v) for k, v in headers] or None,
            )
    assert producer.flush(30) == 0


def batch(tag: str, per_partition: int = 4) -> Rows:
    """Records with keys, values and headers (and a null key, an empty value) per partition."""
    return {
        p: [
            (
                None if i == 0 else f"k{p}-{i}".encode(),
                b"" if i == 1 else f"{tag}-p{p}-{i}".encode(),
                ((b"h", f"{tag}{i}".encode()),) if i % 2 else (),
            )
            for i in range(per_partition)
        ]
        for p in range(PARTITIONS)
    }


def at_least_once(got: list[Row], want: list[Row]) -> bool:
    """Whether ``got`` is ``want`` delivered at least once: in order, any repeat a replay
    that starts again at an earlier record (a runner restarted from the committed offset,
    after a failed round or a leadership move it could not wait out) and goes on from
    there, the last pass reaching the end. Records of ``want`` are distinct."""
    i = 0
    for row in got:
        if i < len(want) and row == want[i]:
            i += 1
        elif row in want[:i]:
            i = want.index(row) + 1
        else:
            return False
    return i == len(want)


def assert_at_least_once(got: list[list[Row]], want: list[list[Row]]) -> None:
    for p, (mine, wanted) in enumerate(zip(got, want, strict=True)):
        assert at_least_once(mine, wanted), f"partition {p}: {mine} is not {wanted} at least once"


def joined(*parts: Rows) -> list[list[Row]]:
    return [[row for rows in parts for row in rows.get(p, [])] for p in range(PARTITIONS)]


def upper(rows: Rows) -> Rows:
    return {p: [(k, v.upper() if v else v, h) for k, v, h in r] for p, r in rows.items()}


def end_offsets(servers: str, topic: str, partitions: int = PARTITIONS) -> list[int]:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "tf-ends"})
    try:
        return [high_watermark(consumer, topic, p) for p in range(partitions)]
    finally:
        consumer.close()


# ---------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def guests() -> Guests:
    """The guests built by tools/build-transform-guests.sh (a no-op when they are built);
    a family whose toolchain cannot be installed here skips its tests."""
    proc = subprocess.run(
        [str(BUILD)], capture_output=True, text=True, timeout=1500, stdin=subprocess.DEVNULL
    )
    assert proc.returncode == 0, f"building the guests failed:\n{proc.stdout}\n{proc.stderr}"
    status = dict(line.partition(" ")[::2] for line in (GUESTS / "STATUS").read_text().splitlines())
    return Guests(status)


@pytest.fixture(scope="module")
def servers(shared_cloud: Cloud) -> str:
    for topic in TOPICS:
        partitions = 2 if topic.startswith("tf-panic") else PARTITIONS
        cli(shared_cloud, "create-topic", topic, "--partitions", str(partitions))
    done = shared_cloud.run("get-bootstrap-brokers", CLUSTER)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


FIRST = batch("one")


@pytest.fixture(scope="module")
def identities(shared_cloud: Cloud, servers: str, guests: Guests) -> dict[str, dict[str, Any]]:
    """The Go SDK's identity on GO_IN (records produced before it is deployed: it starts
    from the log start) and the C batch identity on C_IN (records produced after), both
    deployed before either is waited for; their descriptions once caught up."""
    go_wasm, c_wasm = guests.path("go", "identity"), guests.path("c", "identity")
    produce(servers, GO_IN, FIRST)
    deployed = {
        GO: cli(
            shared_cloud, "deploy-transform", "--name", GO, "--file", str(go_wasm),
            "--input-topic", GO_IN, "--output-topic", GO_OUT,
        ),
        C: cli(
            shared_cloud, "deploy-transform", "--name", C, "--file", str(c_wasm),
            "--input-topic", C_IN, "--output-topic", C_OUT, "--var", "GREETING=hi there",
            "--var", "PATH_LIKE=a=b",
        ),
    }  # fmt: skip
    for answer in deployed.values():
        assert answer["version"] == 1, answer
        assert answer["state"] in ("STARTING", "RUNNING"), answer
        assert [p["partition"] for p in answer["partitions"]] == list(range(PARTITIONS))
    produce(servers, C_IN, FIRST)
    ends = {p: len(FIRST[p]) for p in range(PARTITIONS)}
    return {name: wait_for(shared_cloud, name, caught_up(ends), "caught up") for name in (GO, C)}


# ---------------------------------------------------------------------- tests


def test_identity_transforms_copy_their_input(
    shared_cloud: Cloud, servers: str, guests: Guests, identities: dict[str, dict[str, Any]]
) -> None:
    go, c = identities[GO], identities[C]
    assert set(go) == {
        "cluster", "name", "input_topic", "output_topics", "env", "module_sha256",
        "module_size", "abi", "version", "state", "partitions", "total_lag",
    }  # fmt: skip
    assert set(go["partitions"][0]) == {
        "partition", "state", "broker", "error", "committed_offset", "lag", "processed",
        "outputs",
    }  # fmt: skip
    # at least once: the shared cluster may move a leadership while they first catch up
    assert_at_least_once(read_all(servers, GO_OUT, PARTITIONS), joined(FIRST))
    assert_at_least_once(read_all(servers, C_OUT, PARTITIONS), joined(FIRST))
    assert (go["abi"], c["abi"]) == ("redpanda", "batch")
    assert (go["input_topic"], go["output_topics"], go["env"]) == (GO_IN, [GO_OUT], {})
    assert c["env"] == {"GREETING": "hi there", "PATH_LIKE": "a=b"}, "values as given"
    assert go["module_size"] == guests.path("go", "identity").stat().st_size
    assert len(go["module_sha256"]) == 64
    brokers = {p["broker"] for p in go["partitions"]}
    assert brokers <= {0, 1, 2}, "each partition runs on its leader"
    assert go["total_lag"] == 0
    assert [p["error"] for p in go["partitions"]] == [""] * PARTITIONS
    assert logs(shared_cloud, GO) == [], "an identity logs nothing"

    # the shared cluster's preferred-leader check may have moved a leadership since they
    # caught up (a runner on the new leader is STARTING for a moment): both RUNNING again
    # (and again between a describe and the listing: the listing is read until it shows it)
    def both_running() -> dict[str, Any] | None:
        listed = cli(shared_cloud, "list-transforms")
        states = [t["state"] for t in listed["transforms"] if t["name"] in (GO, C)]
        return listed if states == ["RUNNING"] * len(states) else None

    listed = cluster_workload.wait_for(both_running, WAIT, "both RUNNING", interval=0.5)
    mine = {t["name"]: t for t in listed["transforms"] if t["name"] in (GO, C)}
    rows = {n: (t["state"], t["version"], t["partitions"]) for n, t in mine.items()}
    assert rows == {GO: ("RUNNING", 1, []), C: ("RUNNING", 1, [])}
    assert listed["cluster"] == CLUSTER
    as_yaml = shared_cloud.run("describe-transform", "--cluster", CLUSTER, C, "-o", "yaml")
    assert yaml.safe_load(as_yaml.stdout)["env"] == c["env"]

    # the tables too, each read until it shows RUNNING (a leadership may move again)
    def described() -> str | None:
        table = shared_cloud.run("describe-transform", "--cluster", CLUSTER, GO).stdout
        return table if "state:          RUNNING" in table else None

    table = cluster_workload.wait_for(described, WAIT, "described RUNNING", interval=0.5)
    assert "PARTITION  STATE    BROKER  COMMITTED  LAG  ERROR" in table

    def listed_row() -> bool:
        rows = shared_cloud.run("list-transforms", "--cluster", CLUSTER).stdout
        return any(line.split()[:3] == [GO, "RUNNING", GO_IN] for line in rows.splitlines())

    cluster_workload.wait_for(listed_row, WAIT, "listed RUNNING", interval=0.5)


def test_pause_resume_and_redeploy_continue_from_the_committed_offsets(
    shared_cloud: Cloud, servers: str, guests: Guests, identities: dict[str, dict[str, Any]]
) -> None:
    before = read_all(servers, GO_OUT, PARTITIONS)  # FIRST at least once (the test above)
    paused = cli(shared_cloud, "pause-transform", GO)
    assert paused["state"] == "PAUSED"
    assert {(p["state"], p["broker"]) for p in paused["partitions"]} == {("PARTITION_PAUSED", -1)}
    second = batch("two", 3)
    produce(servers, GO_IN, second)
    waiting = [(len(FIRST[p]), len(second[p])) for p in range(PARTITIONS)]

    def offsets_kept(t: dict[str, Any]) -> bool:
        # a paused transform's offsets and lag come from the progress group's coordinator
        # and the input's leaders; either may not answer for a moment after a leadership
        # move (-1: unknown), so the description is read until they do
        return [(p["committed_offset"], p["lag"]) for p in t["partitions"]] == waiting

    now = wait_for(shared_cloud, GO, offsets_kept, "showing its kept offsets and the new lag")
    assert now["state"] == "PAUSED"
    assert now["total_lag"] == sum(map(len, second.values()))
    assert end_offsets(servers, GO_OUT) == [len(rows) for rows in before], "none while paused"

    resumed = cli(shared_cloud, "resume-transform", GO)
    assert resumed["state"] != "PAUSED"
    ends = {p: len(FIRST[p]) + len(second[p]) for p in range(PARTITIONS)}
    wait_for(shared_cloud, GO, caught_up(ends), "caught up after resume")
    after = [rows + more for rows, more in zip(before, joined(second), strict=True)]
    assert read_all(servers, GO_OUT, PARTITIONS) == after, "resumed: only the new records"

    uppercase = guests.path("go", "uppercase")
    redeployed = cli(
        shared_cloud, "deploy-transform", "--name", GO, "--file", str(uppercase),
        "--input-topic", GO_IN, "--output-topic", GO_OUT,
    )  # fmt: skip
    assert redeployed["version"] == 2
    assert redeployed["module_sha256"] != identities[GO]["module_sha256"]
    third = batch("three", 2)
    produce(servers, GO_IN, third)
    ends = {p: ends[p] + len(third[p]) for p in range(PARTITIONS)}
    wait_for(shared_cloud, GO, caught_up(ends), "caught up after the redeploy")
    assert read_all(servers, GO_OUT, PARTITIONS) == [
        rows + more for rows, more in zip(after, joined(upper(third)), strict=True)
    ], "only the new records, uppercased: nothing before the committed offsets again"


def test_a_panic_fails_its_partition_then_delete_keeps_the_topics(
    shared_cloud: Cloud, servers: str, guests: Guests
) -> None:
    wasm = guests.path("go", "panic")
    produce(
        servers,
        PANIC_IN,
        {
            0: [(None, b"fine", ()), (None, b"boom", ()), (None, b"after", ())],
            1: [(None, b"ok", ())],
        },
    )
    # followed from before the first line (in a new cluster: before the logs topic exists)
    with following(shared_cloud, PANIC) as until:
        cli(
            shared_cloud, "deploy-transform", "--name", PANIC, "--file", str(wasm),
            "--input-topic", PANIC_IN, "--output-topic", PANIC_OUT,
        )  # fmt: skip
        assert until("panic: boom") == "panic: boom at offset 1"

    def failed(t: dict[str, Any]) -> bool:
        states = [(p["state"], p["lag"]) for p in t["partitions"]]
        return t["state"] == "FAILED" and states[1] == ("PARTITION_RUNNING", 0)

    found = wait_for(shared_cloud, PANIC, failed, "FAILED on partition 0")
    broken = found["partitions"][0]
    assert broken["state"] == "PARTITION_FAILED"
    assert "boom at offset 1" in broken["error"], broken
    # -1: nothing committed (the three records were one guest call), or 1: before "boom"
    assert broken["committed_offset"] in (-1, 1), broken
    assert broken["lag"] == 3 - max(0, broken["committed_offset"]), broken
    # The table shows the error too. (Should leadership of partition 0 move meanwhile, e.g.
    # back to its preferred replica, the new leader tries again from the committed offset
    # and fails on the same record: wait for that.)
    deadline = time.monotonic() + 60
    table = ""
    while "boom at offset 1" not in table and time.monotonic() < deadline:
        table = shared_cloud.run("describe-transform", "--cluster", CLUSTER, PANIC).stdout
        if "boom at offset 1" not in table:
            time.sleep(0.5)
    assert "boom at offset 1" in table, table

    lines = wait_logs(shared_cloud, PANIC, "panic: boom at offset 1")
    assert all(set(line) == {"timestamp_ms", "partition", "stream", "text"} for line in lines)
    panic = next(line for line in lines if line["text"] == "panic: boom at offset 1")
    assert (panic["partition"], panic["stream"]) == (0, "stderr")
    text = shared_cloud.run("transform-logs", "--cluster", CLUSTER, PANIC).stdout
    assert "partition 0 stderr | panic: boom at offset 1" in text
    future = shared_cloud.run(
        "transform-logs", "--cluster", CLUSTER, PANIC, "--since", "2100-01-01T00:00:00Z"
    )
    assert (future.returncode, future.stdout) == (0, "")

    deleted = cli(shared_cloud, "delete-transform", PANIC)
    assert deleted == {"cluster": CLUSTER, "name": PANIC, "existed": True, "deleted": True}
    gone = refused(shared_cloud, "describe-transform", "--cluster", CLUSTER, PANIC)
    assert gone == (
        f"cloudctl: error: transform '{PANIC}' not found in cluster '{CLUSTER}' (list "
        f"transforms with `cloudctl list-transforms --cluster {CLUSTER}`)"
    )
    again = shared_cloud.run("delete-transform", "--cluster", CLUSTER, PANIC, "--if-exists")
    assert again.returncode == 0
    assert "does not exist" in again.stderr
    refused(shared_cloud, "delete-transform", "--cluster", CLUSTER, PANIC)
    topics = {t["name"] for t in cli(shared_cloud, "list-topics")["topics"]}
    assert {PANIC_IN, PANIC_OUT} <= topics
    names = {t["name"] for t in cli(shared_cloud, "list-transforms")["transforms"]}
    assert PANIC not in names
    assert any("boom" in line["text"] for line in logs(shared_cloud, PANIC)), "logs stay"


def logs(cloud: Cloud, name: str) -> list[dict[str, Any]]:
    done = cloud.run("transform-logs", "--cluster", CLUSTER, name, "-o", "json")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def wait_logs(cloud: Cloud, name: str, text: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 60
    lines: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        lines = logs(cloud, name)
        if any(text in line["text"] for line in lines):
            return lines
        time.sleep(0.5)
    raise AssertionError(f"no log line of {name} with {text!r} after 60s: {lines}")


EXIT_GUARD_S = 120


@contextlib.contextmanager
def following(cloud: Cloud, name: str) -> Iterator[Callable[[str], str]]:
    """``transform-logs --follow -o json`` running in the block; ``until(text)`` is the first
    line holding ``text`` (within ``WAIT``). Ctrl-C at the end, which ends it with exit 0."""
    texts: queue.Queue[str] = queue.Queue()
    with (
        tempfile.TemporaryFile("w+") as errors,  # never a full pipe that blocks the CLI
        subprocess.Popen(
            cloud.interruptible(
                "transform-logs", "--cluster", CLUSTER, name, "--follow", "-o", "json"
            ),
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env=cloud.environ,
        ) as proc,
    ):

        def read() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                texts.put(json.loads(raw)["text"])

        def until(text: str) -> str:
            deadline = time.monotonic() + WAIT
            while True:
                try:
                    line = texts.get(timeout=max(0.1, deadline - time.monotonic()))
                except queue.Empty:
                    raise AssertionError(f"no {text!r} from --follow in {WAIT}s") from None
                if text in line:
                    return line

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            yield until
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                # a guard against a hang, not a time limit: on a saturated machine an exiting
                # cloudctl gets a small share of a core
                code = proc.wait(EXIT_GUARD_S)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGQUIT)  # cloudctl prints its threads' stacks
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(10)
                proc.kill()
                proc.wait()
                errors.seek(0)
                raise AssertionError(
                    f"--follow did not exit {EXIT_GUARD_S}s after Ctrl-C; its threads:\n"
                    f"{errors.read()[-8000:]}"
                ) from None
            reader.join(10)
        errors.seek(0)
        stderr = errors.read()
    assert code == 0, f"Ctrl-C ends --follow with exit 0: {code} {stderr}"


def test_refused_deploys_change_nothing(
    shared_cloud: Cloud, servers: str, guests: Guests, tmp_path: Path
) -> None:
    wasm = str(guests.path("c", "identity"))
    before = cli(shared_cloud, "list-transforms")
    text = tmp_path / "notes.txt"
    text.write_text("not WebAssembly\n")

    def deploy(*args: str, file: str = wasm, name: str = "tf-refused") -> list[str]:
        return ["deploy-transform", "--name", name, "--file", file, *args]

    line = refused(
        shared_cloud,
        *deploy("--input-topic", C_IN, "--output-topic", C_OUT, file=str(text)),
        "--cluster",
        CLUSTER,
    )
    assert "transform 'tf-refused' refused: the file is not a WebAssembly module" in line
    assert "nothing was deployed or changed" in line
    line = refused(
        shared_cloud,
        *deploy("--input-topic", "tf-no-such-topic", "--output-topic", C_OUT),
        "--cluster",
        CLUSTER,
    )
    assert f"topic 'tf-no-such-topic' not found in cluster '{CLUSTER}'" in line
    assert "cloudctl list-topics" in line
    line = refused(
        shared_cloud,
        *deploy("--input-topic", C_IN, "--output-topic", C_IN),
        "--cluster",
        CLUSTER,
    )
    assert f"output topic {C_IN} is the input topic" in line
    nine = [arg for i in range(9) for arg in ("--output-topic", f"{C_OUT}-{i}")]
    line = refused(shared_cloud, *deploy("--input-topic", C_IN, *nine), "--cluster", CLUSTER)
    assert "9 output topics: a transform writes to 1 to 8" in line
    line = refused(
        shared_cloud,
        *deploy("--input-topic", C_IN, "--output-topic", C_OUT, name="bad name"),
        "--cluster",
        CLUSTER,
    )
    assert "invalid transform name 'bad name'" in line
    line = refused(
        shared_cloud,
        *deploy("--input-topic", C_IN, "--output-topic", C_OUT),
        "--cluster",
        "tf-no-such-cluster",
    )
    assert "cluster 'tf-no-such-cluster' not found" in line

    line = refused(
        shared_cloud,
        *deploy("--input-topic", C_IN, "--output-topic", C_OUT, file=str(tmp_path / "x.wasm")),
        "--cluster",
        CLUSTER,
        code=2,
    )
    assert f"cannot read '{tmp_path / 'x.wasm'}': No such file or directory" in line
    line = refused(
        shared_cloud,
        *deploy("--input-topic", C_IN, "--output-topic", C_OUT, "--var", "NOEQUALS"),
        "--cluster",
        CLUSTER,
        code=2,
    )
    assert "expected KEY=VALUE, got 'NOEQUALS'" in line
    after = cli(shared_cloud, "list-transforms")
    assert [(t["name"], t["version"]) for t in after["transforms"]] == [
        (t["name"], t["version"]) for t in before["transforms"]
    ]
    assert "tf-refused" not in {t["name"] for t in after["transforms"]}


@pytest.fixture(scope="module")
def api(shared_cloud: Cloud) -> Iterator[Client]:
    token = (shared_cloud.home / "token").read_text().strip()
    with Client(shared_cloud.endpoint, token) as client:
        yield client


def test_errors_carry_their_reason_through_grpc(api: Client, servers: str) -> None:
    """Over the gRPC API (sluice_client.client): a module above the brokers' 10 MiB
    transforms.module.max.bytes reaches them (the API takes 64 MiB) and gets their
    INVALID_TRANSFORM, not gRPC's RESOURCE_EXHAUSTED; an unknown transform is
    TRANSFORM_NOT_FOUND; the logs stream of an unknown cluster ends with CLUSTER_NOT_FOUND."""
    big = pb.DeployTransformRequest(
        cluster=CLUSTER,
        name="tf-big",
        module=b"\0asm\1\0\0\0" + bytes(10 * 1024 * 1024),
        input_topic=C_IN,
        output_topics=[C_OUT],
    )
    with pytest.raises(ApiError) as info:
        api.call(api.transforms.DeployTransform, big, 120)
    error = info.value
    assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, epb.INVALID_TRANSFORM)
    assert error.metadata == {"cluster": CLUSTER, "transform": "tf-big"}
    assert "transforms.module.max.bytes is 10,485,760" in error.message

    with pytest.raises(ApiError) as info:
        api.call(api.transforms.DescribeTransform, pb.TransformRef(cluster=CLUSTER, name="tf-none"))
    error = info.value
    assert (error.code, error.reason) == (grpc.StatusCode.NOT_FOUND, epb.TRANSFORM_NOT_FOUND)
    assert error.reason_name == "TRANSFORM_NOT_FOUND"
    assert error.metadata == {"cluster": CLUSTER, "transform": "tf-none"}

    stream = api.transforms.TransformLogs(
        pb.TransformLogsRequest(cluster="tf-no-such-cluster", name="x"),
        metadata=api.metadata,
        timeout=30,
    )
    with pytest.raises(grpc.RpcError) as raised:
        list(stream)
    error = ApiError.from_rpc(raised.value)
    assert error.reason == epb.CLUSTER_NOT_FOUND
    assert error.metadata == {"cluster": "tf-no-such-cluster"}
