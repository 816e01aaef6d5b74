"""The built-in OAuth consent page in a real browser: Debian's Chromium, headless, driven through
Debian's chromedriver with Selenium (never Selenium Manager: the driver and browser paths are
given). A client registered by raw HTTP sends the browser to the consent page; the page names
the client, where it will be sent back and the access asked; a wrong passphrase shows an error,
the right one brings the browser back to the client's redirect URI (a tiny local server) with a
code, the same state and the issuer; the code buys a token that the MCP endpoint accepts. The
page's headers forbid framing, foreign scripts and caching, and the form fits a phone's width.

A client name that holds a text-direction override (U+202E) is refused at registration, and one
stored before that rule cannot disguise the page: it is isolated and the control is shown as a
visible mark.

Screenshots go to target/artifacts/consent.png, consent-error.png, consent-phone.png and
consent-bidi.png.
Run by .ci/run with CAPVAULT_REQUIRE_BROWSER=1; without Chromium, chromedriver or selenium (and
without that variable) the tests say they are skipped.
"""

import base64
import hashlib
import http.server
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    webdriver = None

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("CAPVAULT_BIN", os.path.join(ROOT, "target", "debug", "capvault"))
ARTIFACTS = os.path.join(ROOT, "target", "artifacts")
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
PASSPHRASE = "the owner's passphrase, typed in a browser"
CLIENT_NAME = "Browser Test Client"
SCOPE = "vault:read vault:write"
ENV = {"CAPVAULT_LOG": "capvault=info", "PATH": os.environ.get("PATH", "")}


def missing():
    gone = []
    if not os.access(CHROMIUM, os.X_OK):
        gone.append(f"Chromium ({CHROMIUM})")
    if not os.access(CHROMEDRIVER, os.X_OK):
        gone.append(f"chromedriver ({CHROMEDRIVER}, Debian's chromium-driver)")
    if webdriver is None:
        gone.append("selenium (pip install selenium)")
    return gone


# --- plain HTTP, redirects never followed -----------------------------------------------------


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect())


