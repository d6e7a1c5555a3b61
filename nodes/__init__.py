"""One async node per file: the memory lifecycle of the agent."""
