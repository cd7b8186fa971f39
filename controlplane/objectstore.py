"""The remote tier's object store: the embedded S3 server the control plane runs, or an endpoint.

Embedded (the default): ``python -m tiered.embedded_s3 --data-dir $SLUICE_HOME/s3 --port N`` on
127.0.0.1 (``tiered.embedded_s3.EmbeddedS3``), supervised like a broker:

- it runs in its own session, so a control plane killed with ``-9`` leaves it serving; the next
  control plane re-adopts it (``/proc/<pid>/cmdline`` names the data directory and the port)
  and kills duplicates;
- its port is recorded (setting ``s3.embedded.port`` in ``state.db``) and reused on the next
  start when free; when it must move, clusters recorded with the old URL get the new one;
- an exit is seen at once (pidfd) and the server restarted on the same port and data (crash
  loops back off up to ``s3.restart.backoff.max.ms``); one that stops answering
  ``s3.health.failures`` probes in a row is killed and restarted;
- ``cloudctl down`` stops it (SIGTERM, then SIGKILL).

External (``cloudctl up --s3-endpoint URL``): the URL is used as given and nothing is started.
Credentials come from boto3's default chain in the control plane's environment
(``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, a profile...).

Credentials of the embedded server (it checks Signature V4 on every request,
``tiered.s3_auth``): the control plane generates them and keeps them in the server's key file
(``$SLUICE_HOME/s3/access-keys.json``, 0600, ``tiered.access_keys``), which the server re-reads
when it changes. The control plane signs with its admin key (buckets, find-orphans, probes);
each cluster gets two keys scoped to its bucket: read-write for its brokers (in their
environment, never on a command line) and read-only for clients (``GetCluster``). A deleted
cluster's keys are removed. Keys are never logged.

Every cluster gets its own bucket (:func:`bucket_name`): its reconciler creates it (and retries
until the store answers); deleting the cluster deletes its objects and the bucket (best effort).
All S3 calls run in threads with short timeouts, never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import http.client
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from botocore.exceptions import NoCredentialsError, PartialCredentialsError

from controlplane.config import Settings
from controlplane.process import BrokerProcess, free_port, is_zombie, port_free, read_cmdline
from controlplane.store import Store
from tiered.access_keys import KEYS_FILE, AccessKey, KeyFile, generate
from tiered.config import ObjectStoreSettings
from tiered.embedded_s3 import EmbeddedS3
from tiered.errors import ObjectNotFound, ObjectStoreError, ObjectStoreUnavailable, map_error
from tiered.object_store import S3ObjectStore
from tiered.read_meter import READS_FILE, Counts, load_counts

log = logging.getLogger("sluice.controlplane.objectstore")

EMBEDDED_HOST = "127.0.0.1"
EMBEDDED_MODULE = "tiered.embedded_s3"
ADMIN_KEY_NAME = "controlplane"
PORT_SETTING = "s3.embedded.port"
ENDPOINT_SETTING = "s3.endpoint"
MODE_SETTING = "s3.mode"
PROBE_KEY = "sluice-probe"
PROBE_CONNECT_TIMEOUT_MS = 1_000
PROBE_READ_TIMEOUT_MS = 2_000
DELETE_WAIT_S = 5.0
"""How long DeleteCluster waits for an embedded server that is restarting (then gives up)."""


def bucket_name(cluster: str, cluster_id: str) -> str:
    """``sluice-<name>-<8 hex of the id>``: a valid S3 name (3-63 chars, lower case), unique."""
    short = hashlib.sha256(cluster_id.encode()).hexdigest()[:8]
    return f"sluice-{cluster.lower()[:47]}-{short}"


def _arg(cmdline: list[str], name: str) -> str | None:
    for i, arg in enumerate(cmdline[:-1]):
        if arg == name:
            return cmdline[i + 1]
    return None


def _runs_embedded_s3(cmdline: list[str] | None, data_dir: Path) -> bool:
    return (
        cmdline is not None
        and EMBEDDED_MODULE in cmdline
        and _arg(cmdline, "--data-dir") == str(data_dir)
    )


def embedded_s3_pids(data_dir: Path) -> list[int]:
    """Live embedded S3 servers on ``data_dir`` (found through ``/proc``)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if _runs_embedded_s3(read_cmdline(pid), data_dir) and not is_zombie(pid):
            found.append(pid)
    return sorted(found)


