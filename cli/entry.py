"""The ``cloudctl`` console script. It imports only this module, so a Ctrl-C while the
command line's modules are still loading (grpc, click, the nouns: a few hundred ms) ends as
every interrupt of cloudctl does: one line on stderr and exit code 130, no traceback."""

from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130


def main() -> None:
    try:
        from cli.main import main as cloudctl  # noqa: PLC0415 - the import may be interrupted
    except KeyboardInterrupt:
        sys.stderr.write("cloudctl: error: interrupted\n")
        sys.exit(EXIT_INTERRUPTED)
    cloudctl()
