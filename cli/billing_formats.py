"""The output of the billing commands: usage, invoices, billing runs (JSON, tables, CSV).

JSON follows the house rules (cli/README.md): every key always present, times RFC 3339
UTC; quantities and money are decimal strings (exact, as the API gives them), raw
quantities integers.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from cli.output import fields, rfc3339, table
from proto.sluice.v1 import billing_pb2 as pb

BY = {
    "hour": pb.USAGE_GROUP_BY_HOUR,
    "day": pb.USAGE_GROUP_BY_DAY,
    "topic": pb.USAGE_GROUP_BY_TOPIC,
    "principal": pb.USAGE_GROUP_BY_PRINCIPAL,
    "dimension": pb.USAGE_GROUP_BY_DIMENSION,
}
USAGE_FIELDS = (
    "period_start",
    "period_end",
    "cluster",
    "dimension",
    "resource",
    "topic",
    "principal",
    "quantity",
    "unit",
    "raw_quantity",
    "raw_unit",
)
LINE_FIELDS = (
    "cluster",
    "model",
    "dimension",
    "resource",
    "quantity",
    "unit",
    "unit_price",
    "amount",
)
TABLE_PLACES = Decimal("1e-9")
"""Decimal places of a quantity in a table (JSON, YAML and CSV carry it whole)."""


def by_name(value: int) -> str:
    return pb.UsageGroupBy.Name(value).removeprefix("USAGE_GROUP_BY_").lower()


def run_state(run: pb.BillingRun) -> str:
    return pb.BillingRunState.Name(run.state).removeprefix("BILLING_RUN_STATE_")


def run_trigger(run: pb.BillingRun) -> str:
    return pb.BillingRunTrigger.Name(run.trigger).removeprefix("BILLING_RUN_TRIGGER_")


def short(quantity: str) -> str:
    """A quantity for people: at most 9 decimals, no trailing zeros."""
    try:
        value = Decimal(quantity)
    except InvalidOperation:
        return quantity
    if value.as_tuple().exponent < -9:  # type: ignore[operator]
        value = value.quantize(TABLE_PLACES)
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


# ---------------------------------------------------------------------- usage


def usage_row_json(row: pb.UsageRow) -> dict[str, Any]:
    return {
        "period_start": rfc3339(row.period_start),
        "period_end": rfc3339(row.period_end),
        "cluster": row.cluster,
        "dimension": row.dimension,
        "resource": row.resource,
        "topic": row.topic,
        "principal": row.principal,
        "quantity": row.quantity,
        "unit": row.unit,
        "raw_quantity": int(row.raw_quantity or 0),
        "raw_unit": row.raw_unit,
    }


def usage_json(reply: pb.GetUsageResponse, cluster: str) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "from": rfc3339(reply.from_time),
        "to": rfc3339(reply.to_time),
        "by": by_name(reply.by),
        "rows": [usage_row_json(r) for r in reply.rows],
        "recent_events": reply.recent_events,
        "warnings": list(reply.warnings),
    }


def usage_csv(reply: pb.GetUsageResponse) -> tuple[Sequence[str], list[list[object]]]:
    rows = [usage_row_json(r) for r in reply.rows]
    return USAGE_FIELDS, [[row[f] for f in USAGE_FIELDS] for row in rows]


def usage_table(reply: pb.GetUsageResponse) -> str:
    by = by_name(reply.by)
    span = f"usage from {rfc3339(reply.from_time)} to {rfc3339(reply.to_time)}"
    if not reply.rows:
        return f"no {span}"
    first: list[str] = []
    if by in ("hour", "day"):
        first = ["HOUR" if by == "hour" else "DAY"]
    headers = [*first, "CLUSTER"]
    if by == "topic":
        headers.append("TOPIC")
    elif by == "principal":
        headers.append("PRINCIPAL")
    headers += ["DIMENSION", "RESOURCE", "QUANTITY", "UNIT", "RAW"]
    rows = []
    for r in reply.rows:
        start = rfc3339(r.period_start)
        row: list[object] = [start if by == "hour" else start[:10]] if first else []
        row.append(r.cluster)
        if by == "topic":
            row.append(r.topic)
        elif by == "principal":
            row.append(r.principal)
        row += [r.dimension, r.resource or "-", short(r.quantity), r.unit]
        row.append(f"{r.raw_quantity} {r.raw_unit}")
        rows.append(row)
    return f"{table(headers, rows)}\n\n{span} ({reply.recent_events} recent events)"


# ---------------------------------------------------------------------- invoices


def line_json(line: pb.InvoiceLine) -> dict[str, Any]:
    return {f: getattr(line, f) for f in LINE_FIELDS}


def invoice_json(invoice: pb.Invoice) -> dict[str, Any]:
    return {
        "month": invoice.month,
        "cluster": invoice.cluster,
        "currency": invoice.currency,
        "rate_card": invoice.rate_card,
        "rate_card_version": invoice.rate_card_version,
        "open": invoice.open,
        "lines": [line_json(line) for line in invoice.lines],
        "subtotals": {s.cluster: s.amount for s in invoice.subtotals},
        "total": invoice.total,
    }


def invoice_csv(invoice: pb.Invoice) -> tuple[Sequence[str], list[list[object]]]:
    headers = ("month", *LINE_FIELDS)
    return headers, [[invoice.month, *line_json(line).values()] for line in invoice.lines]


def invoice_table(invoice: pb.Invoice) -> str:
    head = fields(
        [
            ("invoice", invoice.month + (" (open: the month is not over)" if invoice.open else "")),
            ("cluster", invoice.cluster or "all"),
            ("rate card", f"{invoice.rate_card} version {invoice.rate_card_version}"),
            ("currency", invoice.currency),
        ]
    )
    lines = table(
        ["CLUSTER", "DIMENSION", "RESOURCE", "QUANTITY", "UNIT", "UNIT PRICE", "AMOUNT"],
        [
            (
                line.cluster,
                line.dimension,
                line.resource or "-",
                short(line.quantity),
                line.unit,
                line.unit_price,
                line.amount,
            )
            for line in invoice.lines
        ],
    )
    sums = [(f"subtotal {s.cluster}", s.amount) for s in invoice.subtotals]
    totals = fields([*sums, ("total", f"{invoice.total} {invoice.currency}")])
    return f"{head}\n\n{lines}\n\n{totals}"


def invoices_json(reply: pb.ListInvoicesResponse) -> dict[str, Any]:
    return {
        "invoices": [
            {
                "month": i.month,
                "total": i.total,
                "currency": i.currency,
                "clusters": i.clusters,
                "open": i.open,
            }
            for i in reply.invoices
        ]
    }


def invoices_table(reply: pb.ListInvoicesResponse) -> str:
    return table(
        ["MONTH", "TOTAL", "CURRENCY", "CLUSTERS", "STATUS"],
        [
            (i.month, i.total, i.currency, i.clusters, "open" if i.open else "closed")
            for i in reply.invoices
        ],
    )


# ---------------------------------------------------------------------- runs


def progress_text(progress: pb.BillingProgress) -> str:
    """``ingest orders 1/2: message``."""
    parts = [progress.stage]
    if progress.cluster:
        parts.append(progress.cluster)
    if progress.total:
        parts.append(f"{progress.done}/{progress.total}")
    head = " ".join(p for p in parts if p)
    return f"{head}: {progress.message}" if progress.message else head


def run_json(run: pb.BillingRun) -> dict[str, Any]:
    return {
        "id": run.id,
        "trigger": run_trigger(run),
        "state": run_state(run),
        "requested_at": rfc3339(run.requested_at),
        "started_at": rfc3339(run.started_at),
        "finished_at": rfc3339(run.finished_at),
        "progress": {
            "stage": run.progress.stage,
            "cluster": run.progress.cluster,
            "done": run.progress.done,
            "total": run.progress.total,
            "message": run.progress.message,
        },
        "error": run.error,
        "log_path": run.log_path,
        "output": run.output,
        "clusters": list(run.clusters),
        "pid": run.pid,
    }


def took(run: pb.BillingRun) -> str:
    if not run.HasField("started_at") or not run.HasField("finished_at"):
        return "-"
    seconds = run.finished_at.seconds - run.started_at.seconds
    seconds += (run.finished_at.nanos - run.started_at.nanos) / 1e9
    return f"{seconds:.1f}s"


def run_table(run: pb.BillingRun) -> str:
    return fields(
        [
            ("billing run", run.id),
            ("trigger", run_trigger(run)),
            ("state", run_state(run)),
            ("requested", rfc3339(run.requested_at)),
            ("started", rfc3339(run.started_at) or "-"),
            ("finished", rfc3339(run.finished_at) or "-"),
            ("took", took(run)),
            ("progress", progress_text(run.progress) or "-"),
            ("error", run.error or "-"),
            ("clusters", ", ".join(run.clusters) or "-"),
            ("output", run.output or "-"),
            ("log", run.log_path or "-"),
        ]
    )


def runs_table(runs: Sequence[pb.BillingRun]) -> str:
    return table(
        ["ID", "TRIGGER", "STATE", "STARTED", "TOOK", "PROGRESS / ERROR"],
        [
            (
                r.id,
                run_trigger(r),
                run_state(r),
                rfc3339(r.started_at) or rfc3339(r.requested_at),
                took(r),
                r.error or progress_text(r.progress) or "-",
            )
            for r in runs
        ],
    )
