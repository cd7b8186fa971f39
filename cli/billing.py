"""Billing: ``cloudctl usage``, ``invoice``, ``list-invoices``, ``cost-chart`` and the
``billing`` group (``billing run [--wait]``, ``billing list-runs``, ``billing describe-run``),
over the control plane's Billing service (proto/sluice/v1/billing.proto).

Billing is of the whole installation, as a cloud bill is of the account: without
``--cluster`` these commands cover every cluster (``$SLUICE_CLUSTER`` and ``use-cluster``
do not narrow them); ``--cluster C`` keeps one (a deleted one too, while its usage is
recorded). ``usage`` and ``invoice`` also print CSV (``-o csv``).
"""

from __future__ import annotations

import contextlib
import datetime
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import click

from cli.billing_formats import (
    BY,
    invoice_csv,
    invoice_json,
    invoice_table,
    invoices_json,
    invoices_table,
    progress_text,
    run_json,
    run_state,
    run_table,
    runs_table,
    usage_csv,
    usage_json,
    usage_table,
)
from cli.chart import ChartUnavailable, draw
from cli.client import Api, ApiError, Env, explain
from cli.options import (
    FORMATS,
    BareHelpGroup,
    add_global_options,
    complete_cluster,
    output_option,
)
from cli.output import CliError, emit, progress
from cli.timeopt import TIME
from proto.sluice.v1 import billing_pb2 as pb
from proto.sluice.v1 import billing_pb2_grpc as pb_grpc
from proto.sluice.v1 import errors_pb2 as epb

CSV_FORMATS = (*FORMATS, "csv")
POLL_INTERVAL = 1.0
"""How often ``billing run --wait`` asks for the run's progress."""
WAIT_TIMEOUT = 3600.0
"""Default of ``billing run --timeout``: seconds --wait waits (the run goes on after)."""
USAGE_TIMEOUT = 120.0
"""Deadline of GetUsage and GetCost: they read the tables and every usage topic."""
CHART_SIZE = (1200, 600)
SHORT_HELP_LIMIT = 120
"""Characters of a command's one-line help in `cloudctl billing --help`."""


def csv_output_option(func: Any) -> Any:
    """``-o/--output table|json|yaml|csv``."""
    return click.option(
        "-o",
        "--output",
        type=click.Choice(CSV_FORMATS),
        default="table",
        show_default=True,
        help="Output format; json, yaml and csv carry the same fields and are stable.",
    )(func)


def account_cluster_option(func: Any) -> Any:
    """``--cluster C``: one cluster; without it, every cluster (no default from the
    environment: billing is of the installation)."""
    return click.option(
        "--cluster",
        metavar="C",
        default="",
        shell_complete=complete_cluster,
        help="Only this cluster (default: every cluster).",
    )(func)


def billing_api(env: Env) -> tuple[Api, pb_grpc.BillingStub]:
    api = Api(env)
    return api, pb_grpc.BillingStub(api.client.channel)


HINTS = {
    epb.BILLING_RUN_NOT_FOUND: "list the runs with `cloudctl billing list-runs`",
    epb.INVOICE_NOT_FOUND: "`cloudctl list-invoices` lists the months invoiced; "
    "`cloudctl billing run --wait` invoices the months with new usage",
    epb.CLUSTER_NOT_FOUND: "list clusters with `cloudctl list-clusters`",
}


def call(api: Api, method: Any, request: Any, timeout: float = 30.0) -> Any:
    """``method(request)``; billing's errors with their hints, the others as ``explain``."""
    try:
        return api.try_call(method, request, timeout)
    except ApiError as exc:
        hint = HINTS.get(exc.reason)
        if hint is not None:
            raise CliError(exc.message, hint) from None
        raise explain(exc, api.env) from None


def notes(warnings: Any) -> None:
    for warning in warnings:
        progress(f"cloudctl: note: {warning}")


# ---------------------------------------------------------------------- usage, invoices


