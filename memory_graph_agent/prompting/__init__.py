"""What goes to the model and what comes back: rendering, token budgets, guarded calls, checks."""
