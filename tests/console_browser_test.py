#!/usr/bin/python3
"""The operator's console as a person uses it, in headless chromium.

  console_browser_test.py URL TOKEN XSS_KEY SHARDS PAY_QUEUE

URL is a running console gateway (tests/e2e_console_test.sh starts it over
the real services), TOKEN an ops token named "alice", XSS_KEY the business
key of a rejected payment whose description holds markup, SHARDS the
number of shards the console was given (the first is XSS_KEY's, the
second has another number of FAILED rows). The payments: a group of GBP
rejects (XSS_KEY among them) and a group of rejects over accounting's
limit; PAY_QUEUE (the run's name of it) holds one dead letter, a body
that is not a payment and holds markup. Prints one "ok:" line per step; exits 1 at the first that fails.
"""
import json
import sys
import time
import urllib.error
import urllib.request
import os

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "console"))
from selenium.webdriver.common.by import By  # noqa: E402

import headless  # noqa: E402

REASON = "GBP is not kept: known, ticket 42"
XSS_TEXT = '<script>window.__xss=1</script>"><img src=x onerror="window.__xss=2">'
SEARCH_PROBE = '"><img src=x onerror="window.__xss=3">'
FAILED_RED = (180, 35, 24)  # #b42318, the FAILED rows line

url, token, xss_key, shards, pay_queue = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), \
    sys.argv[5]
DEAD_LETTER = "not a payment: <img src=x onerror=\"window.__xss=4\">"
scale = int(os.environ.get("OUTBOX_TEST_TIME_SCALE", "1"))
driver = None


def fail(message):
    print("FAIL: %s" % message, file=sys.stderr)
    if driver is not None:
        # What the page says to the operator at that moment.
        for element_id in ("banner", "notice", "confirm-text"):
            try:
                element = driver.find_element(By.ID, element_id)
                if element.is_displayed():
                    print("page %s: %s" % (element_id, element.text), file=sys.stderr)
            except Exception:  # noqa: BLE001 - a page that is not the console's
                pass
        for entry in driver.get_log("browser"):
            print("browser: %s" % entry, file=sys.stderr)
    sys.exit(1)


def ok(message):
    print("ok: %s" % message, flush=True)


def wait(what, predicate, seconds=20):
    deadline = time.monotonic() + seconds * scale
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - the page may be mid-render
            last = e
        time.sleep(0.2)
    fail("%s (last: %r)" % (what, last))


