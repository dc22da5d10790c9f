"""The smoke programs that run inside built images (and on a host through `envbuild smoke`).

`<framework>_smoke.py` goes into an image as /opt/envbuild/smoke.py and `smoke_common.py` beside it as
/opt/envbuild/smoke_common.py; the program imports it by name. These files use only the standard
library and their framework, keep to Python 3.8 (ruff.toml here lints them as 3.8 code) and never
import envbuild.
"""
