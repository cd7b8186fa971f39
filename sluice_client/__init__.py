"""sluice_client: the one client module of the control plane's gRPC API (README.md)."""
