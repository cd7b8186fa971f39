"""``sluice-broker``: run one broker in the foreground.

    sluice-broker --data-dir DIR --listen HOST:PORT [--config FILE] [--set key=value ...]

Logs go to stderr. SIGTERM or SIGINT stop it cleanly: the listener closes, logs are
fsynced and their indexes written, so the next start skips recovery.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import NoReturn

import uvloop

from dataplane.broker import Broker
from dataplane.config import WATCHDOG_FILE, BrokerConfig, read_properties
from dataplane.security.bootstrap import bootstrap_users, read_users
from dataplane.server import KafkaServer
from wire.errors import InvalidConfig

log = logging.getLogger("sluice.broker")
MALLOC_THRESHOLD = 256 * 1024 * 1024
HALT_EXIT_CODE = 70
"""Exit status of a broker that halts on a fatal storage failure (EX_SOFTWARE)."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sluice-broker", description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", required=True, help="directory for logs and metadata")
    parser.add_argument("--listen", required=True, help="HOST:PORT of the Kafka listener")
    parser.add_argument("--config", help="properties file of broker settings (key=value)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker setting; repeatable; overrides --config",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    return parser.parse_args(argv)


def build_config(args: argparse.Namespace) -> BrokerConfig:
    overrides: dict[str, str] = {}
    if args.config:
        try:
            overrides.update(read_properties(Path(args.config).read_text().splitlines()))
        except OSError as exc:
            raise InvalidConfig(f"cannot read --config {args.config}: {exc.strerror}") from exc
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise InvalidConfig(f"--set expects key=value, got {item!r}")
        overrides[key.strip()] = value.strip()
    return BrokerConfig.build(data_dir=args.data_dir, listen=args.listen, overrides=overrides)


async def serve(
    config: BrokerConfig, ready: asyncio.Event | None = None, entered: float | None = None
) -> None:
    """Run a broker until SIGTERM or SIGINT; ``entered``: when ``main`` began (for the
    start-up log line)."""
    users_file = config.get_str("sasl.scram.bootstrap.users.file")
    users = read_users(users_file) if users_file else []
    broker = Broker(config)
    server = KafkaServer(broker)  # checks the listeners and loads TLS files before joining
    built = time.monotonic()
    loop = asyncio.get_running_loop()
    fatal = loop.create_task(broker.cluster.fatal.wait())
    starting = loop.create_task(broker.start())
    # a metadata log that fails while the broker joins halts it as it would later
    await asyncio.wait([starting, fatal], return_when=asyncio.FIRST_COMPLETED)
    if fatal.done():
        halt(broker)
    try:
        await starting
    except InvalidConfig as exc:
        print(f"sluice-broker: {exc.message}", file=sys.stderr, flush=True)
        exit_now(2)
    except Exception as exc:
        # Exiting through asyncio.run would cancel every task the start left behind and
        # wait for them; one stuck on the cause (a full disk) kept a registered broker
        # alive but deaf until its supervisor killed it. Exit now: recovery reads the disk.
        log.critical(
            "start-up failed: %s; free disk space if it is full: the supervisor's restart "
            "recovers this broker from what is on disk",
            exc,
            exc_info=not isinstance(exc, OSError),
        )
        exit_now(1)
    await server.start()
    bootstrap = asyncio.ensure_future(bootstrap_users(broker.cluster, users)) if users else None
    alive = watchdog(config)
    log.info(
        "broker %d listening on %s:%d (data in %s)",
        broker.node_id,
        config.listen_host,
        server.port,
        config.data_dir,
    )
    log.info(
        "broker %d started: %s", broker.node_id, start_timeline(entered, built, broker.start_phases)
    )
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready.set()
    await asyncio.wait([loop.create_task(stop.wait()), fatal], return_when=asyncio.FIRST_COMPLETED)
    if fatal.done():
        halt(broker)
    log.info("stopping")
    if bootstrap is not None:
        bootstrap.cancel()
    if alive is not None:
        alive.cancel()
    # Kafka's order: the controlled shutdown while the listener still answers (leaderships
    # move at once, and a request for a partition that moved is answered
    # NOT_LEADER_OR_FOLLOWER naming its new leader), then the listener closes. Closed first,
    # clients would find this broker gone while the metadata still named it leader.
    await broker.cluster.shut_down_gracefully()
    await server.stop()
    await broker.stop()
    log.info("stopped cleanly")


def watchdog(config: BrokerConfig) -> asyncio.Task[None] | None:
    """Touch ``WATCHDOG_FILE`` every ``watchdog.interval.ms`` from the event loop, as a
    systemd service pings its watchdog: a supervisor that sees the file stop changing knows
    this process makes no progress (stopped, or its loop hung) though it lives."""
    every = config.get_seconds("watchdog.interval.ms")
    if every <= 0:
        return None
    path = Path(config.data_dir) / WATCHDOG_FILE

    async def touch() -> None:
        failing = False
        while True:
            try:
                path.touch()  # utime, or a create when it is gone
                failing = False
            except OSError as exc:  # never fatal: the supervisor sees a stale file
                if not failing:
                    log.warning("cannot touch %s (retried every %.2f s): %s", path, every, exc)
                failing = True
            await asyncio.sleep(every)

    return asyncio.get_running_loop().create_task(touch())


def start_timeline(entered: float | None, built: float, phases: list[tuple[str, float]]) -> str:
    """Where a start's time went: from the process's exec (Linux: /proc/self/stat) to
    ``main`` (``entered``: interpreter and imports), to the broker's construction
    (``built``), through its start-up ``phases``, to now (listening)."""
    steps: list[tuple[str, float | None]] = [
        ("interpreter and imports", entered),
        ("set-up", built),
        *phases,
    ]
    steps.append(("listener", time.monotonic()))
    begin = process_started()
    total = "" if begin is None else f"{time.monotonic() - begin:.2f} s after exec: "
    parts = []
    for name, end in steps:
        if begin is not None and end is not None:
            parts.append(f"{name} {end - begin:.2f} s")
        begin = end
    return total + ", ".join(parts)


def process_started() -> float | None:
    """When this process was started, on the time.monotonic() clock; None off Linux."""
    try:
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])
        boot_now = time.clock_gettime(time.CLOCK_BOOTTIME)
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return time.monotonic() - (boot_now - ticks / os.sysconf("SC_CLK_TCK"))


