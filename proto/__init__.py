"""proto: see README.md."""
