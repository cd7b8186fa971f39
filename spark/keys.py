"""Option names that options.py and control_plane.py both use, and the error both raise.

A leaf module (it imports nothing of spark): options.py uses control_plane.py to resolve
``sluice.cluster``, and control_plane.py raises :class:`OptionError` without importing
options.py, so neither imports the other in a cycle.
"""

from __future__ import annotations

S3_PREFIX = "sluice.s3."
"""``sluice.s3.X`` options are the object store's ``tiered.s3.X`` settings."""
KAFKA_PREFIX = "kafka."
BOOTSTRAP = "kafka.bootstrap.servers"
CLUSTER = "sluice.cluster"
ENDPOINT = "sluice.controlplane.endpoint"
TOKEN = "sluice.controlplane.token"  # noqa: S105 - an option name
TIMEOUT = "sluice.controlplane.timeout.ms"
PRIVATE_ENDPOINT = "sluice.endpoint"
"""A private endpoint of the cluster named by ``sluice.cluster``: read through its listener."""
SECURITY_PROTOCOL = "kafka.security.protocol"


class OptionError(ValueError):
    """An option is missing, unknown in combination, or has a bad value."""
