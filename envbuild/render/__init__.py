"""Turn a Plan (envbuild.plan) into files: a Docker build context through the Jinja templates, its
wheelhouse and uv binary, an Apptainer definition.
"""
