#!/usr/bin/env python3
"""The console in a real browser (SPEC §13.4): headless Chromium driven by Selenium, with
axe-core's accessibility rules (bundled by axe-selenium-python).

Run by Tests/EndToEndTests/ConsoleBrowserTests.swift against `pushdispatch run` and the fake
providers, which it prepares: a subscription whose first attempt got 503, a record that revoked
a subscription (denied), a paused webhook. Arguments: --base URL --token T --queue FILE
--artifacts DIR --uid U --app A --denied-record SEQ --next-seq N. Prints one line per check;
exits 1 on the first failure (with a screenshot of where it failed).
"""
import argparse
import json
import pathlib
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

parser = argparse.ArgumentParser()
parser.add_argument("--base", required=True)
parser.add_argument("--token", required=True)
parser.add_argument("--queue", required=True)
parser.add_argument("--artifacts", required=True)
parser.add_argument("--app", default="toto")
parser.add_argument("--uid", default="alice")
parser.add_argument("--denied-record", type=int, required=True)
parser.add_argument("--next-seq", type=int, required=True)
parser.add_argument("--width", type=int, default=1280)
parser.add_argument("--height", type=int, default=800)
args = parser.parse_args()
artifacts = pathlib.Path(args.artifacts)
artifacts.mkdir(parents=True, exist_ok=True)

options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for flag in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={args.width},{args.height}", "--lang=en-US"]:
    options.add_argument(flag)
options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
wait = WebDriverWait(driver, 10)
axe_source = None
try:
    import axe_selenium_python

    axe_source = (pathlib.Path(axe_selenium_python.__file__).parent / "node_modules/axe-core/axe.min.js").read_text()
except Exception as error:  # noqa: BLE001
    print(f"axe-core unavailable: {error}")
    sys.exit(2)


def fail(message):
    driver.save_screenshot(str(artifacts / "failure.png"))
    print(f"FAIL {message}")
    print(f"page text: {driver.find_element(By.TAG_NAME, 'body').text[:1500]}")
    driver.quit()
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)
    print(f"ok {message}")


def until(what, predicate, timeout=10):
    try:
        return WebDriverWait(driver, timeout).until(lambda d: predicate())
    except Exception:  # noqa: BLE001
        fail(f"timed out: {what}")


def text():
    return driver.find_element(By.ID, "page").text


def accessible(name):
    """axe-core's rules on the page as it is now: no violation (the CSP allows no inline script, so
    axe is injected through the driver)."""
    driver.execute_script(axe_source)
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']}).then(r => done(JSON.stringify(r.violations))).catch(e => done(JSON.stringify([{id: 'axe-error', help: String(e), nodes: []}])));"
    )
    violations = json.loads(result)
    details = "; ".join(f"{v['id']}: {v.get('help', '')} ({len(v.get('nodes', []))} nodes: {[n.get('target') for n in v.get('nodes', [])][:3]})" for v in violations)
    check(not violations, f"{name}: no accessibility violation (axe-core) {details}")


def shot(name):
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(str(artifacts / f"{name}.png"))


def no_console_errors(where):
    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    check(not errors, f"{where}: no error in the browser's console {errors}")


def append(record):
    with open(args.queue, "a", encoding="utf-8") as queue:
        queue.write(json.dumps(record, separators=(",", ":")) + "\n")


