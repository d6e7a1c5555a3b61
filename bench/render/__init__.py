"""The renderers of `bench.render_docs`, one module per group of regions."""
