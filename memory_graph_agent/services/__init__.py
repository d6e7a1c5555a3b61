"""Services: open, hand out and close the memory stores and models.

Redis, Postgres and the embeddings, and the chat model and the embeddings built from a
spec string.
"""
