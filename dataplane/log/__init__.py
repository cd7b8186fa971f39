"""Partition logs: segments of record batches with sparse offset and time indexes."""
