"""Small helpers every stage shares: atomic file writes, the one HTTP retry policy, the record type,
TOML reading and where the bundled data lives. Nothing here imports another envbuild package.
"""
