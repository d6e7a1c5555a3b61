"""Memory providers: what a turn reads from long-term memory, and what the tools write.

`MemoryProvider` is the small interface (`base.py`); ``"tiered"`` (our Redis profile and
pgvector hybrid recall, the default) and ``"flat"`` (the hottest memories, no search) are
in `tiered.py`, chosen by name with `provider_named`.
"""
