"""Graph wiring for the memory agent (state, context, prompts, routing, builder).

Kept import-free on purpose: nodes import `graph.state`, and the builder imports the
nodes, so importing the builder here would create a cycle.
"""
