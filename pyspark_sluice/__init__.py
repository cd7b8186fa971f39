"""Spark's automatic discovery of Python data sources (Spark >= 4.0): on the first use of a
Python data source Spark imports every top-level module named ``pyspark_*`` and registers
its ``DefaultSource`` under its ``name()``. This one makes ``format("sluice")`` work with
no ``spark.register(session)`` call. The data source itself is ``spark.source``."""

from spark.source import SluiceDataSource as DefaultSource

__all__ = ["DefaultSource"]
