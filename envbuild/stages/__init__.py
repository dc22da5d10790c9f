"""The stages one target's image goes through, in order: render, build, audit, verify, promote,
attest. Each is a module with one `run(build, record, ...)`: `build` (a TargetRun) says what is being
built and how, `record` (a RecordFile) holds the target's BuildRecord, which each stage adds its outcome
to and writes before it returns, so a failure or an interrupt leaves a record of how far the target got.

pipeline.py runs them in order and owns what spans them: the per-target lock, the record's final
status, and taking tags back when a stage after verify fails.
"""
