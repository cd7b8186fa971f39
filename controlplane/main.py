"""The control-plane daemon (started in the background by ``cloudctl up``).

    python -m controlplane.main --home DIR [--listen HOST:PORT] [--s3-endpoint URL]
                                [--set key=value ...]

Logs to stderr (``cloudctl up`` sends them to ``$SLUICE_HOME/logs/controlplane.log``).
Without ``--s3-endpoint`` it runs the embedded S3 server (``python -m tiered.embedded_s3``, data in
``HOME/s3``) for the clusters' buckets. SIGTERM or SIGINT stop every broker of every cluster, the
embedded S3 server, then the server. A ``kill -9`` leaves brokers and the S3 server running; the
next start re-adopts them.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controlplane.config import Settings
    from controlplane.server import ControlPlane

EXIT_ALREADY_RUNNING = 3


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m controlplane.main", description="Sluice control plane"
    )
    parser.add_argument("--home", required=True, help="state directory ($SLUICE_HOME)")
    parser.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT of the gRPC API")
    parser.add_argument(
        "--s3-endpoint",
        help="S3-compatible endpoint URL of the remote tier (credentials from the AWS_* "
        "environment); default: start the embedded S3 server on HOME/s3",
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a control-plane setting"
    )
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


def load_settings(home: Path, overrides: list[str]) -> Settings:
    from controlplane.config import Settings  # noqa: PLC0415 - see main()
    from controlplane.errors import InvalidConfig  # noqa: PLC0415 - see main()
    from dataplane.config import read_properties  # noqa: PLC0415 - see main()

    raw: dict[str, str] = {}
    path = home / "controlplane.properties"
    if path.exists():
        raw.update(read_properties(path.read_text().splitlines()))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise InvalidConfig(f"--set expects key=value, got {item!r}")
        raw[key.strip()] = value.strip()
    return Settings.from_properties(raw)


async def run(plane: ControlPlane) -> None:
    await plane.start()
    await plane.serve_until_signal()


def main(argv: list[str] | None = None) -> int:
    """The daemon. Its parts are imported here, not at the top, so that the process can mark
    hypothesis absent before they import kio (``dataplane/entry.py`` says why: 0.15-0.2 s of
    CPU at every start in a test install)."""
    from controlplane.errors import InvalidConfig  # noqa: PLC0415 - see the docstring
    from controlplane.server import AlreadyRunning, ControlPlane  # noqa: PLC0415

    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    home = Path(args.home).expanduser().resolve()
    try:
        settings = load_settings(home, args.set)
    except InvalidConfig as exc:
        print(f"controlplane: {exc.message}", file=sys.stderr)
        return 2
    plane = ControlPlane(home, args.listen, settings, args.s3_endpoint)
    try:
        asyncio.run(run(plane))
    except AlreadyRunning as exc:
        print(f"controlplane: {exc}", file=sys.stderr)
        return EXIT_ALREADY_RUNNING
    except OSError as exc:
        print(f"controlplane: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    sys.exit(main())
