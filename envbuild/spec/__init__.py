"""What a team writes: envbuild.toml (model, validation, the starter file, the smoke labels). The
envbuild.lock file that `envbuild lock` writes from it is envbuild.lockfile.
"""