class EmbeddedS3Process(BrokerProcess):
    """The embedded S3 server's process: started by us, or adopted after a restart."""

    kind = "embedded S3"

    def identifies(self) -> bool:
        return _runs_embedded_s3(read_cmdline(self.pid), Path(self.data_dir)) and not is_zombie(
            self.pid
        )

    @property
    def port(self) -> int | None:
        cmdline = read_cmdline(self.pid) or []
        text = _arg(cmdline, "--port")
        return int(text) if text and text.isdigit() else None


@dataclass(frozen=True)
class Probe:
    """Whether the object store answered a request, and what went wrong if not."""

    answering: bool
    detail: str = ""


class ObjectStoreManager:
    """The control plane's object store: runs the embedded server or names an external one."""

    def __init__(
        self, home: Path, store: Store, settings: Settings, external: str | None = None
    ) -> None:
        self.store = store
        self.settings = settings
        self.external = external
        self.data_dir = home / "s3"
        self.keys = KeyFile(self.data_dir / KEYS_FILE)
        self._admin: AccessKey | None = None
        self._reads: tuple[int, Counts] = (-1, {})
        """The read counts last loaded, with the file's mtime (ns) then."""
        self.log_path = home / "logs" / "embedded-s3.log"
        self.port = 0
        self.proc: EmbeddedS3Process | None = None
        self.restarts = 0
        """Restarts of the embedded server after it exited or hung (since this start)."""
        self.last_error = ""
        self.started_in = 0.0
        """Seconds the last start of the embedded server took until its port answered."""
        self._wake: asyncio.Event | None = None
        self._running = asyncio.Event()
        """Set while the embedded server's process runs (started or adopted)."""
        self._task: asyncio.Task[None] | None = None
        self._starting: EmbeddedS3 | None = None
        self._start_future: asyncio.Future[EmbeddedS3] | None = None
        self._failures = 0
        self._next_attempt = 0.0
        self._health_failures = 0
        self._last_probe = 0.0
        self._probe_stores: dict[str, S3ObjectStore] = {}
        self._halted = False
        """Shutting down: no server is started any more (``stop`` follows)."""

    # ------------------------------------------------------------------ what it is

    @property
    def embedded(self) -> bool:
        return self.external is None

    @property
    def kind(self) -> str:
        return "embedded" if self.embedded else "external"

    @property
    def endpoint(self) -> str:
        if self.external is not None:
            return self.external
        return f"http://{EMBEDDED_HOST}:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None and self.proc.alive() else 0

    def pids(self) -> list[int]:
        """The embedded server's process, running or being started; none for an external
        store (``cloudctl down`` waits for these)."""
        found = [self.proc.pid] if self.proc is not None and self.proc.alive() else []
        starting = self._starting
        if starting is not None and starting.proc is not None and starting.proc.poll() is None:
            found.append(starting.proc.pid)
        return found

    def halt(self) -> None:
        """Start no server from now on (a start in flight goes on; ``stop`` ends it)."""
        self._halted = True

    def reserved_ports(self) -> set[int]:
        """Ports brokers must not be given (the embedded server's, even while it restarts)."""
        return {self.port} if self.embedded and self.port else set()

    def settings_for(
        self,
        endpoint: str,
        bucket: str,
        *,
        connect_timeout_ms: int = 2_000,
        read_timeout_ms: int | None = None,
        max_attempts: int = 3,
    ) -> ObjectStoreSettings:
        """The control plane's own settings to reach ``bucket`` at ``endpoint`` (its admin
        key for our server; boto3's default chain for another)."""
        key = self.admin_key() if self.is_embedded(endpoint) else None
        return self._settings(
            endpoint,
            bucket,
            key,
            connect_timeout_ms=connect_timeout_ms,
            read_timeout_ms=read_timeout_ms,
            max_attempts=max_attempts,
        )

    def cluster_settings(
        self, endpoint: str, bucket: str, *, read_only: bool
    ) -> ObjectStoreSettings:
        """Settings with the cluster's own key for our server (scoped to ``bucket``: read-write
        for its brokers, read-only for clients), made on first use; for another store, no
        credentials (boto3's default chain)."""
        key = self.cluster_key(bucket, read_only=read_only) if self.is_embedded(endpoint) else None
        return self._settings(endpoint, bucket, key)

    def is_embedded(self, endpoint: str) -> bool:
        return self.embedded and endpoint == self.endpoint

    def admin_key(self) -> AccessKey:
        """The control plane's admin key of the embedded server (made on first use)."""
        if self._admin is None:
            found = next((k for k in self.keys.load() if k.name == ADMIN_KEY_NAME), None)
            if found is None:
                found = generate(ADMIN_KEY_NAME, admin=True)
                self.keys.put(found)
            self._admin = found
        return self._admin

    def cluster_key(self, bucket: str, *, read_only: bool) -> AccessKey:
        """The key of a cluster's bucket (read-write or read-only), made on first use."""
        for key in self.keys.load():
            if not key.admin and key.buckets == (bucket,) and key.read_only == read_only:
                return key
        key = generate(
            f"{bucket} {'readers' if read_only else 'brokers'}",
            buckets=(bucket,),
            read_only=read_only,
        )
        self.keys.put(key)
        log.info(
            "object store: new %s key for bucket %s", "read-only" if read_only else "broker", bucket
        )
        return key

    def read_counts(self) -> Counts:
        """What clients read from the embedded server, by bucket, minute and topic
        (``tiered.read_meter``); {} for another object store. The file is parsed again
        only when the server rewrote it (the meter asks once per cluster per pass)."""
        if not self.embedded:
            return {}
        try:
            stamp = (self.data_dir / READS_FILE).stat().st_mtime_ns
        except FileNotFoundError:
            return {}
        if stamp != self._reads[0]:
            self._reads = (stamp, load_counts(self.data_dir))
        return self._reads[1]

    def forget_cluster_keys(self, bucket: str) -> None:
        """Remove the keys of a deleted cluster's bucket (they stop working at once)."""
        if self.embedded:
            self.keys.remove(lambda k: k.admin or k.buckets != (bucket,))

    def _settings(
        self,
        endpoint: str,
        bucket: str,
        key: AccessKey | None,
        *,
        connect_timeout_ms: int = 2_000,
        read_timeout_ms: int | None = None,
        max_attempts: int = 3,
    ) -> ObjectStoreSettings:
        return ObjectStoreSettings(
            endpoint=endpoint or None,
            bucket=bucket,
            access_key_id=key.access_key_id if key is not None else None,
            secret_access_key=key.secret_access_key if key is not None else None,
            connect_timeout_ms=connect_timeout_ms,
            read_timeout_ms=read_timeout_ms or self.settings.s3_request_timeout_ms,
            max_attempts=max_attempts,
        )

    def note(self, probe: Probe) -> str:
        """One line: where the object store is and whether it answers."""
        if self.embedded:
            pid = f", pid {self.pid}" if self.pid else ""
            where = f"embedded S3 at {self.endpoint} (data in {self.data_dir}{pid})"
        else:
            where = f"external S3 endpoint {self.endpoint}"
        if probe.answering:
            return f"{where}: answering" + (f" ({probe.detail})" if probe.detail else "")
        return f"{where}: not answering ({probe.detail})"

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Adopt or start the embedded server (in the background), or record the endpoint."""
        self._wake = asyncio.Event()
        found = await asyncio.to_thread(embedded_s3_pids, self.data_dir)
        self.store.set_setting(MODE_SETTING, self.kind)
        if not self.embedded:
            for pid in found:
                log.warning(
                    "stopping embedded S3 pid %d: the object store is now %s", pid, self.endpoint
                )
                EmbeddedS3Process(pid, str(self.data_dir)).kill()
            self.store.set_setting(ENDPOINT_SETTING, self.endpoint)
            log.info("object store: external endpoint %s", self.endpoint)
            return
        self.admin_key()  # in the key file before the server reads it
        in_use = {c.s3_bucket for c in self.store.list_clusters() if c.s3_bucket}
        dropped = self.keys.remove(lambda k: k.admin or set(k.buckets) <= in_use)
        if dropped:
            log.info("object store: removed %d key(s) of clusters that are gone", dropped)
        recorded = int(self.store.get_setting(PORT_SETTING, "0") or 0)
        procs = [EmbeddedS3Process(pid, str(self.data_dir)) for pid in found]
        procs.sort(key=lambda p: p.port != recorded)  # the one on the recorded port first
        keep: EmbeddedS3Process | None = None
        stopped = False
        if procs:
            keep, *extra = procs
            for proc in extra:  # never two servers on one data directory
                log.warning("stopping duplicate embedded S3 pid %d", proc.pid)
                proc.kill()
            port = keep.port or recorded
            if await asyncio.to_thread(accepts_anonymous, EMBEDDED_HOST, port):
                log.warning(
                    "embedded S3 pid %d accepts unsigned requests (started before credentials "
                    "were enforced); restarting it",
                    keep.pid,
                )
                await keep.stop(self.settings.broker_stop_timeout_ms / 1000)  # frees its port
                keep = None
                stopped = True
        if keep is not None:
            self.proc = keep
            self._running.set()
            keep.watch(self.wake)
            self._set_port(keep.port or recorded, recorded)
            log.info("adopted embedded S3 (pid %d) on %s", keep.pid, self.endpoint)
        elif recorded and (
            await self._port_freed(recorded) if stopped else port_free(EMBEDDED_HOST, recorded)
        ):
            self._set_port(recorded, recorded)
        else:
            self._set_port(self._free_port(), recorded)
        self._task = asyncio.create_task(self._supervise(), name="embedded-s3")

    async def _port_freed(self, port: int) -> bool:
        """Whether ``port`` is free, or frees within ``broker.stop.timeout.ms`` (a server just
        stopped may hold it a moment longer): clients keep the endpoint they knew."""
        deadline = time.monotonic() + self.settings.broker_stop_timeout_ms / 1000
        while not port_free(EMBEDDED_HOST, port):
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.1)
        return True

    def _free_port(self) -> int:
        return free_port(EMBEDDED_HOST, self.store.used_ports())

    def _set_port(self, port: int, previous: int) -> None:
        """Record the server's port; clusters that used the old URL follow it."""
        self.port = port
        self.store.set_setting(PORT_SETTING, str(port))
        self.store.set_setting(ENDPOINT_SETTING, self.endpoint)
        if previous and previous != port:
            old = f"http://{EMBEDDED_HOST}:{previous}"
            for cluster in self.store.list_clusters():
                if cluster.s3_endpoint == old:
                    self.store.update_cluster(cluster.name, s3_endpoint=self.endpoint)
            log.warning(
                "embedded S3 moved from port %d to %d (the old one is taken)", previous, port
            )

    def wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def stop(self) -> None:
        """Stop the supervisor and the embedded server (``cloudctl down``)."""
        starting, future = self._starting, self._start_future
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if starting is not None:  # a start in flight: its thread sees the exit at once
            if starting.proc is not None and starting.proc.poll() is None:
                starting.proc.terminate()
            if future is not None:
                with contextlib.suppress(Exception):
                    await future
            await asyncio.to_thread(starting.stop)
        if self.proc is not None:
            pid = self.proc.pid
            await self.proc.stop(self.settings.broker_stop_timeout_ms / 1000)
            self.proc = None
            self._running.clear()
            log.info("embedded S3 (pid %d) stopped", pid)

    # ------------------------------------------------------------------ supervision

    async def _supervise(self) -> None:
        interval = self.settings.supervisor_interval_ms / 1000
        assert self._wake is not None
        while True:
            self._wake.clear()
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("embedded S3: supervision step failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), interval)

    async def _step(self) -> None:
        proc = self.proc
        if proc is not None and not proc.alive():
            code = proc.returncode
            log.warning(
                "embedded S3 (pid %d) exited%s; restarting it",
                proc.pid,
                "" if code is None else f" with code {code}",
            )
            proc.kill()  # reaps a child
            self.proc = None
            self._running.clear()
            self.restarts += 1
        if self.proc is None:
            if time.monotonic() >= self._next_attempt and not self._halted:
                await self._spawn()
            return
        interval = self.settings.s3_health_interval_ms / 1000
        if time.monotonic() - self._last_probe < interval:
            return
        probe = await self.probe()
        self._last_probe = time.monotonic()
        if probe.answering:
            self._health_failures = 0
            return
        self._health_failures += 1
        log.warning(
            "embedded S3 (pid %d) did not answer (%d in a row): %s",
            self.proc.pid,
            self._health_failures,
            probe.detail,
        )
        if self._health_failures >= self.settings.s3_health_failures:
            log.warning("embedded S3 (pid %d) does not answer; restarting it", self.proc.pid)
            self.proc.kill()  # the next step sees it gone and restarts it
            self._health_failures = 0
            self.wake()

    async def _spawn(self) -> None:
        if not port_free(EMBEDDED_HOST, self.port):
            self._set_port(self._free_port(), self.port)
        server = EmbeddedS3(
            self.data_dir,
            self.port,
            EMBEDDED_HOST,
            self.log_path,
            admin=self.admin_key(),
            read_counts_retention_ms=self.settings.metering_catchup_max_ms,
        )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        self._starting = server
        self._start_future = asyncio.ensure_future(
            asyncio.to_thread(server.start, self.settings.s3_start_timeout_ms / 1000)
        )
        try:
            await asyncio.shield(self._start_future)
        except Exception as exc:
            self._failures += 1
            backoff = min(
                0.1 * 2 ** (self._failures - 1), self.settings.s3_restart_backoff_max_ms / 1000
            )
            self._next_attempt = time.monotonic() + backoff
            self.last_error = str(exc)
            log.warning("embedded S3 did not start: %s; retrying in %.1fs", exc, backoff)
            return
        finally:
            self._starting = None
        assert server.proc is not None
        self.proc = EmbeddedS3Process(server.proc.pid, str(self.data_dir), server.proc)
        self._running.set()
        self.proc.watch(self.wake)
        self.started_in = time.monotonic() - started
        self._failures = 0
        self._health_failures = 0
        self._last_probe = time.monotonic()
        self.last_error = ""
        log.info(
            "embedded S3 (pid %d) serving on %s in %.2fs (data in %s, log %s)",
            self.proc.pid,
            self.endpoint,
            self.started_in,
            self.data_dir,
            self.log_path,
        )

    # ------------------------------------------------------------------ requests

    async def probe(self) -> Probe:
        """One HEAD request with short timeouts (no retry): does the store answer?"""
        if self.embedded and self.proc is None:
            return Probe(False, self.last_error or "starting")
        store = self._probe_stores.get(self.endpoint)
        if store is None:
            store = self._probe_stores[self.endpoint] = S3ObjectStore(
                self.settings_for(
                    self.endpoint,
                    PROBE_KEY,
                    connect_timeout_ms=PROBE_CONNECT_TIMEOUT_MS,
                    read_timeout_ms=PROBE_READ_TIMEOUT_MS,
                    max_attempts=1,
                )
            )
        try:
            await asyncio.to_thread(store.exists, PROBE_KEY)
        except ObjectStoreUnavailable as exc:
            return Probe(False, str(exc))
        except ObjectStoreError as exc:  # it answered, with an error (access denied...)
            unsigned = isinstance(exc.__cause__, NoCredentialsError | PartialCredentialsError)
            return Probe(not unsigned, str(exc))
        return Probe(True)

    async def ensure_bucket(self, endpoint: str, bucket: str) -> None:
        """Create the bucket if needed; raises ``ObjectStoreError`` (retriable or not)."""
        store = S3ObjectStore(self.settings_for(endpoint, bucket, max_attempts=1))
        await asyncio.to_thread(store.ensure_bucket)

    async def delete_bucket(self, endpoint: str, bucket: str) -> int:
        """Delete every object of the bucket, then the bucket; the number of objects deleted."""
        if self.embedded and endpoint == self.endpoint:  # restarting: give it a moment
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._running.wait(), DELETE_WAIT_S)
        store = S3ObjectStore(self.settings_for(endpoint, bucket))
        return await asyncio.to_thread(_empty_and_delete, store)


def accepts_anonymous(host: str, port: int) -> bool:
    """Whether the server at ``host:port`` answers an unsigned ListBuckets (one that does not
    check credentials); False when it refuses or does not answer."""
    connection = http.client.HTTPConnection(host, port, timeout=2)
    try:
        connection.request("GET", "/")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def _empty_and_delete(store: S3ObjectStore) -> int:
    try:
        keys = [info.key for info in store.list()]
    except ObjectNotFound:
        return 0  # no bucket: nothing to do
    store.delete_many(keys)
    try:
        store.client.delete_bucket(Bucket=store.bucket)
    except Exception as exc:
        err = map_error(exc, op="delete_bucket", key=store.bucket)
        if not isinstance(err, ObjectNotFound):
            raise err from exc
    return len(keys)
