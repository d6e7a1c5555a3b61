"""The memory domain of the agent: ranking, retrieval, consolidation, facts, budgets.

No LangGraph wiring lives here (see ``graph/`` and ``nodes/``); storage adapters are in
`memory_graph_agent.storage`, the embedded servers and the local model in
`memory_graph_agent.local`. `memory_graph_agent.testing` is the fake chat model for your
tests.
"""
