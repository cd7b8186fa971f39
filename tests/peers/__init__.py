"""Client projects' own test suites run against Apache Kafka and Sluice (see README.md)."""
