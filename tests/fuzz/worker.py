"""The fuzzing process of one target: ``python -m tests.fuzz.worker TARGET [libFuzzer
options and corpus directories]`` (``tests/fuzz/run.py`` starts one per target).

Sluice's packages, scramp and this harness are imported under atheris's instrumentation,
so libFuzzer sees the coverage of their Python code (but ``wire.record_columns``, compiled
by numba); every feature name of the target
(``targets.FEATURES``) gets a small instrumented function of its own, so an API version
or codec reached for the first time counts as new coverage even inside native decoders.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

import atheris  # type: ignore[import-untyped]

# numba compiles this module's walker from its bytecode, which atheris's instrumentation
# would change: imported first, uninstrumented (with wire.errors); the differential check of
# the record_batch target compares it with the instrumented walk_records instead
import wire.record_columns  # noqa: F401

with atheris.instrument_imports(
    include=["wire", "dataplane", "tiered", "spark", "scramp", "tests.fuzz"]
):
    from tests.fuzz import targets


def _marker(index: int) -> Callable[[], int]:
    """An instrumented function of its own: calling it is one libFuzzer feature."""
    namespace: dict[str, Callable[[], int]] = {}
    exec(f"def mark_{index}():\n    return {index}\n", namespace)
    marker: Callable[[], int] = atheris.instrument_func(namespace[f"mark_{index}"])
    return marker


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in targets.TARGETS:
        sys.exit(
            f"usage: python -m tests.fuzz.worker {{{','.join(targets.TARGETS)}}} [libFuzzer args]"
        )
    name = sys.argv[1]
    markers = {feature: _marker(i) for i, feature in enumerate(targets.FEATURES[name]())}

    def feature(label: str) -> None:
        marker = markers.get(label)
        if marker is not None:
            marker()

    targets.feature = feature
    logging.disable(logging.CRITICAL)  # recovery logs every torn file it repairs
    atheris.Setup([sys.argv[0], *sys.argv[2:]], targets.TARGETS[name].run)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
