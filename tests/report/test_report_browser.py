"""The HTML report in a real headless browser (chromium driven by selenium): it loads with no console error and
no network request, the layer table sorts and filters, hovering a point names its layer, a table row and its
points highlight each other, and a screenshot of the whole page is saved. Skipped, with the reason, where no
browser can be started."""

from __future__ import annotations

import base64
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import onnx
import pytest

from onnxroof.api import analyze
from onnxroof.report.html import build_report, write_report
from tests.helpers import three_bound_model
from tests.report.html_inputs import figure_of

pytestmark = pytest.mark.browser

HOSTILE = '</script><script>alert("x")</script><!--'
CHROME_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1400,1000",
)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _binary(name: str, default: str) -> str | None:
    return shutil.which(name) or (default if os.access(default, os.X_OK) else None)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One headless chromium for the module, with its console and network logs kept."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service

    chromium = _binary("chromium", "/usr/bin/chromium")
    driver_path = _binary("chromedriver", "/usr/bin/chromedriver")
    if chromium is None or driver_path is None:
        pytest.skip("chromium/chromedriver not found")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    try:
        driver = webdriver.Chrome(options=options, service=Service(driver_path))
    except WebDriverException as exc:
        pytest.skip(f"chromium could not be started: {exc.msg or exc}")
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def page_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A report on a compute-, a memory- and an overhead-bound layer, with a roofline of all three and a second
    figure that has only the memory-bound one."""
    analysis = analyze(three_bound_model(), "v100-sxm2")
    figures = [figure_of(analysis), figure_of(analysis, kind="time", title="Time", layers=["add"])]
    path = tmp_path_factory.mktemp("report") / "report.html"
    write_report(path, build_report([analysis], figures))
    return path.as_uri()


def _open(driver: Any, url: str) -> None:
    """Load ``url`` with the logs emptied first, so that the browser's start-up is not blamed on the page."""
    driver.get("about:blank")
    driver.get_log("browser")
    driver.get_log("performance")
    driver.get(url)


def _visible_layers(driver: Any) -> list[str]:
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, "#layer-table tbody tr")
    return [row.get_attribute("data-layer") for row in rows]


