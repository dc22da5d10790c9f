"""Pick the stacks a driver runs and explain every rejection: flag parsing into a Query, the solver,
and the text and JSON views of its answer. Pure: reads the matrix, no I/O beyond it.
"""
