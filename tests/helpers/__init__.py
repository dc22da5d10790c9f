"""What the tests share: paths, the docker CLI, registry processes and servers, workflow checks.

Plain functions and classes; the fixtures that wrap them live in tests/conftest.py. The loopback
package index and the recorded upstream answers are envbuild._testing's, which bench/ uses too.
"""
