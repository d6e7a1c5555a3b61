"""See one user's memory: facts, reflections, summaries and turns drawn as a graph.

`model` turns what storage returned into nodes and edges (pure, no server); `reading`
reads it from the stores; `render` draws it to a PNG with networkx and matplotlib (the
``draw`` extra). ``memory-agent memory graph`` and the walkthrough notebook use them.
"""