def request(method, url, *, form=None, body=None, headers=None):
    """(status, headers, body bytes) of one request; `form` urlencoded, `body` as JSON."""
    headers = dict(headers or {})
    data = None
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    elif body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with OPENER.open(req, timeout=60) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def pkce():
    verifier = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Receiver:
    """The client's redirect URI: a local server on 127.0.0.1 that records every query it gets
    and answers "done"."""

    def __init__(self):
        self.queries = []
        queries = self.queries
        body = b"<!doctype html><title>done</title><p id=\"done\">done</p>"

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                parts = urllib.parse.urlsplit(self.path)
                if parts.path == "/callback":
                    queries.append(dict(urllib.parse.parse_qsl(parts.query)))
                self.send_response(200)
                self.send_header("content-type", "text/html")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_port}"
        self.redirect_uri = self.base + "/callback"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    gone = missing()
    if gone:
        msg = "a real browser is needed but missing: " + ", ".join(gone)
        if os.environ.get("CAPVAULT_REQUIRE_BROWSER") == "1":
            pytest.fail(msg + " (CAPVAULT_REQUIRE_BROWSER=1)")
        pytest.skip("skipped: " + msg + " (CI installs them)")
    profile = tempfile.mkdtemp()
    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-proxy-server",
                "--password-store=basic", "--window-size=1280,1000",
                f"--user-data-dir={profile}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The driver's path is given, so Selenium Manager is never asked for one (nor to download).
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(60)
    os.makedirs(ARTIFACTS, exist_ok=True)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def setup():
    """capvault with --write and the built-in OAuth server (passphrase set), the redirect
    receiver, and a public client registered for it by raw HTTP."""
    tmp = tempfile.mkdtemp()
    vault = os.path.join(tmp, "vault")
    shutil.copytree(os.path.join(ROOT, "examples", "vault"), vault)
    state = os.path.join(tmp, "state")
    done = subprocess.run([BIN, "passwd", vault, "--state-dir", state], input=PASSPHRASE + "\n",
                          capture_output=True, text=True, timeout=120, env=ENV)
    assert done.returncode == 0, done.stderr
    proc = subprocess.Popen(
        [BIN, "serve", vault, "--no-index-cache", "--transport", "http", "--listen", "127.0.0.1:0",
         "--oauth", "builtin", "--state-dir", state, "--write"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=ENV,
    )
    log = []
    url = None
    for line in proc.stderr:
        log.append(line)
        m = re.match(r"capvault: serving over HTTP at (\S+)", line)
        if m:
            url = m.group(1)
            break
    assert url, "".join(log)
    threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()
    parts = urllib.parse.urlsplit(url)
    base = f"{parts.scheme}://{parts.netloc}"
    receiver = Receiver()
    status, _, raw = request("POST", base + "/oauth/register", body={
        "client_name": CLIENT_NAME, "redirect_uris": [receiver.redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
        "token_endpoint_auth_method": "none", "scope": SCOPE})
    assert status == 201, raw
    client_id = json.loads(raw)["client_id"]
    yield {"url": url, "base": base, "receiver": receiver, "client_id": client_id, "log": log,
           "state": state}
    proc.terminate()
    proc.wait(timeout=30)
    receiver.close()
    shutil.rmtree(tmp)
    assert not any(PASSPHRASE in line for line in log), "the passphrase is in the log"


def authorization(setup, client_id=None):
    """A fresh authorization request: (URL, state, code_verifier)."""
    verifier, challenge = pkce()
    state = secrets.token_urlsafe(16)
    q = {"response_type": "code", "client_id": client_id or setup["client_id"],
         "redirect_uri": setup["receiver"].redirect_uri, "code_challenge": challenge,
         "code_challenge_method": "S256", "state": state, "scope": SCOPE,
         "resource": setup["url"]}
    return setup["base"] + "/oauth/authorize?" + urllib.parse.urlencode(q), state, verifier


def open_consent(driver, url):
    driver.get(url)
    WebDriverWait(driver, 30).until(EC.presence_of_element_located((By.ID, "passphrase")))


def csp_complaints(driver):
    """What Chromium's console said about the page's own Content-Security-Policy (an inline
    style or script the policy blocks shows up here)."""
    return [e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e["message"]]


def shot(driver, name):
    path = os.path.join(ARTIFACTS, name)
    assert driver.save_screenshot(path) and os.path.getsize(path) > 0, path
    print("screenshot:", os.path.relpath(path, ROOT))


def mcp_body(status, headers, raw):
    """The JSON-RPC message of an MCP reply, sent as JSON or as one SSE event."""
    assert status == 200, (status, raw[:600])
    if headers.get("Content-Type", "").startswith("text/event-stream"):
        data = [l[5:].strip() for l in raw.decode().splitlines() if l.startswith("data:")]
        return json.loads([d for d in data if d][-1])
    return json.loads(raw)


# --- the tests --------------------------------------------------------------------------------


def test_the_consent_page_forbids_framing_foreign_scripts_and_caching(setup):
    """The consent page's response (fetched with urllib, as Chromium got it): a CSP with
    frame-ancestors 'none' and scripts limited to 'none' or 'self' (script-src, or default-src
    when there is none), Cache-Control no-store, X-Frame-Options DENY."""
    url, _, _ = authorization(setup)
    status, headers, raw = request("GET", url)
    assert status == 200, raw[:600]
    assert headers.get("Content-Type", "").startswith("text/html"), dict(headers)
    csp = headers.get("Content-Security-Policy", "")
    directives = {}
    for part in csp.split(";"):
        words = part.split()
        if words:
            directives[words[0].lower()] = words[1:]
    assert directives.get("frame-ancestors") == ["'none'"], csp
    scripts = directives.get("script-src", directives.get("default-src"))
    assert scripts is not None, f"no script-src nor default-src: scripts run unrestricted: {csp}"
    assert set(scripts) <= {"'none'", "'self'"}, csp
    assert "no-store" in headers.get("Cache-Control", ""), dict(headers)
    assert headers.get("X-Frame-Options", "").upper() == "DENY", dict(headers)


def test_the_owner_consents_in_chromium_and_the_code_buys_a_working_token(browser, setup):
    """Chromium shows the page (client name, redirect host 127.0.0.1, "read and write", the
    passphrase field, the read-only box); a wrong passphrase typed and Allow clicked shows the
    error; the right one brings the browser to the client's redirect URI with a code, the same
    state and iss = the issuer; the code, exchanged with its verifier, buys a token with which
    POST /mcp initialize answers (and without which it is 401)."""
    driver = browser
    receiver = setup["receiver"]
    url, state, verifier = authorization(setup)
    open_consent(driver, url)
    text = driver.find_element(By.TAG_NAME, "body").text
    assert CLIENT_NAME in text, text
    assert "127.0.0.1" in text, text
    assert "read and write" in text.lower(), text
    field = driver.find_element(By.ID, "passphrase")
    assert field.get_attribute("type") == "password" and field.is_displayed()
    assert driver.find_element(By.ID, "read_only").get_attribute("type") == "checkbox"
    assert driver.find_element(By.ID, "allow").is_displayed()
    assert driver.find_element(By.ID, "deny").is_displayed()
    assert not csp_complaints(driver), csp_complaints(driver)
    shot(driver, "consent.png")

    field.send_keys("not the passphrase")
    driver.find_element(By.ID, "allow").click()
    error = WebDriverWait(driver, 30).until(EC.visibility_of_element_located((By.ID, "error")))
    assert "passphrase" in error.text.lower(), error.text
    assert driver.current_url.startswith(setup["base"]), driver.current_url
    assert not receiver.queries, receiver.queries
    shot(driver, "consent-error.png")

    driver.find_element(By.ID, "passphrase").send_keys(PASSPHRASE)
    driver.find_element(By.ID, "allow").click()
    try:
        WebDriverWait(driver, 30).until(lambda d: d.current_url.startswith(receiver.base))
    except TimeoutException:
        # A CSP `form-action` that does not allow the redirect URI blocks the 303 in Chromium.
        raise AssertionError(f"the browser never reached the redirect URI: at {driver.current_url}, "
                             f"console: {csp_complaints(driver)}") from None
    WebDriverWait(driver, 30).until(EC.presence_of_element_located((By.ID, "done")))
    assert len(receiver.queries) == 1, receiver.queries
    back = receiver.queries[0]
    _, _, raw = request("GET", setup["base"] + "/.well-known/oauth-authorization-server")
    issuer = json.loads(raw)["issuer"]
    assert back.get("code") and back.get("state") == state and back.get("iss") == issuer, back
    assert "error" not in back, back

    status, headers, raw = request("POST", setup["base"] + "/oauth/token", form={
        "grant_type": "authorization_code", "code": back["code"],
        "redirect_uri": receiver.redirect_uri, "client_id": setup["client_id"],
        "code_verifier": verifier, "resource": setup["url"]})
    assert status == 200, raw
    tokens = json.loads(raw)
    assert tokens["access_token"] and tokens["token_type"].lower() == "bearer", tokens
    assert set(tokens.get("scope", SCOPE).split()) == set(SCOPE.split()), tokens

    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "browser-test", "version": "1"}}}
    head = {"Accept": "application/json, text/event-stream"}
    status, headers, _ = request("POST", setup["url"], body=init, headers=head)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer"), status
    reply = mcp_body(*request("POST", setup["url"], body=init, headers={
        **head, "Authorization": f"Bearer {tokens['access_token']}"}))
    assert reply["result"]["serverInfo"]["name"] == "capvault", reply
    for secret in (tokens["access_token"], tokens.get("refresh_token"), back["code"]):
        assert not any(secret and secret in line for line in setup["log"]), "a secret in the log"


