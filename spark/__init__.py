"""spark: see README.md."""
