"""A Raft node replicating a key-value map, for process-level tests and experiments.

    python -m dataplane.raft.demo_node --id 1 --raft 1=127.0.0.1:7001,2=...,3=... \\
        --client 127.0.0.1:7101 --data-dir /tmp/n1

Client API on ``--client``: one JSON object per line, one answer per line.

    {"op": "put", "key": K, "value": V}  -> {"ok": true, "index": I}
                                           | {"ok": false, "error": E, "leader": ID}
    {"op": "get", "key": K}             -> {"ok": true, "value": V or null}   (local read)
    {"op": "dump"}                      -> {"ok": true, "applied": I, "data": {...}}
    {"op": "status"}                    -> {"ok": true, "id", "role", "term", "leader",
                                            "applied", "commit", "fsync_rounds"}
    {"op": "transfer", "to": ID}        -> {"ok": true} | {"ok": false, "error": E}
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
from pathlib import Path
from typing import Any

import uvloop

from dataplane.raft.errors import NotLeader, RaftError
from dataplane.raft.server import RaftServer, ServerConfig
from dataplane.raft.transport import Address, TcpTransport


class KeyValue:
    """The state machine: a dict, snapshotted as JSON."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}
        self.applied = 0

    def apply(self, index: int, payload: bytes) -> None:
        command = json.loads(payload)
        self.data[command["k"]] = command["v"]
        self.applied = index

    def snapshot(self) -> bytes:
        return json.dumps({"applied": self.applied, "data": self.data}).encode()

    def restore(self, data: bytes) -> None:
        state = json.loads(data)
        self.data = dict(state["data"])
        self.applied = int(state["applied"])


def parse_address(text: str) -> Address:
    host, _, port = text.rpartition(":")
    return host, int(port)


async def handle(server: RaftServer, kv: KeyValue, request: dict[str, Any]) -> dict[str, Any]:  # noqa: PLR0911 - one answer per demo command
    op = request.get("op")
    if op == "put":
        payload = json.dumps({"k": request["key"], "v": request["value"]}).encode()
        try:
            index = await asyncio.wait_for(server.propose(payload), 5.0)
        except NotLeader as exc:
            return {"ok": False, "error": "not_leader", "leader": exc.leader_id}
        except (RaftError, TimeoutError) as exc:
            return {"ok": False, "error": type(exc).__name__, "leader": server.leader_id}
        return {"ok": True, "index": index}
    if op == "get":
        return {"ok": True, "value": kv.data.get(request["key"])}
    if op == "dump":
        return {"ok": True, "applied": server.applied_index, "data": kv.data}
    if op == "status":
        node = server.node
        return {
            "ok": True,
            "id": server.node_id,
            "role": node.role.value,
            "term": node.term,
            "leader": node.leader_id,
            "applied": node.applied_index,
            "commit": node.commit_index,
            "fsync_rounds": server.fsync_rounds,
        }
    if op == "transfer":
        try:
            await server.transfer_leadership(int(request["to"]))
        except (RaftError, ValueError, TimeoutError) as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        return {"ok": True}
    return {"ok": False, "error": f"unknown op {op!r}"}


async def main_async(args: argparse.Namespace) -> None:
    peers = {}
    for item in args.raft.split(","):
        node_id, _, address = item.partition("=")
        peers[int(node_id)] = parse_address(address)
    kv = KeyValue()
    config = ServerConfig(
        tick_ms=args.tick_ms,
        election_ticks=args.election_ticks,
        heartbeat_ticks=args.heartbeat_ticks,
        snapshot_entries=args.snapshot_entries,
    )
    server = RaftServer(
        args.id, peers, Path(args.data_dir), kv, TcpTransport(args.id, peers), config=config
    )
    await server.start()

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                answer = await handle(server, kv, json.loads(line))
                writer.write(json.dumps(answer).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, json.JSONDecodeError):
            pass
        finally:
            writer.close()

    host, port = parse_address(args.client)
    listener = await asyncio.start_server(client, host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"raft demo node {args.id} ready", flush=True)
    await stop.wait()
    listener.close()
    with contextlib.suppress(Exception):
        await server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--id", type=int, required=True)
    parser.add_argument("--raft", required=True, help="ID=HOST:PORT,... for every voter")
    parser.add_argument("--client", required=True, help="HOST:PORT of the client API")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--tick-ms", type=float, default=50.0)
    parser.add_argument("--election-ticks", type=int, default=10)
    parser.add_argument("--heartbeat-ticks", type=int, default=2)
    parser.add_argument("--snapshot-entries", type=int, default=10_000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    uvloop.run(main_async(args))


if __name__ == "__main__":
    main()
