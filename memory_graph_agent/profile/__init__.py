"""The profile (hard memory): facts the user states about themself.

From rules and from the model, each grounded in what the user said; a newer value
replaces the old one, which stays in the history.
"""
