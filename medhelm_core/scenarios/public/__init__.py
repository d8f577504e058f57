"""The public-tier scenario library (shared plumbing of the public benchmark folders)."""