@click.command("usage")
@account_cluster_option
@click.option(
    "--from",
    "from_time",
    type=TIME,
    help="Start (ISO 8601 or -1h, -2d; rounded down to the hour; default: 24 hours before --to).",
)
@click.option("--to", "to_time", type=TIME, help="End, exclusive (default: now).")
@click.option(
    "--by",
    type=click.Choice(list(BY)),
    default="hour",
    show_default=True,
    help="Rows per hour, day, topic, principal or dimension (the last three over the range).",
)
@csv_output_option
@click.pass_obj
def usage(env: Env, *, cluster: str, from_time: Any, to_time: Any, by: str, output: str) -> None:
    """Metered usage in billing units (hours, GB, GB-months), the current hour included."""
    api, billing = billing_api(env)
    request = pb.GetUsageRequest(cluster=cluster, by=BY[by])
    if from_time is not None:
        request.from_time.CopyFrom(from_time)
    if to_time is not None:
        request.to_time.CopyFrom(to_time)
    reply = call(api, billing.GetUsage, request, USAGE_TIMEOUT)
    notes(reply.warnings)
    emit(
        output,
        usage_json(reply, cluster),
        lambda: usage_table(reply),
        lambda: usage_csv(reply),
    )


def current_month() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m")


@click.command("invoice")
@click.option("--month", metavar="YYYY-MM", help="The invoice's month (default: this month, UTC).")
@account_cluster_option
@csv_output_option
@click.pass_obj
def invoice(env: Env, *, month: str | None, cluster: str, output: str) -> None:
    """A month's invoice as of the last billing run: lines, subtotals, total."""
    api, billing = billing_api(env)
    found = call(
        api,
        billing.GetInvoice,
        pb.GetInvoiceRequest(month=month or current_month(), cluster=cluster),
    )
    emit(
        output,
        invoice_json(found),
        lambda: invoice_table(found),
        lambda: invoice_csv(found),
    )


@click.command("list-invoices")
@output_option
@click.pass_obj
def list_invoices(env: Env, *, output: str) -> None:
    """The months invoiced, with their totals."""
    api, billing = billing_api(env)
    reply = call(api, billing.ListInvoices, pb.ListInvoicesRequest())
    emit(
        output,
        invoices_json(reply),
        lambda: invoices_table(reply) if reply.invoices else "no invoices yet",
    )


@click.command("cost-chart")
@account_cluster_option
@click.option("--month", metavar="YYYY-MM", help="The month (default: this month, UTC).")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(dir_okay=False, writable=True),
    metavar="FILE.png",
    help="Where to write the PNG.",
)
@click.option("--width", default=CHART_SIZE[0], show_default=True, help="Width in pixels.")
@click.option("--height", default=CHART_SIZE[1], show_default=True, help="Height in pixels.")
@output_option
@click.pass_obj
def cost_chart(
    env: Env,
    *,
    cluster: str,
    month: str | None,
    out: str,
    width: int,
    height: int,
    output: str,
) -> None:
    """A PNG of the cost per day of a month, stacked by cluster and dimension."""
    if not 200 <= width <= 10_000 or not 150 <= height <= 10_000:
        raise click.BadParameter("give 200-10000 x 150-10000 pixels", param_hint="--width/--height")
    api, billing = billing_api(env)
    reply = call(
        api,
        billing.GetCost,
        pb.GetCostRequest(cluster=cluster, month=month or current_month()),
        USAGE_TIMEOUT,
    )
    notes(reply.warnings)
    rows = [(r.day, r.cluster, r.dimension, Decimal(r.amount)) for r in reply.rows]
    title = f"Cost per day, {reply.month}" + (f", cluster {cluster}" if cluster else "")
    title += f": {reply.total} {reply.currency} ({reply.rate_card} {reply.rate_card_version})"
    try:
        series = draw(
            Path(out),
            reply.month,
            rows,
            currency=reply.currency,
            title=title,
            width=width,
            height=height,
        )
    except ChartUnavailable as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot write {out}: {exc.strerror or exc}") from None
    result = {
        "path": str(Path(out).resolve()),
        "month": reply.month,
        "cluster": cluster,
        "currency": reply.currency,
        "total": reply.total,
        "rate_card": reply.rate_card,
        "rate_card_version": reply.rate_card_version,
        "width": width,
        "height": height,
        "days": len({r[0] for r in rows}),
        "series": [{"label": s.label, "total": str(s.total)} for s in series],
    }
    emit(
        output,
        result,
        f"wrote {result['path']} ({width}x{height}): {len(series)} series over "
        f"{result['days']} days of {reply.month}, total {reply.total} {reply.currency}",
    )


# ---------------------------------------------------------------------- billing runs


