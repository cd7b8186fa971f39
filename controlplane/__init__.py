"""controlplane: see README.md."""
