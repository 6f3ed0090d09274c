#!/usr/bin/python3
"""Screenshots of a running console, in headless chromium.

  screenshots.py URL TOKEN_FILE OUTDIR [--message ID] [--samples N] [--follow]

signs in with the ops token in TOKEN_FILE (never on the command line), lets
the overview take N samples (3: its chart has lines), then saves
OUTDIR/console-<page>.png for the overview, failures (with the largest
group's rows), message (ID, or the largest group's example), dead letters
and audit pages. With --follow it keeps one page open instead, sampling
(it prints "screenshots: following URL" once signed in), and saves
OUTDIR/console-<name>.png of the overview, freshly sampled, for each NAME
line read from stdin (scripts/demo.sh: one per phase), until a line "quit"
or the end of stdin.
"""
import argparse
import base64
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from selenium.webdriver.common.by import By  # noqa: E402

import headless  # noqa: E402

SAMPLE_S = 5


def wait(driver, predicate, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except Exception:  # noqa: BLE001 - mid-render
            pass
        time.sleep(0.2)
    return False


def shoot(driver, outdir, name):
    """The whole page, not only the window (chromium's own full-page
    capture), at the window's width and at most 4,000 pixels tall."""
    time.sleep(0.3)
    metrics = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
    content = metrics.get("cssContentSize") or metrics["contentSize"]
    width = driver.execute_script("return document.documentElement.clientWidth")
    height = min(int(content["height"]) + 1, 4000)
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}})
    path = os.path.join(outdir, "console-%s.png" % name)
    with open(path, "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    print("screenshots: %s" % path, flush=True)


def sign_in(driver, url, token):
    driver.get(url)
    wait(driver, lambda: driver.find_element(By.ID, "login").is_displayed())
    if token:
        driver.find_element(By.ID, "token").send_keys(token)
        driver.find_element(By.ID, "login-submit").click()
    else:
        driver.find_element(By.ID, "login-open").click()
    if not wait(driver, lambda: driver.find_element(By.ID, "page-overview").is_displayed()):
        sys.exit("screenshots: the console did not show the overview")


def go(driver, page):
    driver.find_element(By.CSS_SELECTOR, '#nav a[data-page="%s"]' % page).click()


def all_pages(driver, outdir, message, samples):
    time.sleep(SAMPLE_S * max(samples - 1, 0) + 1)
    shoot(driver, outdir, "overview")

    go(driver, "failures")
    wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, "#failures-table tbody tr")
         or driver.find_element(By.ID, "failures-empty").is_displayed())
    first = driver.find_elements(By.CSS_SELECTOR, "#failures-table tbody tr")
    example = ""
    if first:
        example = first[0].find_element(By.CSS_SELECTOR, "td:nth-child(9) a").text
        first[0].find_element(By.CSS_SELECTOR, "button.rows").click()
        wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, "#group-rows-table tbody tr"))
    shoot(driver, outdir, "failures")

    if first:  # the confirmation an acknowledgement asks for (cancelled)
        first[0].find_element(By.CSS_SELECTOR, "button.ack").click()
        if wait(driver, lambda: driver.find_element(By.ID, "confirm").is_displayed()):
            shoot(driver, outdir, "confirm")
            driver.find_element(By.ID, "confirm-cancel").click()

    message = message or example
    if message:
        driver.find_element(By.CSS_SELECTOR, '#nav a[data-page="message"]').click()
        box = driver.find_element(By.ID, "search-id")
        box.clear()
        box.send_keys(message)
        driver.find_element(By.CSS_SELECTOR, "#search-form button").click()
        wait(driver, lambda: driver.find_element(By.ID, "message-view").is_displayed()
             and driver.find_elements(By.CSS_SELECTOR, "#payload tr"))
        shoot(driver, outdir, "message")

    go(driver, "dead-letters")
    driver.find_element(By.CSS_SELECTOR, "#dlq-form button[type=submit]").click()
    wait(driver, lambda: driver.find_element(By.ID, "dlq-total").text)
    rows = driver.find_elements(By.CSS_SELECTOR, "#dlq-table tbody tr button")
    if rows:
        rows[0].click()
        wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, "#dlq-fields tr"))
    shoot(driver, outdir, "dead-letters")

    go(driver, "audit")
    wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, "#audit-table tbody tr"))
    shoot(driver, outdir, "audit")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("url")
    p.add_argument("token_file", help="the ops token ('' for an open API: an empty path)")
    p.add_argument("outdir")
    p.add_argument("--message", default="", help="message id or business key to show")
    p.add_argument("--samples", type=int, default=3)
    p.add_argument("--follow", action="store_true")
    args = p.parse_args()
    token = ""
    if args.token_file:
        with open(args.token_file) as f:
            token = f.read().strip()
    os.makedirs(args.outdir, exist_ok=True)
    # SIGTERM ends it through the finally below, so the browser goes with it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    driver = headless.chrome()
    try:
        sign_in(driver, args.url, token)
        if not args.follow:
            all_pages(driver, args.outdir, args.message, args.samples)
            return
        print("screenshots: following %s" % args.url, flush=True)
        for line in sys.stdin:
            name = line.strip()
            if name == "quit":  # the writer's children may hold stdin open: no EOF
                break
            if name:  # a fresh sample first: the last may be 5 s old
                go(driver, "overview")
                before = driver.find_element(By.ID, "overview-updated").text
                driver.find_element(By.ID, "overview-refresh").click()
                wait(driver, lambda: driver.find_element(By.ID, "overview-updated").text != before,
                     5)
                shoot(driver, args.outdir, name)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
