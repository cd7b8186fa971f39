"""The ``sluice-broker`` console script: a broker process, as ``dataplane.main`` runs it.

kio registers hypothesis strategies for its types whenever hypothesis is importable, and
hypothesis is a test dependency: in a development or test install that was 0.2-0.9 s of
every broker start (the soak measured it under load), for nothing a broker uses. A broker
process marks it absent before anything imports kio; a test that imports ``dataplane.main``
in its own process keeps hypothesis.
"""

from __future__ import annotations

import sys


def main() -> int:
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    from dataplane.main import main as run  # noqa: PLC0415 - after the line above, see top

    return run()


if __name__ == "__main__":
    sys.exit(main())
