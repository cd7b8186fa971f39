"""Sluice's sans-io wire and file formats: see README.md."""
