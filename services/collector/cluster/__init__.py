"""The cluster watcher: one per cluster, the API server's objects as events on Kafka."""
