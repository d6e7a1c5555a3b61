"""Storage tiers behind small classes: Redis window/pending/profile, pgvector memories."""
