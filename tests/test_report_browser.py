"""Acceptance: generated reports opened in a real headless Chromium.

Checks what a reader would notice: every plot decodes and shows something (not a
blank or broken image), the section titles are there, and the page fetches
nothing from the network.  Skipped when Chromium is absent, unless
``KERNTUNE_REQUIRE_BROWSER=1`` (CI sets it through ``make test``): then a missing
browser fails the test instead of hiding it.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kerntune.compare import run_compare
from kerntune.llm import LLMClient
from kerntune.report import write_report
from kerntune.run.search import RunOptions, run_search
from kerntune.store import Store
from kerntune.strategies import Budget
from scripted import ScriptedProvider, answer, synthetic_evaluator

CHROMIUM = os.environ.get("KERNTUNE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("KERNTUNE_CHROMEDRIVER", "/usr/bin/chromedriver")
REQUIRED = os.environ.get("KERNTUNE_REQUIRE_BROWSER") == "1"
# Without the background-networking flags Chromium waits on services it cannot reach on a closed network.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,1000", "--hide-scrollbars"]


def _unavailable() -> str | None:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (Path(path).exists() or shutil.which(path)):
            return f"{path} is not installed (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    return None


@pytest.fixture(scope="module")
def driver() -> Iterator[object]:
    why = _unavailable()
    if why:
        if REQUIRED:
            pytest.fail(f"KERNTUNE_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="kerntune-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in FLAGS + [f"--user-data-dir={profile}"]:
        opts.add_argument(flag)
    # An explicit driver path keeps Selenium Manager (which would go online) out of it.
    drv = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(60)
    try:
        yield drv
    finally:
        drv.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _llm_script(n: int, messages) -> str:  # noqa: ANN001 - list[Message]
    if n == 1:
        return answer({"BM": 64, "W": 4, "bs": [32, 32]}, {"BM": 32}, {"BM": 999})
    return answer({"W": 8, "BM": 64}, {"bs": [64, 64]}, {"BM": 128, "W": 2})


@pytest.fixture(scope="module")
def reports(tmp_path_factory, conv_path) -> dict[str, Path]:
    """A comparison on the recorded convolution space and an LLM run with a scripted model."""
    tmp = tmp_path_factory.mktemp("reports")
    store = Store(tmp / "k.db")
    result = run_compare(str(conv_path), ["random", "bayes", "genetic"], 60, 2, 0, store)
    client = LLMClient(ScriptedProvider(_llm_script), retries=0, backoff_base=0.0)
    llm = run_search(synthetic_evaluator(tmp), "llm", Budget(max_evals=40), seed=0,
                     run=RunOptions(llm=client, store=store,
                                    strategy_options={"initial": 4, "refine": 3, "max_rounds": 4}))
    out = {"compare": write_report(store, result.run_id, html=tmp / "compare.html").html,
           "llm": write_report(store, llm.run_id, html=tmp / "llm.html").html}
    store.close()
    return out  # type: ignore[return-value]


def _variance_and_colours(png: bytes) -> tuple[float, int]:
    from PIL import Image, ImageStat

    img = Image.open(io.BytesIO(png)).convert("RGB")
    stat = ImageStat.Stat(img)
    colours = img.getcolors(maxcolors=1 << 20) or []
    return sum(stat.var) / 3, len(colours)


def _check_page(driver, path: Path, titles: list[str], plots: list[str]) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By

    driver.get(path.resolve().as_uri())
    driver.execute_script("return document.readyState")
    h2 = [e.text for e in driver.find_elements(By.TAG_NAME, "h2")]
    for title in titles:
        assert title in h2, (title, h2)
    imgs = driver.find_elements(By.CSS_SELECTOR, "img[data-plot]")
    assert sorted(i.get_attribute("data-plot") for i in imgs) == sorted(plots)
    for img in imgs:
        key = img.get_attribute("data-plot")
        natural = driver.execute_script("return [arguments[0].complete, arguments[0].naturalWidth,"
                                        " arguments[0].naturalHeight]", img)
        assert natural[0] and natural[1] > 300 and natural[2] > 150, (key, natural)
        size = img.size
        assert size["width"] > 300 and size["height"] > 100, (key, size)
        caption = img.find_element(By.XPATH, "following-sibling::figcaption").text
        assert img.get_attribute("alt") and img.get_attribute("alt") in caption
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", img)
        shot = img.screenshot_as_png     # what the browser painted, scrolled into view and cropped to the image
        var, colours = _variance_and_colours(shot)
        assert var > 200 and colours > 30, (key, var, colours)    # a blank or broken image has neither
        (path.parent / f"{path.stem}-{key}.screenshot.png").write_bytes(shot)
    fetched = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name).filter(n => !n.startsWith('data:'))")
    assert fetched == []
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(str(path.parent / f"{path.stem}.screenshot.png"))


def test_comparison_report_renders_its_plots_in_chromium(driver, reports) -> None:
    _check_page(driver, reports["compare"],
                ["Summary", "Best so far", "Parameter effects", "Top configurations", "Failures by status"],
                ["best-vs-evaluations", "best-vs-seconds", "parameters", "failures"])
    from selenium.webdriver.common.by import By

    cells = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#summary td:first-child")]
    assert cells == ["random", "bayes", "genetic"]     # one row (and one curve) per strategy
    if os.environ.get("KERNTUNE_REPORT_SCREENSHOTS"):
        keep = Path(os.environ["KERNTUNE_REPORT_SCREENSHOTS"])
        keep.mkdir(parents=True, exist_ok=True)
        for png in reports["compare"].parent.glob("*.screenshot.png"):
            shutil.copy(png, keep / png.name)


def test_llm_report_renders_its_rounds_in_chromium(driver, reports) -> None:
    _check_page(driver, reports["llm"],
                ["Summary", "Best so far", "Parameter effects", "Top configurations", "LLM rounds"],
                ["best-vs-evaluations", "best-vs-seconds", "parameters", "llm-rounds", "failures"])
    from selenium.webdriver.common.by import By

    rounds = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#llm h4")]
    assert rounds[:2] == ["Round 1 · scripted:scripted-model", "Round 2 · scripted:scripted-model"]
    text = driver.find_element(By.ID, "llm").text
    assert "BM: 999 is not allowed" in text and "100+50 tokens" in text
    if os.environ.get("KERNTUNE_REPORT_SCREENSHOTS"):
        keep = Path(os.environ["KERNTUNE_REPORT_SCREENSHOTS"])
        keep.mkdir(parents=True, exist_ok=True)
        for png in reports["llm"].parent.glob("llm*.screenshot.png"):
            shutil.copy(png, keep / png.name)
