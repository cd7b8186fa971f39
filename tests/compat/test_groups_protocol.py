"""Group APIs on the wire: the same scripted conversation against Sluice and Apache Kafka.

One raw-protocol script walks the group APIs through their error paths (unknown groups,
bad generations, member-id-required, simple commits, rebalance states, deletion). Every
answer is normalized (generated member ids, topic ids and group names replaced by
placeholders) and the transcripts must be equal. The Sluice-only test pins the error codes
measured against Apache Kafka 4.3, so it guards behaviour even where Java is missing.
"""

from __future__ import annotations

import datetime
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kio.index import load_payload_module, load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from dataplane.groups.storage import partition_for
from tests.compat.conftest import create_topic
from tests.conftest import BrokerProcess, unique
from tests.support.raw_client import RawClient

TopicMaker = Callable[[str, int], None]


def ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


def req(api: int, version: int, **fields: Any) -> Any:
    return load_request_schema(api, version)(**fields)


def ent(api: int, version: int, entity: str, **fields: Any) -> Any:
    return getattr(load_payload_module(api, version, EntityType.request), entity)(**fields)


class Script:
    """Sends requests and records normalized answers."""

    def __init__(self, bootstrap: str) -> None:
        self.client = RawClient(bootstrap)
        self.lines: list[tuple[str, str]] = []
        self.names: dict[str, str] = {}

    def name(self, raw: str, placeholder: str) -> str:
        self.names[raw] = placeholder
        return raw

    def normalize(self, text: str) -> str:
        text = re.sub(
            r"(?:raw-test|instance-1)-[0-9a-f-]{36}",
            lambda m: self.names.setdefault(m.group(0), f"M{len(self.names)}"),
            text,
        )
        text = re.sub(
            r"UUID\('[0-9a-f-]{36}'\)", lambda m: self.names.get(m.group(0), "UUID"), text
        )
        for raw, placeholder in sorted(self.names.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(raw, placeholder)
        return re.sub(r"port=\d+", "port=PORT", text)

    def send(self, label: str, request: Any) -> Any:
        response = self.client.request(request)
        self.lines.append((label, self.normalize(repr(response))))
        return response


def wait_for_coordinators(bootstrap: str, partitions: int = 4) -> None:
    """Until every __consumer_offsets partition answers (Kafka creates and loads them lazily)."""
    probes: dict[int, str] = {}
    i = 0
    while len(probes) < partitions:
        probes.setdefault(partition_for(f"warm-{i}", partitions), f"warm-{i}")
        i += 1
    deadline = time.monotonic() + 60
    with RawClient(bootstrap) as client:
        for group in probes.values():
            while True:
                client.request(req(10, 3, key=group, key_type=0))
                answer = client.request(
                    req(
                        9,
                        8,
                        groups=(ent(9, 8, "OffsetFetchRequestGroup", group_id=group, topics=None),),
                        require_stable=False,
                    )
                )
                if answer.groups[0].error_code == ErrorCode.none:
                    break
                assert time.monotonic() < deadline, f"no coordinator for {group}: {answer}"
                time.sleep(0.2)


def run_script(bootstrap: str, make_topic: TopicMaker, base: str) -> list[tuple[str, str]]:
    """Run the conversation; ``base`` prefixes every name (same names give same placement)."""
    wait_for_coordinators(bootstrap)
    s = Script(bootstrap)
    topic = s.name(base + "-topic", "TOPIC")
    make_topic(topic, 2)
    md = s.client.request(
        req(
            3,
            12,
            topics=(ent(3, 12, "MetadataRequestTopic", name=topic, topic_id=None),),
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )
    )
    topic_id = md.topics[0].topic_id
    s.names[repr(topic_id)] = "TOPIC_ID"
    g = s.name(base + "-live", "LIVE")
    simple = s.name(base + "-simple", "SIMPLE")
    unknown = s.name(base + "-unknown", "UNKNOWN")

    def protocols(v: int, meta: bytes = b"m1") -> tuple[Any, ...]:
        return (
            ent(11, v, "JoinGroupRequestProtocol", name="range", metadata=meta),
            ent(11, v, "JoinGroupRequestProtocol", name="roundrobin", metadata=b"rr"),
        )

    def join(label: str, v: int, group: str, member: str, **kw: Any) -> Any:
        fields: dict[str, Any] = {
            "group_id": group,
            "session_timeout": ms(10000),
            "rebalance_timeout": ms(10000),
            "member_id": member,
            "protocol_type": "consumer",
            "protocols": protocols(v),
            **kw,
        }
        return s.send(label, req(11, v, **fields))

    def commit(label: str, v: int, group: str, who: tuple[int, str], parts: Any, **kw: Any) -> Any:
        """OffsetCommit of ``parts`` [(partition, offset[, metadata])] as ``who`` (gen, member)."""
        gen, member = who
        target = kw.pop("topic", topic)
        partitions = tuple(
            ent(
                8,
                v,
                "OffsetCommitRequestPartition",
                partition_index=p[0],
                committed_offset=p[1],
                committed_metadata=p[2] if len(p) > 2 else None,
            )
            for p in parts
        )
        key = {"topic_id": target} if v >= 10 else {"name": target}
        topics = (ent(8, v, "OffsetCommitRequestTopic", **key, partitions=partitions),)
        return s.send(
            label,
            req(
                8,
                v,
                group_id=group,
                generation_id_or_member_epoch=gen,
                member_id=member,
                topics=topics,
                **kw,
            ),
        )

    def fetch(label: str, v: int, group: str, topics: Any) -> Any:
        if v >= 8:
            key = "topic_id" if v >= 10 else "name"
            wanted = None
            if topics is not None:
                wanted = tuple(
                    ent(9, v, "OffsetFetchRequestTopics", **{key: t}, partition_indexes=tuple(ps))
                    for t, ps in topics
                )
            group_entity = ent(9, v, "OffsetFetchRequestGroup", group_id=group, topics=wanted)
            return s.send(label, req(9, v, groups=(group_entity,), require_stable=False))
        wanted = None
        if topics is not None:
            wanted = tuple(
                ent(9, v, "OffsetFetchRequestTopic", name=t, partition_indexes=tuple(ps))
                for t, ps in topics
            )
        extra = {"require_stable": False} if v >= 7 else {}
        return s.send(label, req(9, v, group_id=group, topics=wanted, **extra))

    def describe(label: str, v: int, *groups: str) -> Any:
        return s.send(label, req(15, v, groups=groups, include_authorized_operations=False))

    # ------------------------------------------------------------------ coordinators
    for v in (0, 3):
        fields = {"key": unknown} if v == 0 else {"key": unknown, "key_type": 0}
        s.send(f"find coordinator v{v}", req(10, v, **fields))
    s.send("find coordinator v3: bad key type", req(10, 3, key=unknown, key_type=7))
    s.send("find coordinator v6", req(10, 6, key_type=0, coordinator_keys=(g, "")))
    s.send("find coordinator v6: bad key type", req(10, 6, key_type=9, coordinator_keys=(g,)))

    # ------------------------------------------------------------------ errors without groups
    join("join: member id for an unknown group", 5, unknown, "abc")
    join("join: empty group id", 5, "", "")
    join("join: session timeout too small", 5, unknown, "m", session_timeout=ms(10))
    join("join: no protocols", 5, s.name(base + "-np", "NP"), "", protocols=())
    join("join: v9 member id required", 9, s.name(base + "-v9", "V9"), "", protocols=protocols(9))
    s.send("heartbeat: unknown group", req(12, 4, group_id=unknown, generation_id=1, member_id="m"))
    s.send("heartbeat: empty group id", req(12, 4, group_id="", generation_id=1, member_id="m"))
    s.send(
        "sync: unknown group",
        req(
            14,
            5,
            group_id=unknown,
            generation_id=1,
            member_id="m",
            protocol_type="consumer",
            protocol_name="range",
            assignments=(),
        ),
    )
    s.send(
        "sync: v5 without protocol type",
        req(
            14,
            5,
            group_id=unknown,
            generation_id=1,
            member_id="m",
            protocol_type=None,
            protocol_name="range",
            assignments=(),
        ),
    )
    s.send("leave v0: unknown group", req(13, 0, group_id=unknown, member_id="m"))
    s.send(
        "leave v5: unknown group",
        req(
            13,
            5,
            group_id=unknown,
            members=(
                ent(13, 5, "MemberIdentity", member_id="m"),
                ent(13, 5, "MemberIdentity", member_id="", group_instance_id="i"),
            ),
        ),
    )
    describe("describe v5: unknown", 5, unknown)
    describe("describe v6: unknown", 6, unknown)

    # ------------------------------------------------------------------ simple commits
    commit("commit v8: generation 5, unknown group", 8, unknown, (5, "m"), [(0, 1)])
    commit("commit v9: generation 5, unknown group", 9, unknown, (5, "m"), [(0, 1)])
    commit("commit v8: simple", 8, simple, (-1, ""), [(0, 10), (1, 11, "meta"), (7, 1)])
    commit("commit v8: simple with member id", 8, simple, (-1, "zzz"), [(0, 12)])
    commit("commit v8: simple with generation", 8, simple, (3, ""), [(0, 12)])
    commit("commit: unknown topic", 8, simple, (-1, ""), [(0, 1)], topic="no-such-topic")
    commit("commit: metadata too large", 8, simple, (-1, ""), [(0, 13, "x" * 4097), (1, 14, "y")])
    commit("commit v10: unknown topic id", 10, simple, (-1, ""), [(0, 5)], topic=uuid.uuid4())
    commit("commit v10", 10, simple, (-1, ""), [(1, 15)], topic=topic_id)
    commit("commit v2: retention", 2, simple, (-1, ""), [(0, 16)], retention_time=ms(60000))
    fetch("fetch v7", 7, simple, [(topic, [0, 1, 5]), ("no-such-topic", [0])])
    fetch("fetch v7: all", 7, simple, None)
    fetch("fetch v7: unknown group", 7, unknown, [(topic, [0])])
    fetch("fetch v3", 3, simple, [(topic, [0, 1])])
    fetch("fetch v1", 1, simple, [(topic, [0, 1])])
    fetch("fetch v8: all", 8, simple, None)
    fetch("fetch v10", 10, simple, [(topic_id, [0, 1])])
    fetch("fetch v10: all", 10, simple, None)
    describe("describe: simple group", 5, simple)

    # ------------------------------------------------------------------ a live group
    first = join("join: first", 5, g, "")
    member = first.member_id
    joined = join("join: with member id", 5, g, member)
    gen = joined.generation_id
    describe("describe: completing rebalance", 5, g)
    s.send("heartbeat: completing", req(12, 3, group_id=g, generation_id=gen, member_id=member))
    commit("commit: completing", 9, g, (gen, member), [(0, 1)])
    commit("commit: completing, bad generation", 9, g, (gen + 1, member), [(0, 1)])
    commit("commit: completing, no member", 9, g, (-1, ""), [(0, 1)])
    s.send(
        "sync: bad generation",
        req(14, 3, group_id=g, generation_id=gen + 1, member_id=member, assignments=()),
    )
    s.send(
        "sync: wrong protocol type",
        req(
            14,
            5,
            group_id=g,
            generation_id=gen,
            member_id=member,
            protocol_type="other",
            protocol_name="range",
            assignments=(),
        ),
    )
    s.send(
        "sync: leader",
        req(
            14,
            5,
            group_id=g,
            generation_id=gen,
            member_id=member,
            protocol_type="consumer",
            protocol_name="range",
            assignments=(
                ent(14, 5, "SyncGroupRequestAssignment", member_id=member, assignment=b"A"),
                ent(14, 5, "SyncGroupRequestAssignment", member_id="ghost", assignment=b"G"),
            ),
        ),
    )
    s.send(
        "sync: again when stable",
        req(14, 3, group_id=g, generation_id=gen, member_id=member, assignments=()),
    )
    describe("describe: stable", 5, g)
    s.send("heartbeat: ok", req(12, 3, group_id=g, generation_id=gen, member_id=member))
    s.send(
        "heartbeat: bad generation", req(12, 3, group_id=g, generation_id=gen + 5, member_id=member)
    )
    s.send("heartbeat: unknown member", req(12, 3, group_id=g, generation_id=gen, member_id="who"))
    s.send(
        "heartbeat: unknown instance",
        req(12, 3, group_id=g, generation_id=gen, member_id=member, group_instance_id="inst"),
    )
    commit("commit: stable", 9, g, (gen, member), [(0, 100)])
    commit("commit: stable, no member", 9, g, (-1, ""), [(0, 1)])
    commit("commit: stable, generation -1", 9, g, (-1, member), [(0, 1)])
    commit("commit: stable, unknown member", 9, g, (gen, "who"), [(0, 1)])
    s.send("delete: non-empty", req(42, 2, groups_names=(g,)))
    join("join: leader rejoins", 5, g, member)
    s.send("heartbeat: old generation", req(12, 3, group_id=g, generation_id=gen, member_id=member))
    s.send("leave v1", req(13, 1, group_id=g, member_id=member))
    describe("describe: after leave", 5, g)
    s.send("leave v1: again", req(13, 1, group_id=g, member_id=member))
    fetch("fetch v8: live group", 8, g, None)
    # ------------------------------------------------------------------ static membership
    static = s.name(base + "-static", "STATIC")
    inst = {"group_instance_id": "instance-1"}
    first_static = join("static: join", 5, static, "", **inst)
    old_id, static_gen = first_static.member_id, first_static.generation_id
    s.send(
        "static: sync",
        req(
            14,
            5,
            group_id=static,
            generation_id=static_gen,
            member_id=old_id,
            protocol_type="consumer",
            protocol_name="range",
            **inst,
            assignments=(
                ent(14, 5, "SyncGroupRequestAssignment", member_id=old_id, assignment=b"S"),
            ),
        ),
    )
    join("static: rejoin replaces the member id", 5, static, "", **inst)
    s.send(
        "static: old member id is fenced",
        req(12, 3, group_id=static, generation_id=static_gen, member_id=old_id, **inst),
    )
    s.send(
        "static: leave by instance id",
        req(
            13,
            5,
            group_id=static,
            members=(ent(13, 5, "MemberIdentity", member_id="", group_instance_id="instance-1"),),
        ),
    )
    describe("static: after leave", 5, static)

    describe("describe: several groups", 5, g, simple, unknown, static, "")
    s.send(
        "fetch v8: several groups",
        req(
            9,
            8,
            groups=tuple(
                ent(9, 8, "OffsetFetchRequestGroup", group_id=x, topics=None)
                for x in (simple, unknown, g)
            ),
            require_stable=False,
        ),
    )
    listed = s.client.request(req(16, 4, states_filter=("EMPTY", " stable")))
    ours = sorted(
        (s.normalize(x.group_id), x.protocol_type, x.group_state)
        for x in listed.groups
        if x.group_id.startswith(base)
    )
    s.lines.append(("list v4: empty and stable", repr(ours)))
    s.send("delete", req(42, 2, groups_names=(g, simple, unknown)))
    fetch("fetch: after delete", 8, simple, [(topic, [0])])
    s.client.close()
    return s.lines


# --------------------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def sluice_groups(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("groups-wire") / "data",
        {
            "auto.create.topics.enable": "true",
            "num.partitions": "2",
            "offsets.topic.num.partitions": "4",
        },
    ).start()
    yield proc
    proc.stop()
    proc.kill()


