"""The transaction coordinator (Kafka's TransactionCoordinator); see README.md."""
