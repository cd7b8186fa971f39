"""A Confluent-compatible schema registry per cluster, served by the control plane
(README.md in this directory)."""

from controlplane.schema_registry.service import SchemaRegistryService

__all__ = ["SchemaRegistryService"]
