"""tiered: see README.md."""
