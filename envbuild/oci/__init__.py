"""The OCI/Docker vocabulary every stage shares: the image-reference grammar, envbuild's image labels,
and a client for the registry HTTP API (digests, tag lists, registry-side promotion).
"""