def _requests(driver: Any) -> list[str]:
    """The URLs the page asked the network for, from the performance log's Network events."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def test_the_page_loads_with_no_console_error_and_no_network_request(browser: Any, page_url: str):
    _open(browser, page_url)
    assert browser.execute_script("return document.readyState") == "complete"
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []
    # The only document loaded is the page itself; it fetched nothing.
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    # The network log sees the page's own load (so it is recording), and nothing else.
    requests = _requests(browser)
    assert page_url in requests and [u for u in requests if u != page_url] == []
    # The script ran: one row per layer.
    assert _visible_layers(browser) == ["matmul", "add", "relu"]


def test_the_content_security_policy_blocks_a_fetch(browser: Any, page_url: str):
    _open(browser, page_url)
    outcome = browser.execute_async_script(
        "const done = arguments[0];"
        "fetch('http://127.0.0.1:9/leak').then(() => done('fetched'), (e) => done('blocked: ' + e.name));"
    )
    assert outcome.startswith("blocked")
    assert any("Content Security Policy" in e["message"] for e in browser.get_log("browser"))


def test_the_table_sorts_numbers_and_names_both_ways(browser: Any, page_url: str):
    from selenium.webdriver.common.by import By

    _open(browser, page_url)

    def header(label: str) -> Any:
        return next(th for th in browser.find_elements(By.CSS_SELECTOR, "#layer-table th") if th.text == label)

    header("layer").click()
    assert _visible_layers(browser) == ["add", "matmul", "relu"]
    assert header("layer").get_attribute("aria-sort") == "ascending"
    # Predicted times (three_bound_model's docstring): matmul 137 us > add 14 us > relu 4.2 us. A numeric column
    # sorts largest first on its first click, then smallest first.
    header("predicted").click()
    assert _visible_layers(browser) == ["matmul", "add", "relu"]
    assert header("predicted").get_attribute("aria-sort") == "descending"
    assert header("layer").get_attribute("aria-sort") is None
    header("predicted").click()
    assert _visible_layers(browser) == ["relu", "add", "matmul"]
    assert header("predicted").get_attribute("aria-sort") == "ascending"
    # FLOPs sort as numbers, not as text: 2.15 GFLOP > 1.05 MFLOP > 32 FLOP.
    header("FLOPs").click()
    assert _visible_layers(browser) == ["matmul", "add", "relu"]


def test_the_table_filters_by_op_type_bound_and_name(browser: Any, page_url: str):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _open(browser, page_url)
    op, bound = Select(browser.find_element(By.ID, "op-filter")), Select(browser.find_element(By.ID, "bound-filter"))
    assert [o.text for o in op.options] == ["all", "Add", "MatMul", "Relu"]
    assert [o.text for o in bound.options] == ["all", "compute", "memory", "overhead"]
    op.select_by_value("MatMul")
    assert _visible_layers(browser) == ["matmul"]
    op.select_by_value("")
    bound.select_by_value("overhead")
    assert _visible_layers(browser) == ["relu"]
    bound.select_by_value("memory")
    assert _visible_layers(browser) == ["add"]
    assert browser.find_element(By.ID, "row-count").text == "1 of 3 layers"
    bound.select_by_value("")
    browser.find_element(By.ID, "name-filter").send_keys("MAT")  # case-insensitive
    assert _visible_layers(browser) == ["matmul"]


def test_hovering_a_point_shows_its_layer_and_clicks_tie_rows_to_points(browser: Any, page_url: str):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    _open(browser, page_url)
    tooltip = browser.find_element(By.ID, "tooltip")
    assert not tooltip.is_displayed()
    matmul = browser.find_element(By.CSS_SELECTOR, '#figure-0 .target[data-layer="matmul"]')
    ActionChains(browser).move_to_element(matmul).perform()
    assert tooltip.is_displayed()
    assert tooltip.text.splitlines()[:2] == ["matmul", "MatMul, compute-bound"]
    # A row click highlights the layer's point in every figure that has it, and nothing else.
    row = browser.find_element(By.CSS_SELECTOR, '#layer-table tbody tr[data-layer="add"]')
    row.click()
    highlighted = browser.find_elements(By.CSS_SELECTOR, ".figure-svg .target.highlight")
    assert sorted(
        (t.get_attribute("data-layer"), t.find_element(By.XPATH, "ancestor::figure").get_attribute("id"))
        for t in highlighted
    ) == [("add", "figure-0"), ("add", "figure-1")]
    assert "highlight" in row.get_attribute("class")
    # A point click highlights its row (and moves the highlight off the other).
    relu = browser.find_element(By.CSS_SELECTOR, '#figure-0 .target[data-layer="relu"]')
    ActionChains(browser).move_to_element(relu).click().perform()
    rows = browser.find_elements(By.CSS_SELECTOR, "#layer-table tbody tr.highlight")
    assert [r.get_attribute("data-layer") for r in rows] == ["relu"]
    assert "highlight" in relu.get_attribute("class")


def test_a_hostile_layer_name_is_shown_as_text(browser: Any, tmp_path: Path):
    analysis = analyze(three_bound_model(relu_name=HOSTILE), "v100-sxm2")
    path = tmp_path / "hostile.html"
    write_report(path, build_report([analysis], [figure_of(analysis)]))
    _open(browser, path.as_uri())
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    assert _visible_layers(browser) == ["matmul", "add", HOSTILE]
    assert browser.execute_script("return document.scripts.length") == 2  # the data and the page's code


def test_a_screenshot_of_the_whole_page_is_saved(browser: Any, page_url: str, tmp_path: Path):
    _open(browser, page_url)
    height = browser.execute_script("return document.documentElement.scrollHeight")
    width = browser.execute_script("return document.documentElement.scrollWidth")
    shot = browser.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
        },
    )
    png = base64.b64decode(shot["data"])
    assert png.startswith(PNG_SIGNATURE)
    # The PNG's header chunk holds its size: the whole page, not just the window.
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == (width, height)
    (tmp_path / "report.png").write_bytes(png)
    folder = os.environ.get("ONNXROOF_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / "report.png").write_bytes(png)


def test_a_page_without_figures_works(browser: Any, tmp_path: Path):
    from selenium.webdriver.common.by import By

    path = tmp_path / "bare.html"
    write_report(path, build_report([analyze(three_bound_model(), "v100-sxm2")]))
    _open(browser, path.as_uri())
    browser.find_element(By.CSS_SELECTOR, '#layer-table tbody tr[data-layer="add"]').click()
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    rows = browser.find_elements(By.CSS_SELECTOR, "#layer-table tbody tr.highlight")
    assert [r.get_attribute("data-layer") for r in rows] == ["add"]


def test_the_report_commands_page_ties_real_figures_to_the_table(browser: Any, tmp_path: Path):
    """The page `onnxroof report` writes, with matplotlib's figures on two devices: it loads cleanly, hovering a
    real point names its layer, and a row click highlights that layer's points in the roofline and the time
    figure on both devices."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    from onnxroof.cli import main

    model = tmp_path / "three.onnx"
    onnx.save(three_bound_model(), str(model))
    out = tmp_path / "report.html"
    assert main(["report", str(model), "-d", "v100-sxm2,t4", "-o", str(out)]) == 0
    _open(browser, out.as_uri())
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    matmul = browser.find_element(By.CSS_SELECTOR, '#figure-0 .target[data-layer="matmul"]')
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", matmul)
    ActionChains(browser).move_to_element(matmul).perform()
    assert browser.find_element(By.ID, "tooltip").text.splitlines()[0].startswith("matmul")
    browser.find_element(By.CSS_SELECTOR, '#layer-table tbody tr[data-layer="add"]').click()
    highlighted = browser.find_elements(By.CSS_SELECTOR, ".figure-svg .target.highlight")
    figures = sorted(t.find_element(By.XPATH, "ancestor::figure").get_attribute("data-kind") for t in highlighted)
    assert figures == ["roofline", "roofline", "time", "time"]
    assert {t.get_attribute("data-layer") for t in highlighted} == {"add"}
