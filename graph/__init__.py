"""Graph wiring; import-free on purpose: nodes import `graph.state`, the builder imports nodes."""
