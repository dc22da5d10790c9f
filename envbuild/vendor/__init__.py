"""`envbuild vendor`: everything a locked build fetches, into one bundle directory that an air-gapped
site builds from (`build --bundle`), and the check that a bundle covers a lock (check.bundle_problems).

It sits just above envbuild.lock and below render: it reads only the lock (no resolution), and render
takes its uv wheel fetch (uvwheel) for an image of another machine than the host's.
"""
