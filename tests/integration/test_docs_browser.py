"""The compatibility explorer in a real browser: Debian's chromium, headless, driven by selenium through
Debian's chromedriver, opens the built site from a plain HTTP server on 127.0.0.1, types "RTX 4090"
into the filter, and reads the rows left on screen. The R550 row must say what `envbuild resolve --gpu
"RTX 4090" --driver 550 --json` says. A screenshot is kept for CI (build/ci-artifacts/).

Without chromium or chromedriver the test fails in CI (ENVBUILD_REQUIRE_DOCKER=1) and skips elsewhere.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from envbuild.cli.app import main
from envbuild.matrix.model import Matrix
from tests.helpers import artifacts
from tests.helpers.capability import missing
from tests.helpers.paths import REPO

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# headless, and nothing that reaches the network on its own (updates, sync, QUIC probes)
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1366,1000",
)
SCREENSHOT = REPO / "build" / "ci-artifacts" / "explorer-rtx-4090.png"
GPU, BRANCH = "RTX 4090", 550

# the rows of a table the reader can see (checkVisibility: neither hidden by the filter nor inside the
# closed <details>, whose content keeps its boxes but is not rendered), with what each cell shows and
# the attributes it carries
VISIBLE_ROWS = """
return Array.from(document.querySelectorAll('table[data-explorer-table="' + arguments[0] + '"] tbody tr'))
  .filter(row => row.checkVisibility({visibilityProperty: true}))
  .map(row => ({
    gpu: row.dataset.gpu || null,
    branches: (row.dataset.branches || '').split(' ').filter(Boolean),
    cells: Array.from(row.cells).map(cell => ({
      framework: cell.dataset.framework || null,
      version: cell.dataset.version || null,
      variant: cell.dataset.variant || null,
      cuda: cell.dataset.cuda || null,
      text: cell.innerText,
    })),
  }));
"""


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def served(built_site: Path) -> Iterator[str]:
    """The built site from Python's http.server on 127.0.0.1, as a reader's browser would get it."""
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(built_site))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One headless chromium for the module, with a fresh profile; it keeps the console's errors."""
    for tool, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(tool, os.X_OK):
            missing(f"{tool} is not installed (Debian: apt-get install {package})")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing("selenium is not installed (pip install -e '.[test]')")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "SEVERE"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_typing_rtx_4090_leaves_its_rows_and_the_r550_row_is_what_resolve_says(
    browser: Any, served: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{served}/explorer/")
    assert browser.execute_script(VISIBLE_ROWS, "grid") == [], "the GPU x branch table shows before a filter"
    assert browser.get_log("browser") == [], "the page logged errors"
    browser.find_element(By.ID, "explorer-filter").send_keys(GPU)
    WebDriverWait(browser, 5).until(lambda d: d.execute_script(VISIBLE_ROWS, "grid"))

    rows = browser.execute_script(VISIBLE_ROWS, "grid")
    assert {row["gpu"] for row in rows} == {GPU}, f"other GPUs left: {sorted({r['gpu'] for r in rows})}"
    assert [row["gpu"] for row in browser.execute_script(VISIBLE_ROWS, "gpus")] == [GPU]
    r550 = [row for row in rows if str(BRANCH) in row["branches"]]
    assert len(r550) == 1, f"{len(r550)} rows for R{BRANCH}: {rows}"

    code = main(["resolve", "--gpu", GPU, "--driver", str(BRANCH), "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0 and document["stacks"], document["problems"]
    shown = {cell["framework"]: cell for cell in r550[0]["cells"] if cell["framework"]}
    assert sorted(shown) == sorted(stack["framework"] for stack in document["stacks"])
    for stack in document["stacks"]:
        cell = shown[stack["framework"]]
        expected = (stack["framework_version"], stack["variant"], stack["cuda"])
        assert (cell["version"], cell["variant"], cell["cuda"]) == expected, stack["framework"]
        # and what the reader sees says the same
        assert " ".join(cell["text"].split()) == f"{expected[0]} {expected[1]} · CUDA {expected[2]}"

    # everything the page fetched, as the browser records it: the page, its styles, scripts, images
    loaded = browser.execute_script(
        "return ['navigation', 'resource']"
        ".flatMap(type => performance.getEntriesByType(type)).map(entry => entry.name)"
    )
    assert len(loaded) > 3 and all(url.startswith(f"{served}/") for url in loaded), loaded

    # the GPU x branch table at the top of the screen, under the filter box; the theme's transitions
    # (its header swaps titles on scroll) are switched off first, so the picture never catches one halfway
    browser.execute_script(
        "const still = document.createElement('style');"
        "still.textContent = '*, *::before, *::after "
        "{ transition: none !important; animation: none !important }';"
        "document.head.appendChild(still);"
        "arguments[0].scrollIntoView({block: 'start'});",
        browser.find_element(By.CSS_SELECTOR, "details.explorer-grid"),
    )
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(SCREENSHOT)), "chromium took no screenshot"
    artifacts.keep(
        SCREENSHOT, f"the compatibility explorer filtered to {GPU} (tests/integration/{Path(__file__).name})"
    )


def test_a_driver_leaves_its_branch_and_the_gpus_it_drives(
    browser: Any, served: str, matrix: Matrix, capsys: pytest.CaptureFixture[str]
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{served}/explorer/")
    browser.find_element(By.ID, "explorer-filter").send_keys(f"R{BRANCH}")
    WebDriverWait(browser, 5).until(lambda d: d.execute_script(VISIBLE_ROWS, "grid"))

    assert [row["branches"] for row in browser.execute_script(VISIBLE_ROWS, "branches")] == [[str(BRANCH)]]
    grid = browser.execute_script(VISIBLE_ROWS, "grid")
    assert all(str(BRANCH) in row["branches"] for row in grid)
    assert sorted(row["gpu"] for row in grid) == sorted(g.name for g in matrix.gpus if not g.integrated)
    gpus = browser.execute_script(VISIBLE_ROWS, "gpus")
    assert gpus and all(str(BRANCH) in row["branches"] for row in gpus)
    # a GPU R550 cannot drive, as resolve says, is not among them
    main(["resolve", "--gpu", "RTX 5090", "--driver", str(BRANCH), "--json"])
    assert json.loads(capsys.readouterr().out)["problems"], "RTX 5090 no longer needs a newer branch"
    assert "RTX 5090" not in {row["gpu"] for row in gpus}
    assert browser.get_log("browser") == []


def test_the_filter_script_leaves_other_pages_alone(browser: Any, served: str) -> None:
    """explorer.js is loaded on every page (mkdocs.yml extra_javascript): where there is no filter box
    it returns before touching anything, so it raises nothing there."""
    browser.get(f"{served}/")
    assert "explorer.js" in browser.page_source
    assert browser.get_log("browser") == []
