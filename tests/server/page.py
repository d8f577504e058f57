"""Helpers of the page tests (test_server.py, test_clinician_page.py, test_jury_page.py): a page server
in a thread and the headless-Chromium steps they share. The `browser` and `shots` fixtures are in
conftest.py."""
from __future__ import annotations

from pathlib import Path

from medhelm_core.server.data import Reader


class Served:
    """`medhelm-server` on `output_path` (Reader's keyword arguments: suite=, release=, ...) in a thread,
    on a free loopback port."""

    def __init__(self, output_path: Path, **kw):
        from medhelm_core.server.app import serve_in_thread

        self.reader = Reader(output_path, **kw)
        self.server, _ = serve_in_thread(self.reader, "127.0.0.1", 0)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def open_page(driver, url: str, expect: str | None = None, timeout: float = 20.0) -> None:
    """Load `url` afresh (from about:blank) and wait for the page to say it is ready (`expect`, when given,
    or any state); a page that says error fails with its message."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get("about:blank")
    driver.get(url)

    def ready(d):
        v = d.execute_script("return document.body.dataset.ready || ''")
        return v if v and (expect is None or v in (expect, "error")) else False

    state = WebDriverWait(driver, timeout).until(ready)
    if state == "error":
        raise AssertionError("page error: " + driver.find_element("id", "error").text)


def js(driver, script: str, *args):
    return driver.execute_script(script, *args)


def browser_errors(driver) -> list[str]:
    """The browser console's SEVERE messages (a missing favicon aside); none where the driver keeps no log."""
    try:
        logs = driver.get_log("browser")
    except Exception:  # noqa: BLE001 - not every driver keeps logs
        return []
    return [e["message"] for e in logs if e.get("level") == "SEVERE" and "favicon" not in e["message"]]
