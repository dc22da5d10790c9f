"""Where a target's Python comes from on its OS: a rule of the stack, applied before anything is solved.

`render` used to apply it after resolving, so `resolve -f` showed Python 3.11 stacks for an
ubuntu22.04 target that render then refused (issue 34 item 8). It lives here, in resolve, and
spec_query.target_query applies it to the query both commands build: `resolve -f` and `render` give
the same answer, the same error and fix, at the same step. plan/plan.py reads the source it returns.
"""

from __future__ import annotations

from envbuild.errors import UsageError
from envbuild.matrix.model import Matrix
from envbuild.matrix.versions import format_minor


def python_source(
    matrix: Matrix, *, os_name: str, python: str | None, strategy: str, opt_in: str, where: str
) -> str:
    """system | deadsnakes | conda, or a UsageError naming the field and the ways out.

    A Python other than the OS's python3 comes from the deadsnakes PPA, a third-party archive, only
    when the spec opts in with python-source = "deadsnakes" (`opt_in`), and only on Ubuntu, the one
    OS with a standard source for other Pythons; conda brings its own Python whatever the OS."""
    if strategy == "conda":
        return "conda"
    os_row = matrix.oses[os_name]
    own = format_minor(os_row.python)
    if python is None or python == own:
        return "system"
    matching = [o.name for o in matrix.oses.values() if format_minor(o.python) == python]
    other_os = f', or os = "{matching[0]}" (whose python3 is {python})' if matching else ""
    if os_row.family != "ubuntu":
        raise UsageError(
            f"{where}: python {python} is not {os_row.name}'s python3 ({own}), and only Ubuntu has "
            "a standard source for other Pythons",
            fix=f'set python = "{own}"{other_os}, or an Ubuntu os with python-source = "deadsnakes", '
            'or strategy = "conda"',
        )
    if opt_in != "deadsnakes":
        raise UsageError(
            f'{where}: python = "{python}" is not {os_row.name}\'s python3 ({own}); it would come from the '
            "deadsnakes PPA, a third-party Launchpad archive, which envbuild adds only when asked",
            fix=f'add python-source = "deadsnakes" to [stack] (the image then adds ppa:deadsnakes/ppa and '
            f'installs python{python} from it), or set python = "{own}" (the OS\'s own){other_os}, '
            'or strategy = "conda"',
        )
    return "deadsnakes"
