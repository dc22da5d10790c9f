"""Turn a spec target (and its lock) into a build plan, then into a Docker build context through the
Jinja templates.
"""
