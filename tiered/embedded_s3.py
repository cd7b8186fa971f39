"""The embedded S3 default: moto's S3 server, made durable on a data directory.

    python -m tiered.embedded_s3 --data-dir DIR [--host 127.0.0.1] [--port N]

moto keeps everything in memory and forgets it on restart. This module adds a disk mirror:

- **Write-through, before the answer.** Four methods of moto's ``S3Backend`` (put_object,
  delete_object, create_bucket, delete_bucket: PutObject, CopyObject, CompleteMultipartUpload
  and DeleteObjects all go through them) note which bucket/key a request changed, in a
  thread-local list. A WSGI middleware around moto's app then writes each noted key's *current*
  state from the backend to disk (data + metadata in one file: temp file, fsync, rename, fsync
  of the directory) and only then lets the response go out. An acknowledged write survives
  ``kill -9`` of this process (and a power cut, as far as fsync does). If the disk write fails,
  the client gets a 500 (retriable) instead of the 200.
- **Reload on start.** Every bucket and object under DIR is put back into moto's backend
  in-process (no HTTP), with its etag, metadata and last-modified time, before the port opens.

Layout (``DIR/s3/``): ``BUCKET/bucket.json`` (account, partition, region) and
``BUCKET/objects/HH/SHA256(key).obj`` where an ``.obj`` file is::

    magic    8 bytes  b"SLUS3OB1"
    meta_len 4 bytes  big-endian length of the JSON that follows
    meta     JSON     {"key", "etag", "size", "last_modified", "metadata"}
    data     size bytes, the object

Keys are hashed into file names because S3 keys are not paths ("a" and "a/b" may both exist,
keys may be 1,024 bytes long). One file per object makes each write atomic (one rename).

Credentials (``tiered.s3_auth``): every request must be signed (AWS Signature Version 4) with a
key of ``DIR/access-keys.json`` (``tiered.access_keys``, mode 0600; re-read when it changes) and
allowed for its bucket; anything else gets S3's 403 (``AccessDenied``, ``InvalidAccessKeyId``,
``SignatureDoesNotMatch``). No key is ever on the command line: the file is the only way in.

Not kept across a restart (documented in tiered/README.md): multipart uploads in progress
(their parts: the client starts the upload again), older versions of versioned buckets
(only the latest version is mirrored), bucket policies, tags, lifecycle and ACLs.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from werkzeug.serving import make_server

from tiered import read_meter
from tiered.access_keys import KEYS_FILE, AccessKey, KeyFile, generate
from tiered.s3_auth import SigV4Front
from tiered.s3_fast_get import FastGet

# moto is imported only inside what the server process runs (serve, install_hooks,
# DiskMirror.sync_key): the control plane, tests and benches import this module for
# EmbeddedS3, the launcher, and must not load moto. Importing it costs ~0.1-0.3 s and
# appends moto's BotocoreStubber to botocore's BUILTIN_HANDLERS, i.e. into every boto3
# client that process creates afterwards.

MAGIC = b"SLUS3OB1"
_HEADER = struct.Struct(">I")
_COPY_CHUNK = 4 * 1024 * 1024
_LOCK_STRIPES = 64
READ_RETRIES = 3
"""Attempts of a GET or HEAD whose key was replaced while moto read it (``DurableApp``)."""

READY_PREFIX = "embedded-s3 listening on "


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _mkdirs_durable(path: Path) -> None:
    """mkdir -p, fsyncing each parent whose entry list changed."""
    missing: list[Path] = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):
            d.mkdir()
        _fsync_dir(d.parent)


class DiskMirror:
    """The on-disk copy of the embedded server's buckets and objects."""

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / "s3"
        self._locks = [threading.Lock() for _ in range(_LOCK_STRIPES)]

    def _lock(self, bucket: str, key: str) -> threading.Lock:
        digest = hashlib.blake2b(f"{bucket}/{key}".encode(), digest_size=2).digest()
        return self._locks[int.from_bytes(digest) % _LOCK_STRIPES]

    def object_path(self, bucket: str, key: str) -> Path:
        name = hashlib.sha256(key.encode()).hexdigest()
        return self.root / bucket / "objects" / name[:2] / f"{name}.obj"

    # --- writes (called with the backend's current state) ---------------------------------

    def sync_bucket(self, backend: Any, bucket_name: str) -> None:
        bucket = backend.buckets.get(bucket_name)
        path = self.root / bucket_name
        if bucket is None:
            if path.exists():
                shutil.rmtree(path)
                _fsync_dir(self.root)
            return
        meta = {
            "account_id": backend.account_id,
            "partition": backend.region_name,
            "region": bucket.region_name,
        }
        _mkdirs_durable(path / "objects")
        self._write_atomic(path / "bucket.json", [json.dumps(meta).encode()])

    def sync_key(self, backend: Any, bucket_name: str, key_name: str) -> None:
        from moto.s3.models import FakeKey  # noqa: PLC0415 - moto: server process only, see top

        with self._lock(bucket_name, key_name):
            bucket = backend.buckets.get(bucket_name)
            key = bucket.keys.get(key_name) if bucket is not None else None
            path = self.object_path(bucket_name, key_name)
            if not isinstance(key, FakeKey):  # gone, or a delete marker
                if path.exists():
                    path.unlink()
                    _fsync_dir(path.parent)
                return
            _mkdirs_durable(path.parent)
            with key.lock:
                size = int(key.size)
                meta = {
                    "key": key_name,
                    "etag": key.etag.strip('"'),
                    "size": size,
                    "last_modified": key.last_modified.isoformat(),
                    "metadata": dict(key.metadata),
                }
                head = json.dumps(meta).encode()
                buffer = key._value_buffer
                buffer.seek(0)

                def chunks() -> Iterator[bytes]:
                    yield MAGIC + _HEADER.pack(len(head)) + head
                    while block := buffer.read(_COPY_CHUNK):
                        yield block

                self._write_atomic(path, chunks())

    @staticmethod
    def _write_atomic(path: Path, chunks: Iterable[bytes]) -> None:
        tmp = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
        with open(tmp, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)

    # --- reload ---------------------------------------------------------------------------

    def load_into(self, backends: Any) -> tuple[int, int]:
        """Put every mirrored bucket and object back into moto; (buckets, objects)."""
        buckets = objects = 0
        if not self.root.exists():
            return 0, 0
        for bucket_dir in sorted(self.root.iterdir()):
            meta_path = bucket_dir / "bucket.json"
            if not meta_path.exists():
                continue
            meta = json.loads(meta_path.read_bytes())
            backend = backends[meta["account_id"]][meta["partition"]]
            backend.create_bucket(bucket_dir.name, meta["region"])
            buckets += 1
            for path in sorted((bucket_dir / "objects").glob("*/*")):
                if path.name.endswith(".tmp"):  # a write that was never acknowledged
                    path.unlink()
                    continue
                with open(path, "rb") as f:
                    obj_meta, data = self._read_object(f, path)
                key = backend.put_object(
                    bucket_dir.name,
                    obj_meta["key"],
                    data,
                    etag=obj_meta["etag"],
                    disable_notification=True,
                )
                key.set_metadata(dict(obj_meta["metadata"]), replace=True)
                key.last_modified = datetime.fromisoformat(obj_meta["last_modified"])
                objects += 1
        return buckets, objects

    @staticmethod
    def _read_object(f: IO[bytes], path: Path) -> tuple[dict[str, Any], bytes]:
        if f.read(len(MAGIC)) != MAGIC:
            raise ValueError(f"{path}: not an embedded-s3 object file")
        (length,) = _HEADER.unpack(f.read(_HEADER.size))
        meta: dict[str, Any] = json.loads(f.read(length))
        data = f.read()
        if len(data) != meta["size"]:
            raise ValueError(f"{path}: {len(data)} bytes, expected {meta['size']}")
        return meta, data


