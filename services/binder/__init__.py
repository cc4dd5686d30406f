"""The binder: applies placements to the cluster and reports each outcome (see docs/binder.md)."""
