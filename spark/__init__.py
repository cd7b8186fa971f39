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
    # spark.source imports pyspark: `import spark` must not load Spark, only register() does
    from spark.source import SluiceDataSource  # noqa: PLC0415 - defers pyspark to register()

    session.dataSource.register(SluiceDataSource)
