"""The node agent: one per node, its devices, their links and usage, as events on Kafka."""
