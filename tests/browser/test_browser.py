"""What a web page can do to a local capvault, tried in a real browser (Debian's Chromium,
headless): a page of another origin, and a page that reaches capvault under a rebound name, get
nothing (every request they cause is refused with 403 before any tool runs), while a page of an
origin the owner allowed with `--allowed-origin` can call it (so the refusals are the server's
doing, not the browser failing). Run by .ci/run, which installs Chromium; without it (and
without CAPVAULT_REQUIRE_BROWSER=1) the test says it is skipped.
"""

import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("CAPVAULT_BIN", os.path.join(ROOT, "target", "debug", "capvault"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

PAGE = """<!doctype html><html><body><pre id="out">pending</pre><script>
const CAP = %(cap)s;
const init = JSON.stringify({jsonrpc: "2.0", id: 1, method: "initialize", params: {
  protocolVersion: "2025-11-25", capabilities: {}, clientInfo: {name: "page", version: "1"}}});
const call = JSON.stringify({jsonrpc: "2.0", id: 2, method: "tools/call", params: {
  name: "read_note", arguments: {path: "Home.md"}, _meta: {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {}}}});
async function go() {
  const out = {};
  try {
    const r = await fetch(CAP, {method: "POST", body: init, headers: {
      "content-type": "application/json", "accept": "application/json, text/event-stream"}});
    out.cors = r.status + " " + (await r.text()).slice(0, 400);
  } catch (e) { out.cors = "blocked " + e; }
  try {
    // A "simple" request: no preflight; the browser sends it and hides the answer.
    await fetch(CAP, {method: "POST", mode: "no-cors", body: call,
      headers: {"content-type": "text/plain"}});
    out.simple = "sent";
  } catch (e) { out.simple = "blocked " + e; }
  document.getElementById("out").textContent = "@@" + "OUT" + JSON.stringify(out) + "TUO" + "@@";
}
go();
</script></body></html>"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Pages:
    """A static page server on 127.0.0.1:port serving `page.html`."""

    def __init__(self, html):
        self.port = free_port()
        body = html.encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("content-type", "text/html")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def browse(url, rules):
    """Loads `url` in headless Chromium and returns what the page's script reported."""
    profile = tempfile.mkdtemp()
    try:
        out = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", f"--host-resolver-rules={rules}",
             "--virtual-time-budget=15000", "--dump-dom", url],
            capture_output=True, text=True, timeout=120,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    m = re.search(r"@@OUT(.*?)TUO@@", out.stdout, re.S)
    assert m, f"the page reported nothing:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
    return json.loads(m.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


@pytest.fixture(scope="module")
def setup():
    if CHROMIUM is None:
        if os.environ.get("CAPVAULT_REQUIRE_BROWSER"):
            raise AssertionError("Chromium is required here but not installed")
        pytest.skip("skipped: no Chromium on this machine (CI installs it)")
    tmp = tempfile.mkdtemp()
    vault = os.path.join(tmp, "vault")
    shutil.copytree(os.path.join(ROOT, "examples", "vault"), vault)
    trusted = Pages("")  # its port is the allowed origin; its page is set below
    proc = subprocess.Popen(
        [BIN, "serve", vault, "--no-index-cache", "--transport", "http", "--listen", "127.0.0.1:0",
         "--allowed-origin", f"http://127.0.0.1:{trusted.port}"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={"CAPVAULT_LOG": "capvault=info", "PATH": os.environ.get("PATH", "")},
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
    yield url, trusted, log
    proc.terminate()
    proc.wait(timeout=30)
    trusted.close()
    shutil.rmtree(tmp)


def access(log):
    return [l for l in log if "capvault::access" in l]


def test_a_page_of_another_origin_or_a_rebound_name_gets_nothing(setup):
    url, _, log = setup
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    # A page on another origin calls capvault by its loopback address.
    evil = Pages(PAGE % {"cap": json.dumps(url)})
    before = len(access(log))
    seen = browse(f"http://127.0.0.1:{evil.port}/page.html", "MAP nothing.invalid 127.0.0.1")
    assert seen["cors"].startswith("blocked"), seen
    # A page that reaches capvault through a name the attacker controls (DNS rebinding: the
    # name now resolves to 127.0.0.1, and the browser sends that name as Host).
    rebound = Pages(PAGE % {"cap": json.dumps(f"http://rebound.test:{port}/mcp")})
    seen2 = browse(f"http://attacker.test:{rebound.port}/page.html",
                   "MAP rebound.test 127.0.0.1, MAP attacker.test 127.0.0.1")
    assert seen2["cors"].startswith("blocked"), seen2
    evil.close()
    rebound.close()
    lines = access(log)[before:]
    # The browser did send requests (the preflights and the simple POSTs), and every one of them
    # was refused before any tool ran.
    print("evil page saw:", seen, "rebound page saw:", seen2)
    print("".join(lines))
    assert len(lines) >= 4, lines
    assert all("status=403" in l for l in lines), lines
    assert any('http=POST' in l for l in lines), lines


def test_a_page_of_an_allowed_origin_can_call_it(setup):
    url, trusted, log = setup
    page = (PAGE % {"cap": json.dumps(url)}).encode()
    trusted.server.RequestHandlerClass.do_GET = lambda self: (
        self.send_response(200), self.send_header("content-type", "text/html"),
        self.send_header("content-length", str(len(page))), self.end_headers(),
        self.wfile.write(page))
    seen = browse(f"http://127.0.0.1:{trusted.port}/page.html", "MAP nothing.invalid 127.0.0.1")
    assert seen["cors"].startswith("200 "), seen
    assert '"serverInfo"' in seen["cors"] and "capvault" in seen["cors"], seen
