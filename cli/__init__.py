"""cli: see README.md."""
