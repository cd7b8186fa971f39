"""A deleted cluster's usage outlives its usage topic.

Deleting a cluster deletes its ``__sluice_usage`` topic with its brokers, so before they
stop (after the meter sent the cluster's last minutes, ``metering.Meter.until_deleted``)
the deletion copies every usage event the billing pipeline has not ingested yet — the
records at and after the offsets of its last successful run, as ``cloudctl usage`` reads
them — into ``$SLUICE_HOME/billing-archive/NAME.CLUSTER_ID.jsonl`` (one encoded event per
line, 0600). Every billing run lists every archive file in its spec (``billing.py``) and the
pipeline ingests them beside the live topics (its rollup removes duplicates of a key, so an
event that was also ingested from the topic counts once) and keeps the files: they are the
deleted cluster's usage of record.

Reading takes at most ``kafka.request.timeout.ms`` per partition request; a cluster whose
brokers do not answer loses what was not ingested yet (logged with the span it covers).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from controlplane import errors
from controlplane.billing import ARCHIVE_DIR, write_private
from controlplane.billing_usage import BillingReports
from controlplane.kafka import KafkaResponseError
from controlplane.metering import Meter
from controlplane.store import ClusterRecord
from wire.usage import UsageEvent

log = logging.getLogger("sluice.controlplane.billing")


def archive_path(home: Path, cluster: ClusterRecord) -> Path:
    return home / ARCHIVE_DIR / f"{cluster.name}.{cluster.cluster_id}.jsonl"


def write_archive(path: Path, events: list[UsageEvent]) -> None:
    """Write ``events``, one encoded event per line (0600, atomically, fsynced)."""
    write_private(path, b"".join(event.encode() + b"\n" for event in events))


class UsageArchiver:
    def __init__(self, reports: BillingReports, home: Path, meter: Meter) -> None:
        self.reports = reports
        self.home = home
        self.meter = meter

    async def final_usage(self, cluster: ClusterRecord) -> None:
        """A cluster being deleted, its brokers still running: its last minutes metered,
        then what is not billed yet archived (the reconciler's ``final_meter``)."""
        await self.meter.until_deleted(cluster)
        await self.archive(cluster)

    async def archive(self, cluster: ClusterRecord) -> None:
        """Copy the cluster's not-yet-ingested usage events to its archive file."""
        try:
            events = await self.reports.unbilled_events(cluster)
        except (
            errors.ControlPlaneError,
            KafkaResponseError,
            OSError,
            TimeoutError,
            asyncio.IncompleteReadError,
        ) as exc:
            log.warning(
                "cluster %s: its usage since the last billing run could not be archived before "
                "deletion (%s): that usage is lost with its usage topic",
                cluster.name,
                exc,
            )
            return
        path = archive_path(self.home, cluster)
        await asyncio.to_thread(write_archive, path, events)
        log.info(
            "cluster %s: %d usage events not billed yet archived to %s",
            cluster.name,
            len(events),
            path,
        )
