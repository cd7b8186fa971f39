"""The Billing service (proto/sluice/v1/billing.proto): usage, cost and invoices
(``billing_usage.BillingReports``) and the pipeline's runs (``billing.BillingRunner``)."""

from __future__ import annotations

import time

import grpc

from billing.invoice import Invoice
from controlplane.api.common import rpc, timestamp
from controlplane.billing import BillingRunner
from controlplane.billing_runs import BillingRun, BillingRunState, BillingTrigger, Progress
from controlplane.billing_usage import (
    DEFAULT_RANGE_MS,
    BillingReports,
    GroupBy,
    UsageLine,
    group,
    hour_floor,
    month_of,
)
from proto.sluice.v1 import billing_pb2 as pb
from proto.sluice.v1 import billing_pb2_grpc as pb_grpc

TRIGGERS = {
    BillingTrigger.SCHEDULED: pb.BILLING_RUN_TRIGGER_SCHEDULED,
    BillingTrigger.ON_DEMAND: pb.BILLING_RUN_TRIGGER_ON_DEMAND,
}
STATES = {
    BillingRunState.QUEUED: pb.BILLING_RUN_STATE_QUEUED,
    BillingRunState.RUNNING: pb.BILLING_RUN_STATE_RUNNING,
    BillingRunState.SUCCEEDED: pb.BILLING_RUN_STATE_SUCCEEDED,
    BillingRunState.FAILED: pb.BILLING_RUN_STATE_FAILED,
}
GROUP_BY = {
    pb.USAGE_GROUP_BY_UNSPECIFIED: GroupBy.HOUR,
    pb.USAGE_GROUP_BY_HOUR: GroupBy.HOUR,
    pb.USAGE_GROUP_BY_DAY: GroupBy.DAY,
    pb.USAGE_GROUP_BY_TOPIC: GroupBy.TOPIC,
    pb.USAGE_GROUP_BY_PRINCIPAL: GroupBy.PRINCIPAL,
    pb.USAGE_GROUP_BY_DIMENSION: GroupBy.DIMENSION,
}
GROUP_BY_TO_PROTO = {g: p for p, g in GROUP_BY.items() if p != pb.USAGE_GROUP_BY_UNSPECIFIED}


def run_to_pb(run: BillingRun) -> pb.BillingRun:
    out = pb.BillingRun(
        id=run.id,
        trigger=TRIGGERS[run.trigger],
        state=STATES[run.state],
        requested_at=timestamp(run.requested_at),
        error=run.error,
        log_path=run.log_path,
        output=run.output,
        clusters=list(run.clusters),
        pid=run.pid,
    )
    if run.started_at is not None:
        out.started_at.CopyFrom(timestamp(run.started_at))
    if run.finished_at is not None:
        out.finished_at.CopyFrom(timestamp(run.finished_at))
    if run.progress is not None:
        out.progress.CopyFrom(progress_to_pb(run.progress))
    return out


def progress_to_pb(progress: Progress) -> pb.BillingProgress:
    return pb.BillingProgress(
        stage=progress.stage,
        cluster=progress.cluster,
        done=progress.done,
        total=progress.total,
        message=progress.message,
    )


def usage_row_to_pb(line: UsageLine) -> pb.UsageRow:
    return pb.UsageRow(
        period_start=timestamp(line.start_ms / 1000),
        period_end=timestamp(line.end_ms / 1000),
        cluster=line.cluster,
        dimension=line.dimension.value,
        resource=line.resource,
        topic=line.topic,
        principal=line.principal,
        quantity=line.quantity_text,
        unit=line.unit,
        raw_quantity=str(line.raw),
        raw_unit=line.raw_unit,
    )


