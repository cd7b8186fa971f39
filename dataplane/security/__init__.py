"""Authentication on the Kafka listeners: listeners and TLS (``listeners``), SCRAM
credentials (``credentials``), the per-connection SASL state (``session``) and the
bootstrap file of initial users (``bootstrap``). See README.md."""
