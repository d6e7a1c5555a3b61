"""Benchmarks of the memory graph: `python -m bench <scenario>` runs one (`bench.harness`)."""
