"""The page in a real browser: Debian's Chromium, driven by Selenium through its chromedriver.

`make test` installs both first (`make chromium`: ops/chromium/install.sh). Nothing is fetched
at run time: Selenium is given the system driver and browser (`SE_OFFLINE`), Chromium runs
headless with a fresh profile and its background networking off. Without them the tests fail
when $CI is set and are skipped otherwise (as the other real parts are).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def unavailable(reason: str) -> None:
    """Fail under CI, skip elsewhere: CI must not pass without the real browser."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


@pytest.fixture
def browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """A headless Chromium at 1280x800 with a fresh profile."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        unavailable(f"selenium is not installed (the test extra): {exc}")
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        unavailable("Chromium is not installed: run `make chromium` (ops/chromium/install.sh)")
    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager never downloads anything
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    options.add_argument("--window-size=1280,800")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_script_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
