"""Bytes <-> typed values: Kafka framing, request/response codecs, record batches."""