def sluice_topic(name: str, partitions: int) -> None:
    """Nothing to do: the script's Metadata request auto-creates the topic on Sluice."""


# Error codes of Apache Kafka 4.3 for the script's steps (measured with the oracle).
EXPECTED = {
    "join: member id for an unknown group": "unknown_member_id",
    "join: empty group id": "invalid_group_id",
    "join: session timeout too small": "invalid_session_timeout",
    "join: no protocols": "inconsistent_group_protocol",
    "join: v9 member id required": "member_id_required",
    "heartbeat: unknown group": "unknown_member_id",
    "heartbeat: empty group id": "invalid_group_id",
    "sync: unknown group": "unknown_member_id",
    "sync: v5 without protocol type": "inconsistent_group_protocol",
    "leave v0: unknown group": "unknown_member_id",
    "describe v6: unknown": "group_id_not_found",
    "commit v8: generation 5, unknown group": "illegal_generation",
    "commit v9: generation 5, unknown group": "group_id_not_found",
    "commit v8: simple with generation": "unknown_member_id",
    "commit: unknown topic": "unknown_topic_or_partition",
    "commit v10: unknown topic id": "unknown_topic_id",
    "join: first": "member_id_required",
    "commit: completing": "rebalance_in_progress",
    "commit: completing, bad generation": "illegal_generation",
    "commit: completing, no member": "unknown_member_id",
    "sync: bad generation": "illegal_generation",
    "sync: wrong protocol type": "inconsistent_group_protocol",
    "heartbeat: bad generation": "illegal_generation",
    "heartbeat: unknown member": "unknown_member_id",
    "heartbeat: unknown instance": "unknown_member_id",
    "commit: stable, no member": "unknown_member_id",
    "commit: stable, generation -1": "illegal_generation",
    "commit: stable, unknown member": "unknown_member_id",
    "delete: non-empty": "non_empty_group",
    "heartbeat: old generation": "illegal_generation",
    "leave v1: again": "unknown_member_id",
}


