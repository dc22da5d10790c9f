"""The docs site's generated pages: the reference (commands and flags from the argument parser,
envbuild.toml's keys from the spec's own key table, exit codes, environment variables, the record and
report formats) and the compatibility explorer (the matrix, answered by the resolver `envbuild resolve`
uses).

Not part of the tool: envbuild never imports this package, and the wheel does not carry it. MkDocs
runs it through docsgen/hooks.py; the tests import it to check the pages against the code.
"""
