"""`envbuild doctor`: the field's host checklist, and the nvidia-smi reader behind it."""
