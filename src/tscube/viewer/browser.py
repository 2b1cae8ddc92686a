"""Headless Chromium for the viewer's browser tests, its benchmark and the screenshots of
docs/view.md: Debian's ``chromium`` and ``chromium-driver`` driven by Selenium (the
``test`` extra installs Selenium; ``.ci/run`` installs Chromium where it is missing).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium() -> tuple[str | None, str | None]:
    """``(browser, driver)`` paths (None where missing); ``TSCUBE_CHROMIUM`` and
    ``TSCUBE_CHROMEDRIVER`` override the search of PATH."""
    browser = os.environ.get("TSCUBE_CHROMIUM") or next(
        (path for path in map(shutil.which, CHROMIUM_NAMES) if path), None)
    driver = os.environ.get("TSCUBE_CHROMEDRIVER") or shutil.which("chromedriver")
    return browser, driver


@contextlib.contextmanager
def chromium(width: int = 1400, height: int = 900):
    """A headless Chromium WebDriver (Selenium), closed on exit, with its own empty profile.

    The flags keep Chromium off the network (no background services, no component
    updates): the viewer is on the loopback interface and needs nothing else.
    """
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = find_chromium()
    if browser is None or driver_path is None:
        raise RuntimeError("headless browser tests need Chromium and ChromeDriver (Debian: apt-get install chromium "
                           "chromium-driver)")
    profile = tempfile.mkdtemp(prefix="tscube-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-extensions", f"--window-size={width},{height}",
                 f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(driver, script: str, timeout: float = 30.0, poll: float = 0.02):
    """Run ``script`` in the page until it returns something true; its value (TimeoutError after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(script)
        if value:
            return value
        if time.monotonic() > deadline:
            page = driver.execute_script("return document.body ? document.body.innerText : ''")[:600]
            raise TimeoutError(f"the page did not get there in {timeout} s: {script}\npage text: {page}\n"
                               f"console: {console_messages(driver)}")
        time.sleep(poll)


def console_messages(driver) -> list[str]:
    """The page's console messages since the last call."""
    return [entry["message"] for entry in driver.get_log("browser")]
