"""The ``memory-agent`` command line."""
