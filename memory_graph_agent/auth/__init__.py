"""Who is calling the LangGraph server, and what they may touch.

`credentials` turns a request's API key or JWT into an `Identity`; `policy` holds the
pure rules (a run's user is the caller, owners, admin-only operations); `handlers` wires
both into the `langgraph_sdk.Auth` object that ``langgraph.json`` registers.
"""
