"""Three real Raft processes (dataplane.raft.demo_node) on loopback; the leader is SIGKILLed
and restarted again and again while a client writes. No acknowledged write may be lost and
every node must converge to the same state. Failover times are printed, never asserted."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, free_port


class DemoNode:
    def __init__(self, node_id: int, raft: str, client_port: int, data_dir: Path) -> None:
        self.node_id = node_id
        self.raft = raft
        self.client_port = client_port
        self.data_dir = data_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"node{node_id}.log"

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "dataplane.raft.demo_node",
            "--id",
            str(self.node_id),
            "--raft",
            self.raft,
            "--client",
            f"127.0.0.1:{self.client_port}",
            "--data-dir",
            str(self.data_dir),
            "--snapshot-entries",
            "100",
        ]
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=log, cwd=REPO, start_new_session=True)
        log.close()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def request(self, body: dict[str, Any], timeout: float = 6.0) -> dict[str, Any]:
        with socket.create_connection(("127.0.0.1", self.client_port), timeout=timeout) as s:
            s.sendall(json.dumps(body).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    raise ConnectionError("closed")
                data += chunk
        answer: dict[str, Any] = json.loads(data)
        return answer


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[dict[int, DemoNode]]:
    raft_ports = {i: free_port() for i in (1, 2, 3)}
    raft = ",".join(f"{i}=127.0.0.1:{p}" for i, p in raft_ports.items())
    nodes = {i: DemoNode(i, raft, free_port(), tmp_path / f"n{i}") for i in (1, 2, 3)}
    for node in nodes.values():
        node.start()
    try:
        yield nodes
    finally:
        for node in nodes.values():
            node.stop()
            node.kill()


def find_leader(nodes: dict[int, DemoNode], timeout: float = 15.0) -> DemoNode:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        best: tuple[int, DemoNode] | None = None
        for node in nodes.values():
            try:
                status = node.request({"op": "status"}, timeout=1.0)
            except OSError:
                continue
            if status["role"] == "leader" and (best is None or status["term"] > best[0]):
                best = (status["term"], node)
        if best is not None:
            return best[1]
        time.sleep(0.05)
    raise AssertionError("no leader elected")


class Writer(threading.Thread):
    """Writes k0, k1, ... to whoever leads, retrying each key until acknowledged."""

    def __init__(self, nodes: dict[int, DemoNode]) -> None:
        super().__init__(daemon=True)
        self.nodes = nodes
        self.acked: dict[str, str] = {}
        self.acks: list[tuple[float, float]] = []  # (sent, acknowledged)
        self.stop_flag = threading.Event()
        self.errors = 0

        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:
            self.failure = exc
            raise

    def _run(self) -> None:
        leader = find_leader(self.nodes)
        n = 0
        while not self.stop_flag.is_set():
            key, value = f"k{n}", f"v{n}"
            sent = time.monotonic()
            try:
                answer = leader.request({"op": "put", "key": key, "value": value})
            except OSError:
                answer = {"ok": False, "leader": None}
            if answer["ok"]:
                self.acked[key] = value
                self.acks.append((sent, time.monotonic()))
                n += 1
                continue
            self.errors += 1
            hint = answer.get("leader")
            if hint in self.nodes and hint != leader.node_id:
                leader = self.nodes[hint]
            else:
                time.sleep(0.05)
                try:
                    leader = find_leader(self.nodes, timeout=5.0)
                except AssertionError:
                    continue


def test_kill_leader_repeatedly(cluster: dict[int, DemoNode]) -> None:
    nodes = cluster
    writer = Writer(nodes)
    writer.start()
    failovers = []
    time.sleep(1.5)
    for _ in range(4):
        leader = find_leader(nodes)
        before = len(writer.acked)
        killed_at = time.monotonic()
        leader.kill()
        # failover: from the kill to the first acknowledgement of a write sent after it
        deadline = killed_at + 15
        while time.monotonic() < deadline and not [a for s, a in writer.acks if s > killed_at]:
            time.sleep(0.01)
        after = [a for s, a in writer.acks if s > killed_at]
        assert after, f"no write acknowledged after the leader was killed ({writer.failure!r})"
        failovers.append(after[0] - killed_at)
        assert len(writer.acked) > before or after
        time.sleep(0.3)
        leader.start()
        time.sleep(1.2)
    writer.stop_flag.set()
    writer.join(20)
    acked = dict(writer.acked)

    # every node converges to the same state, holding every acknowledged write
    deadline = time.monotonic() + 20
    dumps: dict[int, dict[str, Any]] = {}
    while time.monotonic() < deadline:
        try:
            dumps = {i: n.request({"op": "dump"}) for i, n in nodes.items()}
        except OSError:
            time.sleep(0.1)
            continue
        if len({d["applied"] for d in dumps.values()}) == 1 and all(
            d["data"] == dumps[1]["data"] for d in dumps.values()
        ):
            break
        time.sleep(0.1)
    applied = {i: d["applied"] for i, d in dumps.items()}
    assert len(set(applied.values())) == 1, f"nodes did not converge: {applied}"
    for i, d in dumps.items():
        missing = [k for k, v in acked.items() if d["data"].get(k) != v]
        assert not missing, f"node {i} lost acknowledged writes: {missing[:10]}"
    statuses = [n.request({"op": "status"}) for n in nodes.values()]
    print(
        f"\nraft process test: {len(acked)} acknowledged writes, {writer.errors} retries, "
        f"{len(failovers)} leader kills, failover s: {[round(f, 2) for f in failovers]}, "
        f"fsync rounds per node: {[s['fsync_rounds'] for s in statuses]}"
    )
