"""Output of the operations, consumer groups and logs: JSON (the fields of the gRPC
messages, numbers as numbers, times as RFC 3339 UTC) and tables."""

from __future__ import annotations

from typing import Any

from cli.output import fields, rfc3339, table
from proto.sluice.v1 import groups_pb2, logs_pb2, operations_pb2

# ---------------------------------------------------------------------- operations


def operation_type(op: operations_pb2.Operation) -> str:
    return operations_pb2.OperationType.Name(op.type).removeprefix("OPERATION_TYPE_")


def operation_state(op: operations_pb2.Operation) -> str:
    return operations_pb2.OperationState.Name(op.state).removeprefix("OPERATION_STATE_")


def operation_json(op: operations_pb2.Operation) -> dict[str, Any]:
    return {
        "id": op.id,
        "cluster": op.cluster,
        "cluster_id": op.cluster_id,
        "type": operation_type(op),
        "state": operation_state(op),
        "detail": op.detail,
        "state_message": op.state_message,
        "error": op.error,
        "started_at": rfc3339(op.started_at),
        "ended_at": rfc3339(op.ended_at) if op.HasField("ended_at") else "",
    }


def duration(op: operations_pb2.Operation) -> str:
    if not op.HasField("ended_at"):
        return "-"
    seconds = (op.ended_at.ToNanoseconds() - op.started_at.ToNanoseconds()) / 1e9
    return f"{seconds:.1f}s"


def operations_table(ops: list[operations_pb2.Operation]) -> str:
    return table(
        ["ID", "CLUSTER", "TYPE", "STATE", "STARTED", "ENDED", "TOOK", "DETAIL / ERROR"],
        [
            (
                op.id,
                op.cluster,
                operation_type(op),
                operation_state(op),
                rfc3339(op.started_at),
                rfc3339(op.ended_at) if op.HasField("ended_at") else "-",
                duration(op),
                op.error or op.detail,
            )
            for op in ops
        ],
    )


def operation_table(op: operations_pb2.Operation) -> str:
    return fields(
        [
            ("operation", op.id),
            ("cluster", f"{op.cluster} ({op.cluster_id})"),
            ("type", operation_type(op)),
            ("state", operation_state(op)),
            ("detail", op.detail or "-"),
            ("started", rfc3339(op.started_at)),
            ("ended", rfc3339(op.ended_at) if op.HasField("ended_at") else "-"),
            ("took", duration(op)),
            ("last step", op.state_message or "-"),
            ("error", op.error or "-"),
        ]
    )


# ---------------------------------------------------------------------- groups


def groups_json(reply: groups_pb2.ListGroupsResponse, cluster: str) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "groups": [
            {
                "group_id": g.group_id,
                "state": g.state,
                "protocol_type": g.protocol_type,
                "coordinator": g.coordinator,
            }
            for g in reply.groups
        ],
    }


def groups_table(reply: groups_pb2.ListGroupsResponse) -> str:
    if not reply.groups:
        return "no consumer groups"
    return table(
        ["GROUP", "STATE", "PROTOCOL TYPE", "COORDINATOR"],
        [(g.group_id, g.state, g.protocol_type or "-", g.coordinator) for g in reply.groups],
    )


def group_json(group: groups_pb2.Group) -> dict[str, Any]:
    return {
        "cluster": group.cluster,
        "group_id": group.group_id,
        "state": group.state,
        "protocol_type": group.protocol_type,
        "protocol": group.protocol,
        "coordinator": group.coordinator,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "assignment": [
                    {"topic": a.topic, "partitions": list(a.partitions)} for a in m.assignment
                ],
            }
            for m in group.members
        ],
        "partitions": [
            {
                "topic": p.topic,
                "partition": p.partition,
                "committed_offset": p.committed_offset,
                "end_offset": p.end_offset,
                "lag": p.lag if p.HasField("lag") else None,
                "member_id": p.member_id,
                "client_id": p.client_id,
                "client_host": p.client_host,
                "metadata": p.metadata,
            }
            for p in group.partitions
        ],
        "total_lag": group.total_lag,
    }


def assignment_text(member: groups_pb2.GroupMember) -> str:
    return (
        " ".join(f"{a.topic}:{','.join(map(str, a.partitions))}" for a in member.assignment) or "-"
    )


def group_table(group: groups_pb2.Group) -> str:
    head = fields(
        [
            ("group", group.group_id),
            ("cluster", group.cluster),
            ("state", group.state),
            ("protocol", f"{group.protocol_type or '-'} {group.protocol}".rstrip()),
            ("coordinator", f"broker {group.coordinator}"),
            ("members", len(group.members)),
            ("total lag", group.total_lag),
        ]
    )
    parts = [head]
    if group.members:
        parts.append(
            table(
                ["MEMBER", "CLIENT ID", "HOST", "ASSIGNMENT"],
                [
                    (m.member_id, m.client_id, m.client_host, assignment_text(m))
                    for m in group.members
                ],
            )
        )
    if group.partitions:
        parts.append(
            table(
                ["TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "CLIENT ID", "HOST"],
                [
                    (
                        p.topic,
                        p.partition,
                        p.committed_offset if p.committed_offset >= 0 else "-",
                        p.end_offset if p.end_offset >= 0 else "?",
                        p.lag if p.HasField("lag") else "-",
                        p.client_id or "-",
                        p.client_host or "-",
                    )
                    for p in group.partitions
                ],
            )
        )
    return "\n\n".join(parts)


def reset_json(reply: groups_pb2.ResetOffsetsResponse) -> dict[str, Any]:
    return {
        "cluster": reply.cluster,
        "group_id": reply.group_id,
        "dry_run": reply.dry_run,
        "offsets": [
            {
                "topic": o.topic,
                "partition": o.partition,
                "previous_offset": o.previous_offset,
                "new_offset": o.new_offset,
            }
            for o in reply.offsets
        ],
    }


def reset_table(reply: groups_pb2.ResetOffsetsResponse) -> str:
    rows = table(
        ["TOPIC", "PARTITION", "PREVIOUS", "NEW"],
        [
            (
                o.topic,
                o.partition,
                o.previous_offset if o.previous_offset >= 0 else "-",
                o.new_offset,
            )
            for o in reply.offsets
        ],
    )
    verb = "would be committed (--dry-run: nothing changed)" if reply.dry_run else "committed"
    return f"{rows}\n\n{len(reply.offsets)} offset(s) of group {reply.group_id!r} {verb}"


# ---------------------------------------------------------------------- logs


def log_line_json(line: logs_pb2.LogLine) -> dict[str, Any]:
    return {
        "broker_id": line.broker_id,
        "time": rfc3339(line.time) if line.HasField("time") else "",
        "line": line.line,
    }


def log_line_text(line: logs_pb2.LogLine, prefix: bool) -> str:
    return f"broker-{line.broker_id} | {line.line}" if prefix else line.line
