"""The cluster's bucket, one job of a cluster's reconciler: created in the background,
retried with backoff while the object store does not answer, deleted with the cluster (best
effort: the cluster goes away even when its store does not answer)."""

from __future__ import annotations

import asyncio
import logging
import time

from controlplane.objectstore import ObjectStoreManager, bucket_name
from controlplane.reconcile_base import ReconcilerBase, log
from controlplane.states import ClusterState, StorageMode
from controlplane.store import ClusterRecord
from tiered.errors import ObjectStoreError


class Buckets(ReconcilerBase):
    def _ensure_bucket(self, cluster: ClusterRecord) -> ClusterRecord:
        """Create the cluster's bucket in the background, retried with backoff until it is.

        Brokers do not wait for it: the remote tier copes with a store that is down (uploads
        retry, local data is kept). Clusters recorded before buckets existed get one here.
        """
        objects = self.manager.object_store
        if objects is None or self.bucket_ready or cluster.storage_mode is StorageMode.LOCAL:
            return cluster
        if not cluster.s3_bucket:
            cluster = self.store.update_cluster(
                self.name,
                s3_endpoint=objects.endpoint,
                s3_bucket=bucket_name(cluster.name, cluster.cluster_id),
            )
        busy = self._bucket_task is not None and not self._bucket_task.done()
        if not busy and time.monotonic() >= self._bucket_next:
            self._bucket_task = asyncio.create_task(
                self._create_bucket(objects, cluster.s3_endpoint, cluster.s3_bucket),
                name=f"bucket-{self.name}",
            )
        return cluster

    async def _create_bucket(self, objects: ObjectStoreManager, endpoint: str, bucket: str) -> None:
        try:
            await objects.ensure_bucket(endpoint, bucket)
        except ObjectStoreError as exc:
            self._bucket_failures += 1
            backoff = min(0.2 * 2 ** (self._bucket_failures - 1), 10.0)
            self._bucket_next = time.monotonic() + backoff
            log.log(
                logging.WARNING if self._bucket_failures > 3 else logging.INFO,
                "cluster %s: bucket %s at %s not created yet (%s); retrying in %.1fs",
                self.name,
                bucket,
                endpoint,
                exc,
                backoff,
            )
            return
        self.bucket_ready = True
        log.info("cluster %s: bucket %s ready at %s", self.name, bucket, endpoint)

    def cancel_background(self) -> None:
        """Stop waiting for a bucket being created (shutdown; the request ends on its own)."""
        if self._bucket_task is not None:
            self._bucket_task.cancel()

    async def _delete_bucket(self, cluster: ClusterRecord) -> None:
        """Best effort: the cluster goes away even when its object store does not answer."""
        objects = self.manager.object_store
        if objects is None or not cluster.s3_bucket:
            return
        if self._bucket_task is not None:  # a create in flight must not outlive the delete
            await asyncio.wait([self._bucket_task])
        self.set_state(cluster, ClusterState.DELETING, f"deleting bucket {cluster.s3_bucket}")
        objects.forget_cluster_keys(cluster.s3_bucket)  # its brokers are stopped
        try:
            deleted = await objects.delete_bucket(cluster.s3_endpoint, cluster.s3_bucket)
        except ObjectStoreError as exc:
            log.warning(
                "cluster %s: bucket %s at %s not deleted (%s); delete it by hand",
                self.name,
                cluster.s3_bucket,
                cluster.s3_endpoint,
                exc,
            )
            return
        log.info(
            "cluster %s: deleted bucket %s at %s (%d objects)",
            self.name,
            cluster.s3_bucket,
            cluster.s3_endpoint,
            deleted,
        )
