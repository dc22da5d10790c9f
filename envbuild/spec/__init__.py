"""What a team commits: envbuild.toml (model, validation, the starter file) and the envbuild.lock file
format (its data model, reading, writing and pinned requirement lines).
"""
