"""Offline defaults run as supervised processes: embedded Redis/Postgres, the local model."""