def invoice_to_pb(invoice: Invoice, cluster: str, current_month: str) -> pb.Invoice:
    doc = invoice.to_json()
    return pb.Invoice(
        month=invoice.month,
        cluster=cluster,
        lines=[
            pb.InvoiceLine(
                cluster=line["cluster"],
                dimension=line["dimension"],
                resource=line["resource"],
                quantity=line["quantity"],
                unit=line["unit"],
                unit_price=line["unit_price"],
                amount=line["amount"],
                model=line["model"],
            )
            for line in doc["lines"]
        ],
        subtotals=[
            pb.InvoiceSubtotal(cluster=name, amount=amount)
            for name, amount in doc["subtotals"].items()
        ],
        total=doc["total"],
        currency=invoice.currency,
        rate_card=invoice.rate_card,
        rate_card_version=invoice.rate_card_version,
        open=invoice.month >= current_month,
    )


def _ms(ts: object, default: int) -> int:
    seconds = getattr(ts, "seconds", 0)
    nanos = getattr(ts, "nanos", 0)
    if not seconds and not nanos:
        return default
    return int(seconds * 1000 + nanos // 1_000_000)


class BillingService(pb_grpc.BillingServicer):
    def __init__(self, runner: BillingRunner, reports: BillingReports) -> None:
        self.runner = runner
        self.reports = reports

    @rpc
    async def GetUsage(
        self, request: pb.GetUsageRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetUsageResponse:
        end = _ms(request.to_time, int(time.time() * 1000))
        start = hour_floor(_ms(request.from_time, end - DEFAULT_RANGE_MS))
        by = GROUP_BY.get(request.by, GroupBy.HOUR)
        usage = await self.reports.usage(request.cluster or None, start, end)
        return pb.GetUsageResponse(
            rows=[usage_row_to_pb(line) for line in group(usage.totals, by, start, end)],
            from_time=timestamp(start / 1000),
            to_time=timestamp(end / 1000),
            by=GROUP_BY_TO_PROTO[by],
            recent_events=usage.recent_events,
            warnings=usage.warnings,
        )

    @rpc
    async def ListInvoices(
        self, request: pb.ListInvoicesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListInvoicesResponse:
        current = month_of(int(time.time() * 1000))
        found = await self.reports.invoices()
        return pb.ListInvoicesResponse(
            invoices=[
                pb.InvoiceSummary(
                    month=i.month,
                    total=i.to_json()["total"],
                    currency=i.currency,
                    clusters=len(i.clusters),
                    open=i.month >= current,
                )
                for i in found
            ]
        )

    @rpc
    async def GetInvoice(
        self, request: pb.GetInvoiceRequest, context: grpc.aio.ServicerContext
    ) -> pb.Invoice:
        invoice = await self.reports.invoice(request.month, request.cluster or None)
        return invoice_to_pb(invoice, request.cluster, month_of(int(time.time() * 1000)))

    @rpc
    async def GetCost(
        self, request: pb.GetCostRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetCostResponse:
        month = request.month or month_of(int(time.time() * 1000))
        cost = await self.reports.cost(request.cluster or None, month)
        return pb.GetCostResponse(
            month=cost.month,
            currency=cost.currency,
            rows=[
                pb.CostRow(
                    day=r.day, cluster=r.cluster, dimension=r.dimension.value, amount=str(r.amount)
                )
                for r in cost.rows
            ],
            total=str(cost.total),
            rate_card=cost.rate_card,
            rate_card_version=cost.rate_card_version,
            warnings=list(cost.warnings),
        )

    @rpc
    async def RunBilling(
        self, request: pb.RunBillingRequest, context: grpc.aio.ServicerContext
    ) -> pb.RunBillingResponse:
        run, already = self.runner.request(BillingTrigger.ON_DEMAND)
        return pb.RunBillingResponse(run=run_to_pb(run), already_running=already)

    @rpc
    async def GetBillingRun(
        self, request: pb.GetBillingRunRequest, context: grpc.aio.ServicerContext
    ) -> pb.BillingRun:
        return run_to_pb(self.runner.runs.get(request.id))

    @rpc
    async def ListBillingRuns(
        self, request: pb.ListBillingRunsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListBillingRunsResponse:
        runs = self.runner.runs.all(max(0, request.limit))
        return pb.ListBillingRunsResponse(runs=[run_to_pb(r) for r in runs])
