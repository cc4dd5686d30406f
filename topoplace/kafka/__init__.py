"""Kafka I/O of every service, one concern per module."""