# --- hooks into moto: note what a request changed ----------------------------------------

_pending = threading.local()


def _note(kind: str, backend: Any, bucket: str, key: str = "") -> None:
    changes: list[tuple[str, Any, str, str]] | None = getattr(_pending, "changes", None)
    if changes is not None:
        changes.append((kind, backend, bucket, key))


def install_hooks() -> None:
    """Wrap the four mutating methods of moto's S3 backend (once per process)."""
    from moto.s3.models import S3Backend  # noqa: PLC0415 - moto: server process only, see top

    if getattr(S3Backend, "_sluice_hooked", False):
        return

    def wrap(name: str, kind: str) -> None:
        original: Callable[..., Any] = getattr(S3Backend, name)

        def hooked(self: Any, bucket_name: str, *args: Any, **kwargs: Any) -> Any:
            result = original(self, bucket_name, *args, **kwargs)
            key = kwargs.get("key_name", args[0] if args else "") if kind == "key" else ""
            _note(kind, self, bucket_name, str(key))
            return result

        hooked.__name__ = name
        setattr(S3Backend, name, hooked)

    wrap("put_object", "key")
    wrap("delete_object", "key")
    wrap("create_bucket", "bucket")
    wrap("delete_bucket", "bucket")
    _lock_etag()
    S3Backend._sluice_hooked = True  # type: ignore[attr-defined]