class BillingGroup(BareHelpGroup):
    """``cloudctl billing`` alone prints its help, which lists the commands with their whole
    one-line help."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [
            (name, command.get_short_help_str(SHORT_HELP_LIMIT))
            for name, command in self.commands.items()
            if not command.hidden
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group("billing", cls=BillingGroup)
def billing_group() -> None:
    """The billing pipeline's runs: run [--wait], list-runs, describe-run ID."""


@billing_group.command("run")
@click.option(
    "--wait", is_flag=True, help="Wait until the run ends, showing its progress on stderr."
)
@click.option(
    "--timeout",
    default=WAIT_TIMEOUT,
    show_default=True,
    help="Seconds --wait waits before giving up (the run goes on).",
)
@output_option
@click.pass_obj
def run(env: Env, *, wait: bool, timeout: float, output: str) -> None:
    """Run the billing pipeline now (or show the run in progress)."""
    api, billing = billing_api(env)
    reply = call(api, billing.RunBilling, pb.RunBillingRequest())
    found = reply.run
    if reply.already_running:
        progress(f"billing run {found.id} is already {run_state(found)}: not starting another")
    elif not wait:
        progress(
            f"billing run {found.id} started; follow it with "
            f"`cloudctl billing describe-run {found.id}`"
        )
    if wait:
        found = wait_for_run(api, billing, found.id, timeout)
    emit(
        output,
        {**run_json(found), "already_running": reply.already_running},
        lambda: run_table(found),
    )
    if found.state == pb.BILLING_RUN_STATE_FAILED:
        raise CliError(
            f"billing run {found.id} FAILED: {found.error}", f"its log: {found.log_path}"
        )


def wait_for_run(
    api: Api, billing: pb_grpc.BillingStub, run_id: str, timeout: float
) -> pb.BillingRun:
    """Poll the run until it ends; each change of state or progress on stderr."""
    started = time.monotonic()
    last = ""
    lost = False
    while True:
        try:
            found = api.try_call(billing.GetBillingRun, pb.GetBillingRunRequest(id=run_id), 10)
        except ApiError as exc:
            if exc.reason != epb.CONTROL_PLANE_UNAVAILABLE and exc.code.name not in (
                "UNAVAILABLE",
                "DEADLINE_EXCEEDED",
            ):
                raise explain(exc, api.env) from None
            if not lost:
                progress(
                    f"[{time.monotonic() - started:5.1f}s] the control plane does not "
                    "answer; waiting for it (it may be restarting)"
                )
                lost = True
            found = None
        if found is not None:
            lost = False
            line = f"{run_state(found)} {progress_text(found.progress)}".strip()
            if line != last:
                progress(f"[{time.monotonic() - started:5.1f}s] {run_id}: {line}")
                last = line
            if found.state in (pb.BILLING_RUN_STATE_SUCCEEDED, pb.BILLING_RUN_STATE_FAILED):
                return found
        if time.monotonic() - started > timeout:
            raise CliError(
                f"billing run {run_id} did not end within {timeout:.0f}s (it goes on)",
                f"follow it with `cloudctl billing describe-run {run_id}`",
            )
        time.sleep(POLL_INTERVAL)
        if lost:
            with contextlib.suppress(CliError):  # not back yet: its endpoint file is gone
                api.reconnect()


@billing_group.command("list-runs")
@click.option("--limit", default=20, show_default=True, help="The newest N runs (0: all).")
@output_option
@click.pass_obj
def list_runs(env: Env, *, limit: int, output: str) -> None:
    """Billing runs, oldest first: trigger, state, start, duration, progress or error."""
    api, billing = billing_api(env)
    reply = call(api, billing.ListBillingRuns, pb.ListBillingRunsRequest(limit=max(0, limit)))
    runs = list(reply.runs)
    emit(
        output,
        {"runs": [run_json(r) for r in runs]},
        lambda: runs_table(runs) if runs else "no billing runs yet",
    )


@billing_group.command("describe-run")
@click.argument("run_id", metavar="ID")
@output_option
@click.pass_obj
def describe_run(env: Env, *, run_id: str, output: str) -> None:
    """One billing run: trigger, state, times, last progress, error, log."""
    api, billing = billing_api(env)
    found = call(api, billing.GetBillingRun, pb.GetBillingRunRequest(id=run_id))
    emit(output, run_json(found), lambda: run_table(found))


for _sub in billing_group.commands.values():
    add_global_options(_sub)

COMMANDS: list[click.Command] = [usage, invoice, list_invoices, cost_chart, billing_group]
