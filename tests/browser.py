"""Headless Chromium for the browser tests (Debian's chromium + chromium-driver, which .ci/run installs),
driven by Selenium with no download of anything."""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

import pytest

CHROMIUM = os.environ.get("MEDHELM_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("MEDHELM_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,1000"]


@contextlib.contextmanager
def chromium(*extra_flags: str):
    """A headless Chromium WebDriver with a fresh profile (and `extra_flags`); skips (fails under CI)
    without the browser."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        msg = f"needs {CHROMIUM} and {CHROMEDRIVER} (apt-get install chromium chromium-driver; .ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    os.environ.setdefault("SE_OFFLINE", "true")   # Selenium Manager must not try to download anything
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="medhelm-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, *extra_flags, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
