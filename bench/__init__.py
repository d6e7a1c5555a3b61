"""Benchmarks of the memory graph (overhead, throughput, LoCoMo)."""
