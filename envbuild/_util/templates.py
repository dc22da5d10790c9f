"""The one Jinja environment every rendered file comes from: Dockerfiles, conda specs, CI workflows.

StrictUndefined: a template that names a value it was not given fails loudly instead of writing an
empty string into a Dockerfile or a workflow. No autoescape: these are not HTML; every user value is
validated before it gets here, and each template quotes with its own filters.
"""

from __future__ import annotations

from collections.abc import Callable

from envbuild._util.resources import data_dir


def environment(filters: dict[str, Callable[..., str]]):
    """A jinja2.Environment over the bundled templates/ with the given filters."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(data_dir("templates")),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(filters)
    return env
