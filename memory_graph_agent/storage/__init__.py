"""Storage adapters: the only code that knows Redis keys or SQL."""
