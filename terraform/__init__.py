"""terraform: see README.md."""