# Sign in: the token is refused when wrong, accepted when right; it never goes into a URL.
driver.get(args.base + "/console")
until("the sign-in form", lambda: driver.find_element(By.ID, "signin").is_displayed())
accessible("sign-in")
shot("signin")
field = driver.find_element(By.ID, "signin-token")
field.send_keys("not-the-token-0123456789")
field.send_keys(Keys.ENTER)
until("the refusal", lambda: "not the one configured" in driver.find_element(By.ID, "signin-error").text)
print("ok a wrong token is refused")
field.send_keys(args.token)
field.send_keys(Keys.ENTER)
until("the overview", lambda: "Overview" in text() and "Instance" in text())
check(args.token not in driver.current_url, "the token is not in the URL")
cookies = {c["name"]: c for c in driver.get_cookies()}
session = cookies.get("pushdispatch_console")
check(session is not None and session.get("httpOnly") and session.get("sameSite") == "Strict", "the session cookie is HttpOnly and SameSite=Strict")
check(args.token not in json.dumps(driver.get_cookies()), "the token is not in a cookie")
# A state-changing request with the cookie alone (a forged one) is refused.
forged = driver.execute_async_script(
    "const done = arguments[arguments.length - 1];"
    "fetch('/ops/v1/recover', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify({app: 'toto', since: 0})})"
    ".then(r => done(r.status)).catch(e => done(String(e)));"
)
check(forged == 403, f"a POST with the session cookie but without its X-CSRF-Token is refused (got {forged})")
# The refusals just provoked (the wrong token's 401, the forged POST's 403) are logged by the
# browser as failed loads: read them off, so that what follows is checked alone.
provoked = driver.get_log("browser")
check(all(entry["source"] == "network" and ("/console/session" in entry["message"] or "/ops/v1/recover" in entry["message"]) for entry in provoked if entry["level"] == "SEVERE"),
      f"nothing but the provoked refusals was logged so far {provoked}")

