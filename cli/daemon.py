"""``cloudctl up | down | status``: the control-plane daemon.

``up`` starts ``python -m controlplane.main`` in its own session with its output in
``$SLUICE_HOME/logs/controlplane.log``, waits until gRPC health says SERVING, and is idempotent.
The control plane writes ``$SLUICE_HOME/controlplane.pid`` and ``$SLUICE_HOME/endpoint``, and
(without ``--s3-endpoint``) starts the embedded S3 server on ``$SLUICE_HOME/s3``, which ``down``
stops with it.

``down`` asks the control plane to stop (``ControlPlane.Shutdown``), which answers with the
processes it stops (itself, the embedded S3 server, every broker), and waits for exactly
those; what still runs after ``--timeout`` seconds is killed (SIGKILL, the last resort).
Only when the control plane does not answer does ``down`` fall back to SIGTERM on the pid in
``controlplane.pid`` and a ``/proc`` scan for brokers, the S3 server and replicators'
MirrorMaker processes on this home's directories (``broker_pids``, ``embedded_s3_pids``,
``replicator_pids``; the first two are also what ``status`` reports then).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import click
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cli.client import ENDPOINT_FILE, PID_FILE, TOKEN_FILE, Api, ApiError, Env, write_token_file
from cli.options import output_option
from cli.output import CliError, emit, fields, progress, rfc3339, status_json
from proto.sluice.v1 import controlplane_pb2

DEFAULT_LISTEN = "127.0.0.1:50551"
"""Where `cloudctl up` puts the API when SLUICE_ENDPOINT is unset and the port is free."""
REPO = Path(__file__).resolve().parent.parent
KILL_WAIT = 5.0
"""Seconds ``down`` waits for processes it had to SIGKILL."""
UP_LOCK_FILE = "up.lock"
"""flock held by the `cloudctl up` that checks for and starts the home's control plane."""
MIRROR_MAKER = "org.apache.kafka.connect.mirror.MirrorMaker"
"""The main class of a replicator's process (controlplane/replicator_process.py)."""
EXIT_ALREADY_RUNNING = 3
"""Exit code of ``python -m controlplane.main`` when another one holds the home."""


def ensure_token(home: Path) -> None:
    """The API token: random, created once, readable by its owner only (0600)."""
    path = home / TOKEN_FILE
    if not path.exists() or not path.read_text().strip():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(32) + "\n")
    os.chmod(path, 0o600)


def daemon_pid(home: Path) -> int | None:
    """The pid of this home's control plane, if one runs (checked against /proc)."""
    try:
        pid = int((home / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    args = [a.decode(errors="replace") for a in cmdline]
    if "controlplane.main" not in args or str(home) not in args:
        return None
    return pid


def embedded_s3_pids(home: Path) -> list[int]:
    """The embedded S3 server(s) on ``$SLUICE_HOME/s3`` (orphans when no daemon runs)."""
    data_dir = str(home / "s3").encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            args = Path(f"/proc/{entry.name}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"tiered.embedded_s3" not in args:
            continue
        if any(a == b"--data-dir" and b == data_dir for a, b in itertools.pairwise(args)):
            found.append(int(entry.name))
    return found


def broker_pids(home: Path) -> list[int]:
    """Broker processes on data directories of this home (orphans when no daemon runs)."""
    prefix = str(home / "clusters") + "/"
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            args = Path(f"/proc/{entry.name}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        for i, arg in enumerate(args[:-1]):
            if arg == b"--data-dir" and args[i + 1].decode(errors="replace").startswith(prefix):
                found.append(int(entry.name))
                break
    return found


def replicator_pids(home: Path) -> list[int]:
    """Replicators' MirrorMaker processes (``$SLUICE_HOME/replicators/NAME/mm2.properties``
    on their command line): they outlive a control plane killed with -9, as brokers do."""
    prefix = str(home / "replicators") + "/"
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            args = Path(f"/proc/{entry.name}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        words = args.split("\0")
        if MIRROR_MAKER in words and any(w.startswith(prefix) for w in words):
            found.append(int(entry.name))
    return found


def _healthy(endpoint: str, timeout: float = 1.0) -> bool:
    with grpc.insecure_channel(endpoint) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout
            )
        except grpc.RpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def _port_free(address: str) -> bool:
    host, _, port = address.rpartition(":")
    with socket.socket() as sock:
        # as the gRPC server binds: connections in TIME_WAIT do not make the port busy
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, int(port)))
        except (OSError, ValueError):
            return False
    return True


def _choose_listen(env: Env) -> str:
    if env.endpoint_override:
        if not _port_free(env.endpoint_override):
            raise CliError(
                f"cannot listen on SLUICE_ENDPOINT={env.endpoint_override}: the address is in use",
                "choose another SLUICE_ENDPOINT, or stop what listens there",
            )
        return env.endpoint_override
    previous = env.recorded_endpoint()
    for candidate in (previous, DEFAULT_LISTEN):
        if candidate and _port_free(candidate):
            return candidate
    return "127.0.0.1:0"


def _log_tail(path: Path, lines: int = 1) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:])


