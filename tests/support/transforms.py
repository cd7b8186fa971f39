"""Transforms through a broker's own API (``wire.internal`` 32002), for tests that exercise the
brokers without the control plane; and waiting for a transform's state.

    admin = TransformsAdmin(broker.bootstrap)
    admin.deploy("t", wasm, "in", ["out"], env={"K": "V"})
    admin.wait_state("t", "running", partitions=3)
"""

from __future__ import annotations

import json
import time
from typing import Any

from kio.schema.errors import ErrorCode

from wire.client import BlockingConnection
from wire.internal import TransformsRequest, TransformsResponse


class TransformsError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class TransformsAdmin:
    def __init__(self, bootstrap: str | list[str], timeout: float = 60) -> None:
        self.bootstraps = [bootstrap] if isinstance(bootstrap, str) else list(bootstrap)
        self.timeout = timeout

    def call(
        self, operation: str, doc: dict[str, Any], module: bytes = b"", address: str | None = None
    ) -> dict[str, Any]:
        host, _, port = (address or self.bootstraps[0]).rpartition(":")
        request = TransformsRequest(
            operation=operation,
            payload=json.dumps({"version": 1, **doc}).encode(),
            module=module,
        )
        with BlockingConnection(
            host, int(port), client_id="transforms-test", timeout=self.timeout
        ) as conn:
            response: TransformsResponse = conn.request(request)
        if response.error_code != ErrorCode.none:
            raise TransformsError(response.error_code, response.error_message or "")
        answer: dict[str, Any] = json.loads(response.payload)
        return answer

    def deploy(
        self,
        name: str,
        module: bytes,
        input_topic: str,
        outputs: list[str],
        env: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        doc = {"name": name, "input_topic": input_topic, "output_topics": outputs}
        return self.call("deploy", {**doc, "env": env or {}}, module)["transform"]

    def pause(self, name: str) -> dict[str, Any]:
        return self.call("pause", {"name": name})["transform"]

    def resume(self, name: str) -> dict[str, Any]:
        return self.call("resume", {"name": name})["transform"]

    def delete(self, name: str) -> dict[str, Any]:
        return self.call("delete", {"name": name})["transform"]

    def describe(self, name: str | None = None) -> list[dict[str, Any]]:
        """Every broker's view merged: the definitions of the first that knows each, the
        partitions of all."""
        names = None if name is None else [name]
        merged: dict[str, dict[str, Any]] = {}
        missing: TransformsError | None = None
        for address in self.bootstraps:
            try:
                found = self.call("describe", {"names": names}, address=address)["transforms"]
            except TransformsError as exc:
                # a broker that has not replayed the deploy yet knows no such transform
                if exc.code != ErrorCode.resource_not_found:
                    raise
                missing = exc
                continue
            for entry in found:
                seen = merged.setdefault(entry["name"], {**entry, "partitions": []})
                seen["partitions"].extend(entry["partitions"])
        if missing is not None and not merged:
            raise missing
        for entry in merged.values():
            entry["partitions"].sort(key=lambda p: p["partition"])
        return list(merged.values())

    def partitions(self, name: str) -> list[dict[str, Any]]:
        found = self.describe(name)
        return found[0]["partitions"] if found else []

    def wait_state(
        self, name: str, state: str, partitions: int = 1, timeout: float = 60
    ) -> list[dict[str, Any]]:
        """The partition entries once ``partitions`` of them are in ``state``."""
        deadline = time.monotonic() + timeout
        seen: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            seen = self.partitions(name)
            if sum(1 for p in seen if p["state"] == state) >= partitions:
                return seen
            time.sleep(0.1)
        raise AssertionError(f"transform {name} not {state} on {partitions} partition(s): {seen}")

    def wait_caught_up(self, name: str, partitions: int, timeout: float = 120) -> None:
        """Every input partition running with nothing left to process."""
        deadline = time.monotonic() + timeout
        seen: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            seen = self.partitions(name)
            running = [p for p in seen if p["state"] == "running"]
            if len(running) >= partitions and all(p["lag"] == 0 for p in running):
                return
            time.sleep(0.1)
        raise AssertionError(f"transform {name} did not catch up: {seen}")