def test_the_consent_page_fits_a_phone(browser, setup):
    """At 390x844 (a phone) the page has no horizontal scroll and the passphrase field and the
    buttons lie within the width."""
    driver = browser
    url, _, _ = authorization(setup)
    size = driver.get_window_size()
    try:
        driver.set_window_size(390, 844)
        open_consent(driver, url)
        scroll = driver.execute_script("return document.documentElement.scrollWidth")
        inner = driver.execute_script("return window.innerWidth")
        assert scroll <= inner, f"horizontal scroll: scrollWidth {scroll} > innerWidth {inner}"
        for id_ in ("passphrase", "allow", "deny"):
            el = driver.find_element(By.ID, id_)
            assert el.is_displayed(), id_
            assert el.rect["x"] >= 0 and el.rect["x"] + el.rect["width"] <= inner, (id_, el.rect)
        shot(driver, "consent-phone.png")
    finally:
        driver.set_window_size(size["width"], size["height"])


SPOOF = "<b>Evil</b>\u202eabc"


def store_client(setup, client_id, name):
    """Writes a client into the authorization server's store as a running server's registration
    would have (the way a name from before the registration rule would still be there); the
    server sees the changed file at its next request."""
    found = [os.path.join(d, f) for d, _, files in os.walk(setup["state"]) for f in files
             if f == "grants.json"]
    assert len(found) == 1, found
    with open(found[0]) as f:
        data = json.load(f)
    data.setdefault("clients", []).append({
        "id": client_id, "name": name, "redirect_uris": [setup["receiver"].redirect_uri],
        "auth_method": "none", "created": int(time.time())})
    tmp = found[0] + ".test"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, found[0])


