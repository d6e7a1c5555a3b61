"""Command-line interface: chat, demo, memory inspection and embedded services."""