# Overview: tiles per provider, charts as SVG.
until("a provider tile", lambda: len(driver.find_elements(By.CSS_SELECTOR, ".tile")) >= 2)
check(len(driver.find_elements(By.CSS_SELECTOR, "svg.chart")) == 2, "the overview draws its two charts as SVG")
check("null" not in text() and "undefined" not in text(), "the overview shows no null or undefined")
def fcm_credentials_ok():
    for row in driver.find_elements(By.CSS_SELECTOR, "#credentials-table tbody tr"):
        cells = [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
        if len(cells) == 9 and cells[1] == "fcm" and cells[3] == "ok" and "@" in cells[2] and cells[5].startswith("in "):
            return True
    return False
until("the FCM credentials' health: ok, whose, expiring in the future", fcm_credentials_ok)
check("PRIVATE KEY" not in text(), "no key is shown")
# Pacing (issue 34): FCM's default budget, 600,000 a minute, on its tile once it has sent.
until("the FCM tile's budget", lambda: any("Budget" in tile.text and "10000 /s" in tile.text for tile in driver.find_elements(By.CSS_SELECTOR, ".tile")))
time.sleep(2.5)  # a second sample: the charts draw a line
accessible("overview")
shot("overview")
no_console_errors("overview")

# Live: a record's delivery appears within 2 s.
driver.get(args.base + "/console#/live")
until("the live stream", lambda: "Connected" in driver.find_element(By.ID, "live-status").text)
accessible("live")
appended = time.monotonic()
append({"seq": args.next_seq, "app": args.app, "op": "put", "path": "/a", "data": {"live": args.next_seq}})
until("the delivery on the live page", lambda: any(
    f"{args.app}:{args.next_seq}" in row.text and "delivered" in row.text for row in driver.find_elements(By.CSS_SELECTOR, "#live-table tbody tr")), timeout=5)
elapsed = time.monotonic() - appended
check(elapsed <= 2.0, f"the record's delivery appeared on the live page within 2 s ({elapsed:.2f} s)")
shot("live")
Select(driver.find_element(By.ID, "live-outcome")).select_by_value("failures")
no_console_errors("live")

# Subscriptions: found by uid, then its timeline: 503, then delivered.
driver.get(args.base + "/console#/subscriptions")
until("the search form", lambda: driver.find_elements(By.ID, "search-uid"))
driver.find_element(By.ID, "search-app").send_keys(args.app)
driver.find_element(By.ID, "search-uid").send_keys(args.uid)
driver.find_element(By.ID, "search-path").send_keys("/a")
driver.find_element(By.ID, "search-uid").send_keys(Keys.ENTER)
until("the results", lambda: driver.find_elements(By.CSS_SELECTOR, "#subscription-results tbody tr"))
results = driver.find_element(By.ID, "subscription-results").text
check("sha256" in results and "…" in results, "the device token is shown redacted")
accessible("subscriptions")
shot("subscriptions")
driver.find_element(By.CSS_SELECTOR, "#subscription-results tbody tr a").click()
until("the timeline", lambda: "Subscription timeline" in text() and "delivered" in text())
rows = [row.text for row in driver.find_elements(By.CSS_SELECTOR, "#page table tbody tr")]
outcomes = [("retry" if " retry " in f" {r} " else "delivered" if " delivered " in f" {r} " else "?") for r in rows]
check(outcomes[-2:] == ["delivered", "retry"] and " 503 " in f" {rows[-1]} ", f"the timeline shows the 503 then the delivery {rows}")
accessible("timeline")
shot("timeline")

# Records: the denied subscription got nothing, and why.
driver.get(args.base + f"/console#/records")
until("the record form", lambda: driver.find_elements(By.ID, "record-app"))
driver.find_element(By.ID, "record-app").send_keys(args.app)
driver.find_element(By.ID, "record-seq").send_keys(str(args.denied_record) + Keys.ENTER)
until("the record's fate", lambda: driver.find_elements(By.ID, "record-nothing"))
check("denied" in driver.find_element(By.ID, "record-nothing").text, "the record lookup says who got nothing: denied")
accessible("record")
shot("record")

# Senders: the paused webhook, resumed from the page.
driver.get(args.base + "/console#/senders")
until("the paused sender", lambda: driver.find_elements(By.CSS_SELECTOR, "#senders-table tbody tr"))
check("401" in driver.find_element(By.ID, "senders-table").text, "the pause says why (401)")
accessible("senders")
shot("senders")
driver.find_element(By.CSS_SELECTOR, "#senders-table button").click()
until("the resume", lambda: "No sender is paused" in text() or "Resumed" in text())
until("no sender paused", lambda: "No sender is paused" in text())
print("ok the paused sender was resumed from the page")

# Dead letters: the page reads (none refused in this run, or some).
driver.get(args.base + "/console#/deadletters")
until("the dead letters", lambda: "Dead letters" in text() and ("No dead letter" in text() or driver.find_elements(By.ID, "deadletter-table")))
accessible("dead letters")
driver.find_element(By.ID, "deadletter-check").click()
until("the dry run's answer", lambda: "Would apply" in driver.find_element(By.ID, "deadletter-message").text)
shot("deadletters")

# Rules playground.
driver.get(args.base + "/console#/rules")
until("the playground", lambda: driver.find_elements(By.ID, "rules-app"))
driver.find_element(By.ID, "rules-app").send_keys(args.app)
driver.find_element(By.CSS_SELECTOR, "#rules-form button[type=submit]").click()
until("the answer", lambda: "allowed" in driver.find_element(By.ID, "rules-result").text)
accessible("rules")
shot("rules")

# Keyboard: the skip link comes first and the pages are reachable by Tab.
driver.get(args.base + "/console#/overview")
until("the overview", lambda: "Overview" in text())
body = driver.find_element(By.TAG_NAME, "body")
body.send_keys(Keys.TAB)
check(driver.switch_to.active_element.text == "Skip to content", "the first Tab reaches the skip link")
body = driver.switch_to.active_element
seen = []
for _ in range(12):
    driver.switch_to.active_element.send_keys(Keys.TAB)
    seen.append(driver.switch_to.active_element.text)
check(all(name in seen for name in ["Overview", "Live", "Subscriptions", "Records", "Senders", "Dead letters", "Rules"]), f"every page is reachable by Tab {seen}")

# A phone: the overview still reads.
driver.set_window_size(390, 844)
driver.get(args.base + "/console#/overview")
until("the overview on a phone", lambda: "Overview" in text())
width = driver.execute_script("return document.documentElement.scrollWidth")
check(width <= 390, f"no horizontal scrolling of the page on a phone ({width}px)")
shot("overview-phone")
no_console_errors("the whole visit")

# Sign out: the session ends.
driver.set_window_size(args.width, args.height)
driver.find_element(By.ID, "signout").click()
until("the sign-in form again", lambda: driver.find_element(By.ID, "signin").is_displayed())
status = driver.execute_async_script(
    "const done = arguments[arguments.length - 1]; fetch('/ops/v1/overview').then(r => done(r.status));")
check(status == 401, f"after signing out the API refuses the browser ({status})")
driver.quit()
print("PASS")
