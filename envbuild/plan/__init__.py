"""A spec target and its locked entry -> a Plan, the artifact that lock, render, build and attest
hand on: plan (Plan and build_plan), the rules a plan is made by (coherence, cudabase, cudalayer,
explicit), whether a lock may be used for it (lockmatch), and an EOL base image's fix, checked by
planning it (eolfix).

Below lock/ and render/: both need a Plan, and neither may import the other for it.
"""
