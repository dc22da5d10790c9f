"""The compatibility matrix: its data model, the loader and schema, the cross-reference check, the
version vocabularies (drivers, CUDA, compute capabilities), arch lists, nvidia/cuda tags and their
lifecycle. Pure data and rules; the lowest stage.
"""
