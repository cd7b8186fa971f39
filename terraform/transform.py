"""``sluice_transform``: a WebAssembly data transform the brokers run on an input topic (the
Transforms service; Redpanda's ``rpk transform deploy``).

The module is a local file (``module_file``); its SHA-256 is read when Terraform plans, so a
rebuilt module shows as an update, and a deploy sends its bytes. A new module, input, outputs
or variables redeploy in place (the transform continues from its committed offsets); a new
cluster or name replaces it. Import id: ``CLUSTER/NAME`` (the module's path cannot be read
back: the first apply after an import records it, and redeploys only if the file's hash
differs from the deployed module's).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from tf.schema import Attribute, Schema
from tf.types import Number, String, Unknown

from proto.sluice.v1 import errors_pb2 as epb
from proto.sluice.v1 import transforms_pb2 as pb
from sluice_client.client import MAX_MESSAGE_BYTES, ApiError
from terraform.api import Api, ProviderError
from terraform.common import (
    Deadline,
    ListOf,
    MapOf,
    ResourceBase,
    State,
    Timeouts,
    blank,
    given,
    id_parts,
    known,
    map_value,
    retry_busy,
)

GONE = (epb.CLUSTER_NOT_FOUND, epb.TRANSFORM_NOT_FOUND)
DEPLOYED = ("input_topic", "output_topics", "env", "module_sha256")
"""What a deploy changes: any difference redeploys."""
COMPUTED_BY_DEPLOY = ("state", "abi", "version", "module_size")


def read_module(path: str) -> bytes:
    try:
        data = Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise ProviderError(
            f"Cannot read module_file {path!r}: {exc.strerror}",
            "Give the path of the WebAssembly module (.wasm), relative to the directory "
            "Terraform runs in, or build it before planning.",
            ["module_file"],
        ) from None
    if len(data) > MAX_MESSAGE_BYTES:
        raise ProviderError(
            f"module_file {path!r} is {len(data)} bytes, above the API's {MAX_MESSAGE_BYTES}",
            "Deploy modules this large with Kafka tools, or make the module smaller.",
            ["module_file"],
        )
    return data


def find(api: Api, cluster: str, name: str) -> pb.Transform | None:
    try:
        reply = api.call(api.transforms.ListTransforms, pb.ListTransformsRequest(cluster=cluster))
    except ApiError as exc:
        if exc.reason in GONE:
            return None
        raise
    return next((t for t in reply.transforms if t.name == name), None)


class TransformResource(ResourceBase):
    NAME = "transform"
    TIMEOUTS = Timeouts(create=5 * 60, update=5 * 60, delete=5 * 60)
    SCHEMA = Schema(
        version=0,
        description="A WebAssembly data transform (Redpanda's `rpk transform deploy`). "
        "Import id: `CLUSTER/NAME`.",
        attributes=[
            Attribute("id", String(), description="`CLUSTER/NAME`.", computed=True),
            Attribute(
                "cluster",
                String(),
                description="Name of the cluster; a new one replaces the transform.",
                required=True,
                requires_replace=True,
            ),
            Attribute(
                "name",
                String(),
                description="1-128 letters, digits, `.`, `_` and `-`; a new name replaces it.",
                required=True,
                requires_replace=True,
            ),
            Attribute(
                "module_file",
                String(),
                description="Path of the WebAssembly module (Redpanda's data-transforms ABI or "
                "Sluice's batch ABI), read at plan (its hash) and apply (its bytes).",
                required=True,
            ),
            Attribute("input_topic", String(), description="The topic it reads.", required=True),
            Attribute(
                "output_topics",
                ListOf(String()),
                description="1 to 8 topics it writes, none the input; the first is the default.",
                required=True,
            ),
            Attribute(
                "env",
                MapOf(String()),
                description="Environment variables of the guest (besides REDPANDA_INPUT_TOPIC "
                "and REDPANDA_OUTPUT_TOPIC_<n>).",
                optional=True,
            ),
            Attribute(
                "module_sha256",
                String(),
                description="SHA-256 (hex) of the deployed module.",
                computed=True,
            ),
            Attribute(
                "module_size", Number(), description="Bytes of the deployed module.", computed=True
            ),
            Attribute(
                "abi",
                String(),
                description="`redpanda` (Redpanda's ABI) or `batch` (Sluice's).",
                computed=True,
            ),
            Attribute(
                "version",
                Number(),
                description="Bumped by every deploy of the name.",
                computed=True,
            ),
            Attribute(
                "state",
                String(),
                description="RUNNING, STARTING, PAUSED or FAILED (as the brokers report it).",
                computed=True,
            ),
        ],
        block_types=[TIMEOUTS.block()],
    )

    def state_of(self, found: pb.Transform, prior: State | None) -> State:
        prior = prior or {}
        state = blank(self.SCHEMA)
        state.update(
            id=f"{found.cluster}/{found.name}",
            cluster=found.cluster,
            name=found.name,
            module_file=prior.get("module_file"),
            input_topic=found.input_topic,
            output_topics=list(found.output_topics),
            env=map_value(prior.get("env"), found.env),
            module_sha256=found.module_sha256,
            module_size=found.module_size,
            abi=found.abi,
            version=found.version,
            state=pb.TransformState.Name(found.state).removeprefix("TRANSFORM_STATE_"),
            timeouts=prior.get("timeouts"),
        )
        return state

    def _deploy(self, planned: State, operation: str) -> State:
        api = self.api()
        deadline = Deadline(self.TIMEOUTS.of(planned, operation), operation)
        request = pb.DeployTransformRequest(
            cluster=planned["cluster"],
            name=planned["name"],
            module=read_module(planned["module_file"]),
            input_topic=planned["input_topic"],
            output_topics=planned["output_topics"],
            env=given(planned, "env") or {},
        )
        found = retry_busy(
            api, deadline, lambda: api.call(api.transforms.DeployTransform, request, 120)
        )
        return self.state_of(found, planned)

    def do_create(self, planned: State) -> State:
        return self._deploy(planned, "create")

    def do_read(self, current: State) -> State | None:
        found = find(self.api(), current["cluster"], current["name"])
        return None if found is None else self.state_of(found, current)

    def do_plan(self, current: State, planned: State, changed: set[str]) -> State:
        path = planned.get("module_file")
        if known(path):
            planned["module_sha256"] = hashlib.sha256(read_module(path)).hexdigest()
        if any(planned.get(k) != current.get(k) for k in DEPLOYED):
            for field in COMPUTED_BY_DEPLOY:
                planned[field] = Unknown
        return planned

    def do_update(self, current: State, planned: State) -> State:
        if any(planned.get(k) != current.get(k) for k in DEPLOYED if k != "module_sha256"):
            return self._deploy(planned, "update")
        digest = hashlib.sha256(read_module(planned["module_file"])).hexdigest()
        if digest != current.get("module_sha256"):
            return self._deploy(planned, "update")
        # the module's path or the timeouts only: nothing to deploy
        keep = ("module_file", "timeouts")
        return {**current, **{k: planned.get(k) for k in keep}}

    def do_delete(self, current: State) -> None:
        api = self.api()
        deadline = Deadline(self.TIMEOUTS.of(current, "delete"), "delete")
        request = pb.TransformRef(cluster=current["cluster"], name=current["name"])
        try:
            retry_busy(api, deadline, lambda: api.call(api.transforms.DeleteTransform, request))
        except ApiError as exc:
            if exc.reason not in GONE:
                raise

    def do_import(self, id_: str) -> State | None:
        cluster, name = id_parts(id_, ("cluster", "name"), "sluice_transform")
        found = find(self.api(), cluster, name)
        return None if found is None else self.state_of(found, None)