@contextlib.contextmanager
def up_lock(home: Path, timeout: float) -> Iterator[None]:
    """One `cloudctl up` of a home at a time: a second one waits here, then finds the control
    plane the first started (so exactly one is started, and both name its pid)."""
    fd = os.open(home / UP_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout
        noted = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not noted:
                    progress("waiting for another `cloudctl up` of this home to finish")
                    noted = True
                if time.monotonic() > deadline:
                    raise CliError(
                        f"another `cloudctl up` of {home} did not finish within {timeout:.0f}s",
                        f"see {home / 'logs' / 'controlplane.log'}",
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def _wait_running(
    env: Env, deadline: float, proc: subprocess.Popen[bytes] | None, timeout: float
) -> int | None:
    """The pid of the home's control plane once it answers (its pid file written, checked
    against /proc); None when ``proc`` (the one we started) exited first."""
    while True:
        if proc is not None and proc.poll() is not None:
            return None
        pid = daemon_pid(env.home)
        recorded = env.recorded_endpoint()
        if pid is not None and recorded and _healthy(recorded):
            return pid
        if time.monotonic() > deadline:
            raise CliError(
                f"the control plane did not become healthy within {timeout:.0f}s",
                f"see {env.home / 'logs' / 'controlplane.log'}; stop it with `cloudctl down`",
            )
        time.sleep(0.05)


def _spawn(env: Env, s3_endpoint: str | None) -> subprocess.Popen[bytes]:
    with contextlib.suppress(FileNotFoundError):
        (env.home / ENDPOINT_FILE).unlink()
    listen = _choose_listen(env)
    command = [sys.executable, "-m", "controlplane.main", "--home", str(env.home)]
    command += ["--listen", listen]
    if s3_endpoint is not None:
        command += ["--s3-endpoint", s3_endpoint]
    log_path = env.home / "logs" / "controlplane.log"
    pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    with open(log_path, "ab") as log_file:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            start_new_session=True,
            cwd=env.home,
            env={**os.environ, "PYTHONPATH": pythonpath, "PYTHONUNBUFFERED": "1"},
        )


@click.command()
@click.option(
    "--s3-endpoint",
    metavar="URL",
    help="S3-compatible endpoint for the clusters' remote tier (MinIO, Ceph, AWS), with "
    "credentials from the AWS_* environment; nothing else is started. Default: the control "
    "plane runs the embedded S3 server, data in $SLUICE_HOME/s3.",
)
@click.option("--timeout", default=30.0, show_default=True, help="Seconds to wait for start-up.")
@output_option
@click.pass_obj
def up(env: Env, s3_endpoint: str | None, timeout: float, output: str) -> None:
    """Start the control plane in the background (idempotent: one per home)."""
    if s3_endpoint is not None:
        parsed = urlparse(s3_endpoint)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise CliError(
                f"invalid --s3-endpoint {s3_endpoint!r}", "give a URL such as http://127.0.0.1:9000"
            )
    env.home.mkdir(parents=True, exist_ok=True, mode=0o700)
    log_path = env.home / "logs" / "controlplane.log"
    log_path.parent.mkdir(exist_ok=True)
    ensure_token(env.home)
    deadline = time.monotonic() + timeout
    with up_lock(env.home, timeout):
        pid = daemon_pid(env.home)
        started = pid is None
        if pid is not None:
            pid = _wait_running(env, deadline, None, timeout)  # it may still be starting
        else:
            proc = _spawn(env, s3_endpoint)
            pid = _wait_running(env, deadline, proc, timeout)
            if pid is None:  # exited: another control plane holds this home (started by hand)
                code = proc.returncode
                if code == EXIT_ALREADY_RUNNING:
                    started = False
                    pid = _wait_running(env, deadline, None, timeout)
                else:
                    tail = _log_tail(log_path)
                    detail = f": {tail}" if tail else ""
                    raise CliError(
                        f"the control plane exited during start-up (code {code}){detail}",
                        f"see {log_path}",
                    )
    endpoint = env.recorded_endpoint() or ""
    if not started and s3_endpoint is not None:
        progress(
            "cloudctl: note: --s3-endpoint ignored: the control plane is already running "
            "(`cloudctl down` first to change it)"
        )
    state = "running" if started else "already running"
    emit(
        output,
        {"pid": pid, "endpoint": endpoint, "home": str(env.home), "started": started},
        f"control plane {state} at {endpoint} (pid {pid}, home {env.home})",
    )
    if not started:
        return
    if s3_endpoint is None:
        progress(f"object store: embedded S3, data in {env.home / 's3'} (`cloudctl status` tells)")
    else:
        progress(f"object store: {s3_endpoint}")
    progress(f"logs: {log_path}")
    progress("next: cloudctl create-cluster NAME --wait")


def _stop_pids(pids: list[int], timeout: float) -> list[int]:
    """SIGTERM, wait, SIGKILL what is left; returns the pids that needed SIGKILL."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [pid for pid in alive if _alive(pid)]
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return alive


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


@dataclass(frozen=True)
class Process:
    """A process ``down`` waits for: its pid and start time (a pid reused is not it)."""

    pid: int
    started: int
    """``starttime`` of ``/proc/PID/stat`` (clock ticks after boot)."""
    label: str


def start_time(pid: int) -> int | None:
    """The start time of a live process; None when it is gone (or a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 2 :].split()  # fields 3.. ("pid (comm) S ...")
    if len(rest) < 20 or rest[0] in ("Z", "X"):
        return None
    return int(rest[19])  # field 22


def _running(process: Process) -> bool:
    return start_time(process.pid) == process.started


def _names_home(pid: int, home: Path) -> bool:
    """Whether the command line of ``pid`` names ``home`` or a path below it."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    except OSError:
        return False
    roots = {str(home), str(home.resolve())}
    return any(
        a.decode(errors="replace") == root or a.decode(errors="replace").startswith(root + "/")
        for a in args
        for root in roots
    )


def _label(process: controlplane_pb2.ManagedProcess) -> str:
    if process.kind == controlplane_pb2.PROCESS_KIND_CONTROL_PLANE:
        return f"the control plane (pid {process.pid})"
    if process.kind == controlplane_pb2.PROCESS_KIND_EMBEDDED_S3:
        return f"the embedded S3 server (pid {process.pid})"
    if process.HasField("broker_id"):
        return f"broker {process.broker_id} of {process.cluster} (pid {process.pid})"
    return f"broker pid {process.pid}"


def _shutdown(env: Env, pid: int) -> list[controlplane_pb2.ManagedProcess] | None:
    """Ask the control plane ``pid`` to stop: the processes it stops, or None when it does
    not answer (or is not that control plane)."""
    try:
        api = Api(env)
    except CliError:
        return None
    try:
        reply = api.try_call(api.status.Shutdown, controlplane_pb2.ShutdownRequest(pid=pid), 10)
    except ApiError:
        return None
    finally:
        api.close()
    return list(reply.processes)


def wait_for_exit(processes: list[Process], timeout: float) -> list[Process]:
    """Wait until every process has exited; after ``timeout`` SIGKILL the ones left (exactly
    these: pid and start time checked) and wait ``KILL_WAIT`` for them. Returns the killed."""
    deadline = time.monotonic() + timeout
    alive = [p for p in processes if _running(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if _running(p)]
    alive = [p for p in alive if _running(p)]
    for process in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_WAIT
    while any(_running(p) for p in alive) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def _stop_reported(
    env: Env, pid: int, reported: list[controlplane_pb2.ManagedProcess], timeout: float
) -> None:
    """Wait for the processes the control plane reported stopping; SIGKILL after timeout."""
    processes = []
    for item in reported:
        started = start_time(item.pid)
        if started is not None and _names_home(item.pid, env.home):
            processes.append(Process(item.pid, started, _label(item)))
    kinds = [p.kind for p in reported]
    brokers = kinds.count(controlplane_pb2.PROCESS_KIND_BROKER)
    s3 = " and the embedded S3 server" if controlplane_pb2.PROCESS_KIND_EMBEDDED_S3 in kinds else ""
    progress(f"stopping the control plane (pid {pid}), {brokers} broker(s){s3}")
    killed = wait_for_exit(processes, timeout)
    if killed:
        what = ", ".join(p.label for p in killed)
        progress(f"cloudctl: note: {what} did not stop in {timeout:.0f}s; killed")


def _stop_found(env: Env, pid: int, timeout: float) -> None:
    """The fallback when the control plane does not answer: SIGTERM its pid, then stop the
    brokers and the embedded S3 server that a /proc scan finds on this home."""
    progress(
        "cloudctl: note: the control plane does not answer; stopping it by its pid and what "
        f"runs on {env.home}"
    )
    brokers = len(broker_pids(env.home))
    s3 = " and the embedded S3 server" if embedded_s3_pids(env.home) else ""
    progress(f"stopping the control plane (pid {pid}), {brokers} broker(s){s3}")
    killed = _stop_pids([pid], timeout)
    leftovers = broker_pids(env.home) + embedded_s3_pids(env.home) + replicator_pids(env.home)
    if leftovers:
        _stop_pids(leftovers, 10)
    if killed:
        progress(f"cloudctl: note: the control plane did not stop in {timeout:.0f}s; killed it")


@click.command()
@click.option(
    "--timeout",
    default=60.0,
    show_default=True,
    help="Seconds to wait for the stop; what still runs then is killed (SIGKILL).",
)
@output_option
@click.pass_obj
def down(env: Env, timeout: float, output: str) -> None:
    """Stop the control plane and every broker of its clusters (clusters are kept)."""
    result: dict[str, object] = {"home": str(env.home), "was_running": False, "pid": 0}
    pid = daemon_pid(env.home)
    if pid is None:
        orphans = broker_pids(env.home)
        s3_pids = embedded_s3_pids(env.home)
        mirrors = replicator_pids(env.home)
        if orphans or s3_pids or mirrors:
            _stop_pids(orphans + s3_pids + mirrors, timeout / 2)
            what = f"{len(orphans)} broker process(es)" + (
                " and the embedded S3 server" if s3_pids else ""
            )
            what += f", {len(mirrors)} replicator process(es)" if mirrors else ""
            emit(output, result, f"control plane was not running; stopped {what}")
        else:
            emit(output, result, f"control plane is not running (home {env.home})")
        return
    reported = _shutdown(env, pid)
    if reported is None:
        _stop_found(env, pid, timeout)
    else:
        _stop_reported(env, pid, reported, timeout)
    with contextlib.suppress(FileNotFoundError):
        (env.home / ENDPOINT_FILE).unlink()
    emit(output, {**result, "was_running": True, "pid": pid}, "control plane stopped")


@click.command()
@output_option
@click.pass_obj
def status(env: Env, output: str) -> None:
    """Say whether the control plane runs, where, and what it runs."""
    pid = daemon_pid(env.home)
    reply: controlplane_pb2.Status | None = None
    if pid is not None or env.endpoint_override:
        api = Api(env)
        try:
            reply = api.call(api.status.GetStatus, controlplane_pb2.GetStatusRequest(), 8)
        except CliError:
            if pid is not None:
                raise
        finally:
            api.close()
    if output != "table":
        orphan_count = 0 if reply is not None else len(broker_pids(env.home))
        emit(output, status_json(str(env.home), pid, reply, orphan_count), "")
        return
    if reply is None:
        click.echo(f"control plane: not running (home {env.home})")
        orphans = broker_pids(env.home)
        if orphans:
            click.echo(
                f"brokers:        {len(orphans)} broker process(es) still running "
                "(`cloudctl up` adopts them, `cloudctl down` stops them)"
            )
        if embedded_s3_pids(env.home):
            click.echo(
                "object store:   the embedded S3 server still runs "
                "(`cloudctl up` adopts it, `cloudctl down` stops it)"
            )
        progress("start it with `cloudctl up`")
        return
    click.echo(
        fields(
            [
                ("control plane", f"running (pid {reply.pid}, version {reply.version})"),
                ("endpoint", reply.endpoint),
                ("home", reply.home),
                ("started", rfc3339(reply.started_at)),
                ("clusters", reply.clusters),
                ("brokers running", reply.brokers_running),
                ("object store", reply.s3_note or reply.s3_endpoint or "none"),
            ]
        )
    )


@click.command("rotate-token")
@click.option(
    "--grace",
    type=click.IntRange(0, 3600),
    default=0,
    show_default=True,
    help="Seconds the replaced token stays valid (for clients that read the token file "
    "before); 0 also ends the grace of tokens replaced earlier.",
)
@output_option
@click.pass_obj
def rotate_token(env: Env, grace: int, output: str) -> None:
    """Replace the control plane's API token with a new random one.

    The control plane writes it to its token file; when this cloudctl's token file is
    another (a different --home), cloudctl writes it there too. The token is never printed.
    """
    api = Api(env)
    try:
        reply = api.call(
            api.status.RotateToken, controlplane_pb2.RotateTokenRequest(grace_seconds=grace), 10
        )
    finally:
        api.close()
    mine = env.token_path
    if Path(reply.token_file).resolve() != mine.resolve():
        write_token_file(mine, reply.token)
    until = rfc3339(reply.previous_valid_until) if reply.HasField("previous_valid_until") else ""
    result = {"token_file": str(mine), "previous_valid_until": until}
    text = f"API token rotated; the new one is in {mine}" + (
        f"; the previous one is valid until {until}" if until else ""
    )
    if env.token_override:
        text += f" (cloudctl took its token from {env.token_source()}: update it)"
    emit(output, result, text)


COMMANDS = [up, down, status, rotate_token]
