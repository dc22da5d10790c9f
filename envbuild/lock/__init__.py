"""`envbuild lock`: resolve every target's Python closure with uv, pin base images by digest, check a
lock for drift.
"""
