"""A turn: admission, the working window, the prompt's budgets, the reply call.

Admission checks the input and the thread's owner (with an offline fallback while Redis
is down); the window mirrors each turn into Redis and cuts it by messages and tokens;
the budgets and rendering shape the prompt; the crash-loop breaker guards server runs.
"""
