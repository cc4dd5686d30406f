"""Placement quality and speed benchmark: `python -m bench.run [--profile short|full]`."""
