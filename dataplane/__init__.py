"""Sluice's broker: the Kafka protocol server, log storage and coordinators."""