def _lock_etag() -> None:
    """moto computes a key's etag lazily, the first time it is asked for (its PUT's answer,
    a GET's headers), by seeking its buffer to 0 and reading it to the end without the key's
    lock; ``FakeKey.value`` (a GET's body) seeks and reads the same buffer under the lock. A
    GET racing the PUT of a new key could so read from the end: a 200 with an empty body (a
    clean-clone run of the overwrite-race test met one, its checksum header the object's).
    Here the etag is computed under the lock, made reentrant (the disk mirror asks for the
    etag while it holds it)."""
    from moto.s3.models import FakeKey  # noqa: PLC0415 - moto: server process only, see top

    etag = FakeKey.etag
    init = FakeKey.__init__
    setstate = FakeKey.__setstate__

    def locked_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.lock = threading.RLock()

    def locked_setstate(self: Any, state: Any) -> None:
        setstate(self, state)
        self.lock = threading.RLock()

    def locked_etag(self: Any) -> str:
        with self.lock:
            return str(etag.fget(self))  # type: ignore[attr-defined]

    FakeKey.__init__ = locked_init  # type: ignore[method-assign]
    FakeKey.__setstate__ = locked_setstate  # type: ignore[method-assign]
    FakeKey.etag = property(locked_etag)  # type: ignore[method-assign,assignment]


