"""Transforms on the broker: see README.md."""
