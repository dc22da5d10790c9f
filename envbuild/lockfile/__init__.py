"""envbuild.lock, the file `envbuild lock` writes and render and build read: its data model and
byte-stable form (model), every field validated on read (read), its content digest, HMAC and key
(seal), and one reason a lock is out of date, as data (problem).

Its own package, just above spec/: a team writes envbuild.toml, envbuild writes envbuild.lock, and
both plan/ (which installs its pins) and lock/ (which writes it) sit above it.
"""