def test_a_bidi_override_in_a_client_name_cannot_disguise_the_consent_page(browser, setup):
    """Registration refuses a client_name holding U+202E (RIGHT-TO-LEFT OVERRIDE) with
    invalid_client_metadata. A client stored with such a name anyway gets a page on which the
    name is isolated and the override shown as a visible [U+202E] mark: Chromium renders the
    headline in logical order ("Allow <b>Evil</b>[U+202E]abc to use your vault ..."), the page
    holds no U+202E, and the "(the name it gave itself)" label stays to the right of the name."""
    driver = browser
    status, _, raw = request("POST", setup["base"] + "/oauth/register", body={
        "client_name": SPOOF, "redirect_uris": [setup["receiver"].redirect_uri],
        "token_endpoint_auth_method": "none"})
    assert status == 400, raw
    refusal = json.loads(raw)
    assert refusal["error"] == "invalid_client_metadata", refusal
    assert "U+202E" in refusal["error_description"], refusal

    client_id = "cvc_stored_before_the_rule_0001"
    store_client(setup, client_id, SPOOF)
    url, _, _ = authorization(setup, client_id)
    open_consent(driver, url)
    assert "\u202e" not in driver.page_source
    headline = driver.find_element(By.TAG_NAME, "h1").text
    assert headline.startswith("Allow <b>Evil</b>[U+202E]abc to use your vault"), headline
    name = driver.find_element(By.CSS_SELECTOR, "dd bdi")
    label = driver.find_element(By.ID, "publisher")
    assert name.text == "<b>Evil</b>[U+202E]abc", name.text
    assert label.text == "(the name it gave itself)", label.text
    # The label starts after the name: to its right on the same line, or on a later line.
    first = driver.execute_script(
        "const r = arguments[0].getClientRects()[0]; return {x: r.left, y: r.top};", label)
    after = (first["x"] >= name.rect["x"] + name.rect["width"] - 1
             or first["y"] >= name.rect["y"] + name.rect["height"] - 1)
    assert after, (name.rect, first)
    assert not csp_complaints(driver), csp_complaints(driver)
    shot(driver, "consent-bidi.png")