def halt(broker: Broker) -> NoReturn:
    """As Kafka's fatal fault handler: no graceful stop on a metadata log that cannot be
    written; the supervisor restarts the process, and recovery reads what is on disk."""
    log.critical(
        "halting: the metadata log cannot be written or applied (%s); free disk space if it "
        "is full: the supervisor's restart recovers this broker from what is on disk",
        broker.cluster.failure,
    )
    exit_now(HALT_EXIT_CODE)


def exit_now(code: int) -> NoReturn:
    """Exit without unwinding asyncio (its clean-up would wait on tasks stuck on the cause)."""
    logging.shutdown()
    os._exit(code)


def keep_large_buffers_in_heap() -> None:
    """Stop glibc from returning every freed buffer over 128 KiB to the kernel.

    Produce and fetch requests move buffers of about a megabyte; with glibc's defaults each
    is a fresh mmap whose pages fault in on first touch, which measured as more than half of
    the broker's CPU time for 10 KiB records. 256 MiB thresholds keep them in the heap for
    reuse. Other C libraries are left alone.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    libc.mallopt(m_mmap_threshold, MALLOC_THRESHOLD)
    libc.mallopt(m_trim_threshold, MALLOC_THRESHOLD)


def main(argv: list[str] | None = None) -> int:
    entered = time.monotonic()
    args = parse_args(argv)
    keep_large_buffers_in_heap()
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = build_config(args)
    except InvalidConfig as exc:
        print(f"sluice-broker: {exc.message}", file=sys.stderr)
        return 2
    try:
        uvloop.run(serve(config, entered=entered))
    except InvalidConfig as exc:
        print(f"sluice-broker: {exc.message}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"sluice-broker: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