def api(method, body, shard=""):
    """The same ops call through the gateway, as curl would make it."""
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + token}
    if shard:
        headers["Outbox-Shard"] = shard
    request = urllib.request.Request(
        url + "ops.v1.OutboxOps/" + method, data=json.dumps(body).encode(), method="POST",
        headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def text(element_id):
    return driver.find_element(By.ID, element_id).text


def visible(element_id):
    return driver.find_element(By.ID, element_id).is_displayed()


def go(page):
    driver.find_element(By.CSS_SELECTOR, '#nav a[data-page="%s"]' % page).click()


def no_injection(where):
    injected = driver.execute_script(
        "return [window.__xss, document.querySelectorAll('img[src=\"x\"]').length,"
        " document.scripts.length]")
    if injected[0] is not None or injected[1] != 0 or injected[2] != 2:
        fail("%s: markup from the data ran or became elements: __xss=%r, img=%r, scripts=%r"
             % (where, *injected))


def group_of(groups, word):
    found = [g for g in groups if word in g.get("exampleError", "")]
    if not found:
        fail("no failure group whose error says %r: %r" % (word, groups))
    return found[0]


def main():
    global driver
    driver = headless.chrome()
    driver.get(url)

    # A wrong token: refused in the page, with a clear message.
    wait("the token form", lambda: visible("login"))
    driver.find_element(By.ID, "token").send_keys("not-the-token")
    driver.find_element(By.ID, "login-submit").click()
    banner = wait("the refusal of a wrong token",
                  lambda: visible("banner") and visible("login") and text("banner"))
    if "Token refused" not in banner or "PERMISSION_DENIED" not in banner:
        fail("a wrong token's message: %r" % banner)
    ok("a wrong token is refused in the page: %s" % banner)
    if driver.execute_script("return document.cookie") != "":
        fail("the page set a cookie")

    # The right one: the overview, live.
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.ID, "login-submit").click()
    wait("the overview", lambda: visible("page-overview") and not visible("login"))
    failed = api("GetStats", {}).get("failed", "0")
    wait("the FAILED card showing %s" % failed, lambda: any(
        c.text.split("\n") == ["FAILED", str(failed)]
        for c in driver.find_elements(By.CSS_SELECTOR, "#cards .card")))
    ok("the overview shows %s FAILED rows" % failed)
    if driver.execute_script("return sessionStorage.length") != 1:
        fail("the token is not (only) in sessionStorage")

    def red_pixels():
        return driver.execute_script("""
            const c = document.getElementById('chart');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 0; i < d.length; i += 4)
              if (Math.abs(d[i] - arguments[0]) < 8 && Math.abs(d[i + 1] - arguments[1]) < 8 &&
                  Math.abs(d[i + 2] - arguments[2]) < 8 && d[i + 3] > 200) n++;
            return n;""", *FAILED_RED)
    # Two samples (5 s apart) draw the FAILED line across the chart; the
    # legend's swatch alone is a few hundred pixels.
    pixels = wait("the chart drawing the FAILED line", lambda: red_pixels() > 1000 and red_pixels(),
                  30)
    ok("the overview chart draws (%d pixels of the FAILED line)" % pixels)
    charted = driver.execute_script("return !!window.Chart")
    ok("chart by %s" % ("Chart.js (libjs-chart.js)" if charted else "the page's own canvas code"))

    # Failures: the rejects as groups; acknowledge after the dry run's count.
    groups = api("ListFailureGroups", {})["groups"]
    gbp = group_of(groups, "GBP")
    limit = group_of(groups, "limit")
    go("failures")
    row = '#failures-table tr[data-group="%s"]' % gbp["group"]
    wait("the GBP group in the page", lambda: driver.find_element(By.CSS_SELECTOR, row))
    cells = driver.find_element(By.CSS_SELECTOR, row).text
    if "rejected" not in cells or gbp["count"] not in cells:
        fail("the GBP group's row: %r" % cells)
    ok("the rejected payments appear as failure groups (%d groups; GBP: %s rows)"
       % (len(groups), gbp["count"]))

    driver.find_element(By.CSS_SELECTOR, row + " button.ack").click()
    prompt = wait("the acknowledge confirmation", lambda: visible("confirm") and text("confirm-text"))
    if "Acknowledge %s FAILED row(s)" % gbp["count"] not in prompt:
        fail("the confirmation does not show the dry run's count: %r" % prompt)
    still = group_of(api("ListFailureGroups", {})["groups"], "GBP")
    if still["acknowledged"] != "0":
        fail("the dry run acknowledged rows: %r" % still)
    ok("the dry run's count is asked to confirm, nothing changed yet: %s" % prompt.split("\n")[0])
    driver.find_element(By.ID, "confirm-reason").send_keys(REASON)
    driver.find_element(By.ID, "confirm-ok").click()
    notice = wait("the acknowledgement's notice", lambda: visible("notice") and text("notice"))
    if "Acknowledged %s row(s)" % gbp["count"] not in notice:
        fail("notice: %r" % notice)
    wait("the table showing the acknowledged rows", lambda: driver.find_element(
        By.CSS_SELECTOR, row + " td:nth-child(6)").text == gbp["count"])
    ok("acknowledged after confirming: %s" % notice)

    # A re-drive that the operator cancels changes nothing.
    limit_row = '#failures-table tr[data-group="%s"]' % limit["group"]
    driver.find_element(By.CSS_SELECTOR, limit_row + " button.redrive").click()
    prompt = wait("the re-drive confirmation", lambda: visible("confirm") and text("confirm-text"))
    if "Send %s FAILED row(s)" % limit["count"] not in prompt:
        fail("the re-drive confirmation: %r" % prompt)
    driver.find_element(By.ID, "confirm-cancel").click()
    wait("the cancel's notice", lambda: text("notice") == "Nothing changed.")
    if group_of(api("ListFailureGroups", {})["groups"], "limit")["count"] != limit["count"]:
        fail("a cancelled re-drive changed rows")
    ok("a cancelled re-drive changes nothing")

    # The group's rows.
    driver.find_element(By.CSS_SELECTOR, row + " button.rows").click()
    wait("the group's rows", lambda: len(driver.find_elements(
        By.CSS_SELECTOR, "#group-rows-table tbody tr")) == int(gbp["count"]))
    ok("the group's %s rows are listed" % gbp["count"])

    # The audit trail names the token's holder.
    go("audit")
    wait("the audit trail", lambda: driver.find_elements(By.CSS_SELECTOR, "#audit-table tbody tr"))
    records = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#audit-table tbody tr")]
    mine = [r for r in records if " alice acknowledge_group %s " % gbp["group"] in r
            and "dry run" not in r]
    if not mine:
        fail("no audit record of alice's acknowledgement: %r" % records)
    if not mine[0].endswith(" ok " + REASON):
        fail("the acknowledgement's record does not end with its reason: %r" % mine[0])
    ok("the audit trail shows alice and why: %s" % mine[0])

    # One message: its history as a timeline, its payload as text.
    go("message")
    wait("the message page", lambda: visible("search-id") and
         driver.find_element(By.ID, "search-id").is_enabled())
    search = driver.find_element(By.ID, "search-id")
    search.clear()
    search.send_keys(xss_key)
    driver.find_element(By.CSS_SELECTOR, "#search-form button").click()
    wait("the message's timeline", lambda: visible("message-view") and len(
        driver.find_elements(By.CSS_SELECTOR, "#timeline li")) >= 3)
    events = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#timeline .event")]
    if events[0] != "created" or "rejected" not in events or "failure_acknowledged" not in events:
        fail("timeline: %r" % events)
    ok("the message's history is a timeline: %s" % " -> ".join(events))
    row_text = text("message-row")
    if "trace id" not in row_text or "FAILED" not in row_text:
        fail("the message's row: %r" % row_text)
    wait("the payload decoded into fields", lambda: "description" in text("payload"))
    shown = driver.execute_script("""
        for (const td of document.querySelectorAll('#payload td'))
          if (td.textContent === arguments[0]) return true;
        return false;""", XSS_TEXT)
    if not shown:
        fail("the description is not shown as its own text: %r" % text("payload"))
    no_injection("the payload")
    ok("markup in a payload is shown as text and does not run (%s)" % text("payload-type"))

    # Re-drive this one message, after confirming: accounting rejects it again.
    driver.find_element(By.CSS_SELECTOR, "#message-actions button.redrive").click()
    prompt = wait("the re-drive confirmation", lambda: visible("confirm") and text("confirm-text"))
    if "Send message" not in prompt or xss_key not in prompt:
        fail("the message's re-drive confirmation: %r" % prompt)
    driver.find_element(By.ID, "confirm-ok").click()
    wait("the re-drive's notice", lambda: text("notice").startswith("Re-drove message"))

    def redriven_and_rejected():
        driver.find_element(By.CSS_SELECTOR, "#search-form button").click()
        time.sleep(0.5)
        ev = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#timeline .event")]
        return "redriven" in ev and ev[-1] == "rejected" and ev.index("redriven") < len(ev) - 1 \
            and ev
    events = wait("the re-drive and the new reject in the timeline", redriven_and_rejected)
    no_injection("the message after its re-drive")
    ok("one message re-driven after confirming: %s" % " -> ".join(events))

    # A search whose error message carries markup.
    search = driver.find_element(By.ID, "search-id")
    search.clear()
    search.send_keys(SEARCH_PROBE)
    driver.find_element(By.CSS_SELECTOR, "#search-form button").click()
    banner = wait("the not-found message", lambda: visible("banner") and text("banner"))
    if "NOT_FOUND" not in banner or "<img src=x" not in banner:
        fail("not-found message: %r" % banner)
    no_injection("an error message")
    ok("markup in an error message is shown as text: %s" % banner)

    # Dead letters: a queue that is not one is said so, under the call that
    # failed; a listing that works clears it; listed, inspected, re-driven
    # after confirming the count.
    go("dead-letters")
    queue = driver.find_element(By.ID, "dlq-queue")
    queue.clear()
    queue.send_keys("NO_SUCH_QUEUE")
    driver.find_element(By.ID, "dlq-redrive").click()
    banner = wait("the error of a queue that is none", lambda: visible("banner") and text("banner"))
    if not banner.startswith("ListDeadLetters: INVALID_ARGUMENT"):
        fail("the count before a re-drive failed, named so: %r" % banner)
    queue.clear()
    queue.send_keys(pay_queue)
    driver.find_element(By.CSS_SELECTOR, "#dlq-form button[type=submit]").click()
    wait("the dead letter", lambda: text("dlq-total").startswith(
        "1 message(s) parked in %s.DLQ" % pay_queue))
    if visible("banner"):
        fail("an old error stays over a listing that worked: %r" % text("banner"))
    ok("dead letters: a wrong queue's error (%s) goes with the next listing" % banner)
    driver.find_element(By.CSS_SELECTOR, "#dlq-table tbody tr button").click()
    wait("the dead letter's body", lambda: DEAD_LETTER in text("dlq-fields"))
    no_injection("a dead letter")
    ok("dead letters: %s; its body shown as text" % text("dlq-total"))
    driver.find_element(By.ID, "dlq-redrive").click()
    prompt = wait("the dead letters' confirmation", lambda: visible("confirm") and text("confirm-text"))
    if "Move the 1 message(s) parked in %s.DLQ back" % pay_queue not in prompt:
        fail("the dead letters' confirmation: %r" % prompt)
    driver.find_element(By.ID, "confirm-ok").click()
    notice = wait("the re-drive's notice", lambda: visible("notice") and text("notice"))
    if "Moved 1 message(s) back to %s" % pay_queue not in notice:
        fail("dead-letter re-drive: %r" % notice)
    ok("dead letters re-driven after confirming: %s" % notice)

    # Every shard in one console.
    options = [o.get_attribute("value") for o in
               driver.find_elements(By.CSS_SELECTOR, "#shard option")]
    if len(options) != shards:
        fail("shard switcher: %r" % options)
    if shards > 1:
        go("overview")
        rows = lambda: driver.find_elements(By.CSS_SELECTOR, "#shards-table tbody tr")  # noqa: E731
        wait("every shard in the table", lambda: len(rows()) == shards and all(
            "…" not in r.text for r in rows()))
        driver.find_element(By.CSS_SELECTOR, '#shard option[value="%s"]' % options[1]).click()
        theirs = api("GetStats", {}, options[1]).get("failed", "0")
        if theirs == failed:
            fail("shard %s has as many FAILED rows as %s: a test without a difference" %
                 (options[1], options[0]))
        wait("shard %s's own overview" % options[1], lambda: any(
            c.text.split("\n") == ["FAILED", str(theirs)]
            for c in driver.find_elements(By.CSS_SELECTOR, "#cards .card")))
        ok("shard switcher %s: shard %s shows its own %s FAILED rows" % (options, options[1], theirs))

    # A link whose id is not percent-encoded (cut short): opened at start-up,
    # it is said so and the rest of the console works.
    driver.get(url + "#message/%E0%A4%A")
    driver.refresh()
    banner = wait("the bad link's message", lambda: visible("banner") and text("banner"))
    if "names no message" not in banner:
        fail("a malformed link: %r" % banner)
    go("overview")
    wait("the overview sampling after a malformed link", lambda: any(
        c.text.split("\n")[0] == "FAILED" for c in driver.find_elements(By.CSS_SELECTOR, "#cards .card")))
    ok("a malformed link is said so (%s) and the overview samples" % banner)

    # Forgetting the token leaves nothing behind.
    driver.find_element(By.ID, "signout").click()
    wait("the token form again", lambda: visible("login"))
    if driver.execute_script("return sessionStorage.getItem('outbox-console-token')") is not None:
        fail("the token stayed in sessionStorage")
    ok("forget token: gone from the tab")
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"
              and "Content Security Policy" in e["message"]]
    if severe:
        fail("the page broke its own Content-Security-Policy: %r" % severe)
    ok("no Content-Security-Policy violation")
    print("PASS: console in a browser")


try:
    main()
finally:
    if driver is not None:
        driver.quit()
