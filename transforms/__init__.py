"""transforms: see README.md."""