def test_group_error_codes_on_the_wire(sluice_groups: BrokerProcess) -> None:
    lines = dict(run_script(sluice_groups.bootstrap, sluice_topic, unique("gp")))
    for label, code in EXPECTED.items():
        assert f"ErrorCode.{code}:" in lines[label], (label, lines[label])
    assert "metadata_too_large" in lines["commit: metadata too large"]
    assert "committed_offset=16" in lines["fetch v7"]
    assert "committed_offset=15" in lines["fetch v10"]
    assert "member_assignment=b'A'" in lines["describe: stable"]
    assert "group_state='Empty'" in lines["describe: after leave"]
    assert "fenced_instance_id" in lines["static: old member id is fenced"]
    assert lines["list v4: empty and stable"] == repr(
        [
            ("LIVE", "consumer", "Empty"),
            ("NP", "", "Empty"),
            ("SIMPLE", "", "Empty"),
            ("STATIC", "consumer", "Empty"),
            ("V9", "", "Empty"),
        ]
    )


@pytest.mark.oracle
def test_group_conversation_matches_kafka(sluice_groups: BrokerProcess, kafka_oracle: Any) -> None:
    base = unique("gp-diff")
    ours = run_script(sluice_groups.bootstrap, sluice_topic, base)
    theirs = run_script(
        kafka_oracle.bootstrap,
        lambda name, partitions: create_topic(kafka_oracle.bootstrap, name, partitions),
        base,
    )
    assert [label for label, _ in ours] == [label for label, _ in theirs]
    differences = [
        f"{label}\n  sluice: {a}\n  kafka:  {b}"
        for (label, a), (_, b) in zip(ours, theirs, strict=True)
        if a != b
    ]
    assert not differences, "\n".join(differences)