class DurableApp:
    """WSGI middleware: a request's changes reach the disk before its response is sent."""

    def __init__(self, app: Callable[..., Any], mirror: DiskMirror) -> None:
        self.app = app
        self.mirror = mirror

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        held: list[Any] = []

        def hold(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            held[:] = [status, headers, exc_info]
            return lambda data: None  # moto never uses write()

        _pending.changes = []
        try:
            body = self._call(environ, hold)
            changes = _pending.changes
        finally:
            _pending.changes = None
        if changes:
            try:
                self._persist(changes)
            except Exception as exc:
                if hasattr(body, "close"):
                    body.close()
                print(f"embedded-s3: cannot persist: {exc!r}", file=sys.stderr, flush=True)
                message = b"<Error><Code>InternalError</Code><Message>disk write failed"
                message += b"</Message></Error>"
                start_response(
                    "500 Internal Server Error",
                    [("Content-Type", "application/xml"), ("Content-Length", str(len(message)))],
                )
                return [message]
        if held:
            start_response(*held)
        return body

    def _call(self, environ: dict[str, Any], hold: Callable[..., Any]) -> Any:
        """moto's answer. A GET or HEAD that met its key replaced while moto read it (moto
        disposes of a replaced key's buffer without the key's lock: "seek of closed file")
        is asked again, up to READ_RETRIES times, instead of failing with a 500."""
        reads = str(environ.get("REQUEST_METHOD", "")).upper() in ("GET", "HEAD")
        for attempt in range(READ_RETRIES):
            try:
                return self.app(environ, hold)
            except ValueError:
                if not reads or attempt == READ_RETRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def _persist(self, changes: list[tuple[str, Any, str, str]]) -> None:
        seen: set[tuple[str, int, str, str]] = set()
        for kind, backend, bucket, key in changes:
            mark = (kind, id(backend), bucket, key)
            if mark in seen:
                continue
            seen.add(mark)
            if kind == "bucket":
                self.mirror.sync_bucket(backend, bucket)
            else:
                self.mirror.sync_key(backend, bucket, key)


# --- the server process ------------------------------------------------------------------


def serve(
    data_dir: Path,
    host: str,
    port: int,
    *,
    read_counts_flush_ms: int = read_meter.FLUSH_MS,
    read_counts_retention_ms: int = read_meter.RETENTION_MS,
    fast_get: bool = True,
) -> None:
    # buckets by path only, so the bucket a key's scope is checked against (SigV4Front) is the
    # one moto serves; moto reads the setting when it is imported, just below
    os.environ["S3_IGNORE_SUBDOMAIN_BUCKETNAME"] = "true"
    from moto.moto_server.werkzeug_app import (  # noqa: PLC0415 - moto: server process only, see top
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from moto.s3.models import (  # noqa: PLC0415 - moto: server process only, see top
        FakeKey,
        s3_backends,
    )

    data_dir.mkdir(parents=True, exist_ok=True)
    mirror = DiskMirror(data_dir)
    _mkdirs_durable(mirror.root)
    started = time.monotonic()
    buckets, objects = mirror.load_into(s3_backends)
    install_hooks()
    reads = read_meter.ReadCounts(data_dir, retention_ms=read_counts_retention_ms)
    moto_app: DurableApp | FastGet = DurableApp(
        DomainDispatcherApplication(create_backend_app), mirror
    )
    if fast_get:
        moto_app = FastGet(moto_app, mirror.root, s3_backends, FakeKey)
    app = SigV4Front(read_meter.ReadMeter(moto_app, reads), data_dir / KEYS_FILE)
    server = make_server(host, port, app, threaded=True, request_handler=MotoRequestHandler)
    bound = server.server_address[1]
    (data_dir / "embedded_s3.port").write_text(f"{bound}\n")
    print(
        f"{READY_PREFIX}{host}:{bound} (reloaded {buckets} buckets, {objects} objects in "
        f"{time.monotonic() - started:.2f} s)",
        flush=True,
    )
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    stopped = threading.Event()
    flusher = threading.Thread(
        target=reads.run, args=(read_counts_flush_ms, stopped), name="read-counts", daemon=True
    )
    flusher.start()
    try:
        server.serve_forever()
    finally:
        stopped.set()
        flusher.join()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tiered.embedded_s3")
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument(
        "--read-counts-flush-ms",
        type=int,
        default=read_meter.FLUSH_MS,
        help="how often the bytes read by clients are written to read-bytes.json",
    )
    parser.add_argument(
        "--read-counts-retention-ms",
        type=int,
        default=read_meter.RETENTION_MS,
        help="how long read-bytes.json keeps a minute's counts",
    )
    parser.add_argument(
        "--no-fast-get",
        action="store_true",
        help="let moto answer every GET (by default plain GETs of objects held in files are "
        "sent with sendfile: tiered.s3_fast_get)",
    )
    args = parser.parse_args(argv)
    if args.read_counts_flush_ms <= 0 or args.read_counts_retention_ms <= 0:
        parser.error("--read-counts-flush-ms and --read-counts-retention-ms must be positive")
    serve(
        args.data_dir,
        args.host,
        args.port,
        read_counts_flush_ms=args.read_counts_flush_ms,
        read_counts_retention_ms=args.read_counts_retention_ms,
        fast_get=not args.no_fast_get,
    )


# --- starting it as a child process (control plane, tests, bench) ------------------------


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class EmbeddedS3:
    """``python -m tiered.embedded_s3`` as a child process on loopback."""

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        host: str = "127.0.0.1",
        log_path: Path | None = None,
        admin: AccessKey | None = None,
        *,
        read_counts_retention_ms: int = read_meter.RETENTION_MS,
        fast_get: bool = True,
    ) -> None:
        """``admin``: the key allowed everything, written to the key file at ``start`` (none:
        the file's admin key, or a new random one); ``self.admin`` is the one in use.
        ``read_counts_retention_ms``: how long the server keeps what clients read
        (``tiered.read_meter``). ``fast_get``: plain GETs sent with sendfile
        (``tiered.s3_fast_get``); False: moto answers every request."""
        self.read_counts_retention_ms = read_counts_retention_ms
        self.fast_get = fast_get
        self.data_dir = data_dir
        self.keys = KeyFile(data_dir / KEYS_FILE)
        self.admin = admin
        self.host = host
        self.port = port or free_port(host)
        self.log_path = log_path or data_dir.parent / f"{data_dir.name}.s3.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> EmbeddedS3:
        """Start and wait until the port answers (after the reload of DIR)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.admin is not None:
            if self.admin not in self.keys.load():
                self.keys.put(self.admin)
        else:
            self.admin = self.keys.admin()
            if self.admin is None:
                self.admin = generate("admin", admin=True)
                self.keys.put(self.admin)
        cmd = [
            sys.executable,
            "-m",
            "tiered.embedded_s3",
            "--data-dir",
            str(self.data_dir),
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--read-counts-retention-ms",
            str(self.read_counts_retention_ms),
            *([] if self.fast_get else ["--no-fast-get"]),
        ]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"embedded S3 exited with {self.proc.returncode}; see {self.log_path}"
                )
            with socket.socket() as sock:
                sock.settimeout(0.2)
                if sock.connect_ex((self.host, self.port)) == 0:
                    return self
            time.sleep(0.02)
        self.kill()
        raise TimeoutError(f"embedded S3 did not listen on {self.endpoint} in {timeout} s")

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL: the crash the durability promise is about."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.kill()
        self.proc.wait()

    def __enter__(self) -> EmbeddedS3:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


if __name__ == "__main__":
    main()
