"""Debian's chromium, headless, driven by Debian's chromedriver through
python3-selenium: the browser of the console's test and screenshots."""
import os
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def chrome(width=1400, height=1000):
    """A headless chromium with a profile of its own (removed by quit())."""
    options = Options()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="outbox-console-chromium.")
    for arg in ("--headless=new", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-extensions", "--disable-background-networking",
                "--disable-sync", "--disable-component-update", "--hide-scrollbars",
                "--window-size=%d,%d" % (width, height), "--user-data-dir=" + profile):
        options.add_argument(arg)
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # chromium refuses root with its sandbox
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    quit_ = driver.quit

    def quit_and_clean():
        try:
            quit_()
        finally:
            import shutil
            shutil.rmtree(profile, ignore_errors=True)

    driver.quit = quit_and_clean
    return driver
