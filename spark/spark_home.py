"""A Spark home for pyspark installed from PyPI whose Python workers import pyspark from the
interpreter's installed copy, as the driver does.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the PYTHONPATH of every Python
process it starts (the daemons that fork UDF and data source workers, the streaming source
runner). Python keeps no compiled code for modules imported from a zip, so each of those
processes compiles pyspark's modules from source (0.8-1 s of CPU), and pyspark's worker
calls ``importlib.invalidate_caches()`` before every task, which reads the zip's directory
(1,377 entries) again: 73 ms of CPU per task. A billing run spent a third of its Python CPU
there (11 of 34 s). pip's pyspark holds the same modules in its package directory, compiled
once into ``__pycache__``. A Spark home whose ``bin`` and ``jars`` are the package's and
whose ``python/lib`` is absent changes nothing but where the workers' imports come from.

Used only where that is certain: ``SPARK_HOME`` is not set (a Spark distribution of the
user's own is left alone), the pyspark imported here is a pip install with ``bin`` and
``jars``, and the workers run this interpreter (``PYSPARK_PYTHON`` unset or
``sys.executable``), so they import the very files the driver did.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

LINKED = ("bin", "jars")
"""What the launcher needs of a Spark home: ``bin/spark-submit`` and the jars it puts on
the JVM's class path (``bin/spark-class``)."""


def installed_pyspark() -> Path | None:
    """The directory of the imported pyspark when it is a pip install with a Spark home's
    ``bin`` and ``jars`` in it."""
    import pyspark  # noqa: PLC0415 - only when a Spark session is about to start

    package = Path(pyspark.__file__).resolve().parent
    if (package / "bin" / "spark-submit").is_file() and (package / "jars").is_dir():
        return package
    return None


def applies() -> bool:
    """Whether :func:`use_installed_pyspark` would change anything (see the module)."""
    if os.environ.get("SPARK_HOME"):
        return False
    worker = os.environ.get("PYSPARK_PYTHON")
    if worker and Path(worker).absolute() != Path(sys.executable).absolute():
        return False
    return installed_pyspark() is not None


def use_installed_pyspark(directory: Path) -> Path | None:
    """Make ``directory`` a Spark home linked to the installed pyspark and set
    ``SPARK_HOME`` to it for the Spark processes this process starts; None (nothing
    changed) when it does not apply. Call before the first SparkSession."""
    if not applies():
        return None
    package = installed_pyspark()
    assert package is not None
    if not _links_to(directory, package):
        _make(directory, package)
    os.environ["SPARK_HOME"] = str(directory)
    return directory


def _links_to(directory: Path, package: Path) -> bool:
    try:
        return (
            all(os.readlink(directory / name) == str(package / name) for name in LINKED)
            and not (directory / "python").exists()
        )
    except OSError:
        return False


def _make(directory: Path, package: Path) -> None:
    """Build the links beside ``directory`` and rename them into place (another process
    may build the same one at once: whichever rename lands, both point to ``package``)."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    for name in LINKED:
        (staging / name).symlink_to(package / name, target_is_directory=True)
    old = directory.with_name(f".{directory.name}-old-{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        directory.rename(old)
    try:
        staging.rename(directory)
    except OSError:  # another process put its own there first: the same links
        shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
