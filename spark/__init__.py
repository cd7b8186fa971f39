"""spark: the ``sluice`` PySpark data source (see README.md).

    import spark
    spark.register(session)            # then session.read.format("sluice")…

Importing this package does not import pyspark; :func:`register` does.
"""

from __future__ import annotations

from typing import Any

FORMAT = "sluice"


def register(session: Any) -> None:
    """Register ``format("sluice")`` with a SparkSession (``session.dataSource.register``)."""
    from spark.source import SluiceDataSource

    session.dataSource.register(SluiceDataSource)
