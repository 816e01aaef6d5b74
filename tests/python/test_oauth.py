"""capvault's built-in OAuth authorization server (`serve --oauth builtin`), tried two ways.

Through the official MCP Python SDK's own OAuth client (`OAuthClientProvider`, 1.x and 2.x), as
a desktop MCP client would use it: the 401 challenge leads the SDK to the protected resource
metadata, the authorization server metadata and dynamic client registration; the "browser" is a
stand-in that fetches the consent page by HTTP, types the owner's passphrase and follows the 303
back to the client, and the SDK exchanges the code (PKCE S256) and calls tools with the token.

And by raw HTTP (urllib, redirects never followed), for what a client must never get: a code
for a wrong passphrase, a redirect for an unknown client or redirect URI, an authorization code
without S256 PKCE, a second use of a code, a refresh token used twice (which also kills its
rotated successor), a code exchanged with the wrong verifier.

The binary runs `passwd` (the owner's passphrase on stdin) and then
`serve --transport http --oauth builtin --write` on a copy of the example vault.
"""

import base64
import hashlib
import html.parser
import http.cookiejar
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request

import anyio
import pytest

from test_sdk import BIN, ROOT, SDK_MAJOR, call

PASSPHRASE = "correct horse battery staple: the vault owner's"
# The client's redirect URI. Nothing listens there: the owner stand-in reads the 303's Location
# itself and hands the code to the SDK's callback handler, as a loopback listener would.
REDIRECT = "http://127.0.0.1:8976/callback"
BOTH = {"vault:read", "vault:write"}
ENV = {"CAPVAULT_LOG": "capvault=info", "PATH": os.environ.get("PATH", "")}


# --- the server -------------------------------------------------------------------------------


class Server:
    """A running `capvault serve --oauth builtin`: `url` is the MCP endpoint
    (http://127.0.0.1:PORT/mcp), `base` the origin (the issuer and resource server)."""

    def __init__(self, proc, url, vault, log):
        self.proc = proc
        self.url = url
        parts = urllib.parse.urlsplit(url)
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.vault = vault
        self.log = log
        self.secrets = [PASSPHRASE]  # what must never appear in the log


def start_server(tmp, *extra, passphrase=PASSPHRASE):
    """Copies the example vault into `tmp`, sets the owner's passphrase with `capvault passwd`
    (one line on stdin) and starts `serve --transport http --oauth builtin` on a free port."""
    vault = os.path.join(tmp, "vault")
    shutil.copytree(os.path.join(ROOT, "examples", "vault"), vault)
    state = os.path.join(tmp, "state")
    done = subprocess.run(
        [BIN, "passwd", vault, "--state-dir", state],
        input=passphrase + "\n", capture_output=True, text=True, timeout=120, env=ENV,
    )
    assert done.returncode == 0, done.stderr
    assert passphrase not in done.stdout + done.stderr
    proc = subprocess.Popen(
        [BIN, "serve", vault, "--no-index-cache", "--transport", "http",
         "--listen", "127.0.0.1:0", "--oauth", "builtin", "--state-dir", state, *extra],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=ENV,
    )
    url = None
    log = []
    for line in proc.stderr:
        log.append(line)
        m = re.match(r"capvault: serving over HTTP at (\S+)", line)
        if m:
            url = m.group(1)
            break
    assert url, "".join(log)
    # Keep reading stderr (the access log) so the pipe never fills.
    threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()
    return Server(proc, url, vault, log)


def stop_server(server):
    server.proc.terminate()
    assert server.proc.wait(timeout=30) == 0, "".join(server.log[-20:])
    leaked = [s[:12] + "…" for s in server.secrets if s and any(s in l for l in server.log)]
    assert not leaked, f"secrets in the log: {leaked}"


@pytest.fixture(scope="module")
def server():
    tmp = tempfile.mkdtemp()
    s = start_server(tmp, "--write")
    yield s
    stop_server(s)
    shutil.rmtree(tmp)


# --- HTTP as a browser or a client does it, without following redirects -----------------------


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # the 3xx comes back as it is


def opener(cookies=None):
    handlers = [urllib.request.ProxyHandler({}), NoRedirect()]
    if cookies is not None:
        handlers.append(urllib.request.HTTPCookieProcessor(cookies))
    return urllib.request.build_opener(*handlers)


class Reply:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"<{self.status} {dict(self.headers)} {self.text[:600]!r}>"


def request(method, url, *, form=None, body=None, headers=None, via=None):
    """One HTTP request; `form` is sent urlencoded, `body` as JSON. Never follows a redirect."""
    headers = dict(headers or {})
    data = None
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
    elif body is not None:
        data = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with (via or opener()).open(req, timeout=60) as r:
            return Reply(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        return Reply(e.code, e.headers, e.read())


def query_of(url):
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))


class Page(html.parser.HTMLParser):
    """What the consent page holds: the form's action, its inputs by name, the ids on the page and
    the text of the element `id="error"`."""

    def __init__(self, text):
        super().__init__()
        self.action = None
        self.inputs = {}
        self.ids = set()
        self.error = None
        self._error_depth = 0
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "form" and a.get("id") == "consent":
            self.action = a.get("action")
        if tag == "input" and "name" in a:
            self.inputs[a["name"]] = a
        if self._error_depth:
            self._error_depth += 1
        elif a.get("id") == "error":
            self._error_depth = 1
            self.error = ""

    def handle_endtag(self, tag):
        if self._error_depth:
            self._error_depth -= 1

    def handle_data(self, data):
        if self._error_depth:
            self.error += data


def submit(authorize_url, *, passphrase=PASSPHRASE, decision="allow", read_only=False, via=None):
    """The owner at the consent page: GET it (as a browser would, keeping cookies in `via`'s
    jar), fill in the passphrase, tick "Allow reading only" when `read_only`, press the
    `decision` button. Returns (page reply, parsed page, reply to the form POST)."""
    via = via or opener(http.cookiejar.CookieJar())
    page = request("GET", authorize_url, via=via)
    assert page.status == 200, page
    form = Page(page.text)
    assert form.action and "request" in form.inputs and "csrf" in form.inputs, page
    assert form.inputs.get("passphrase", {}).get("type") == "password", page
    assert {"allow", "deny"} <= form.ids, page
    fields = {"request": form.inputs["request"].get("value", ""),
              "csrf": form.inputs["csrf"].get("value", ""),
              "passphrase": passphrase, "decision": decision}
    if read_only:
        assert form.inputs.get("read_only", {}).get("type") == "checkbox", page
        fields["read_only"] = "on"
    parts = urllib.parse.urlsplit(authorize_url)
    origin = f"{parts.scheme}://{parts.netloc}"
    # A browser's form POST carries the page's Origin and Referer; send them as it would.
    posted = request("POST", urllib.parse.urljoin(authorize_url, form.action), form=fields,
                     headers={"Origin": origin, "Referer": authorize_url}, via=via)
    return page, form, posted


def consent(authorize_url, *, read_only=False):
    """The owner allows the request; returns the query of the redirect back to the client."""
    _, _, posted = submit(authorize_url, read_only=read_only)
    assert posted.status == 303, posted
    location = posted.headers["Location"]
    q = query_of(authorize_url)
    assert location.startswith(q["redirect_uri"]), (location, q["redirect_uri"])
    back = query_of(location)
    assert back.get("code") and back.get("state") == q.get("state"), location
    return back


def pkce():
    """A PKCE pair (RFC 7636): a 43-character verifier and its S256 challenge."""
    verifier = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def register(server, **meta):
    """Dynamic client registration (RFC 7591) by raw HTTP; returns the client information."""
    body = {"client_name": "capvault raw HTTP test", "redirect_uris": [REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
            "token_endpoint_auth_method": "none", "scope": "vault:read vault:write", **meta}
    r = request("POST", server.base + "/oauth/register", body=body)
    assert r.status == 201, r
    return r.json()


def authorize_url(server, client_id, challenge, **params):
    """The authorization request a client sends the browser to; a parameter set to None is left
    out."""
    q = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT,
         "code_challenge": challenge, "code_challenge_method": "S256",
         "state": secrets.token_urlsafe(16), "scope": "vault:read vault:write",
         "resource": server.url, **params}
    q = {k: v for k, v in q.items() if v is not None}
    return server.base + "/oauth/authorize?" + urllib.parse.urlencode(q)


def token(server, **form):
    return request("POST", server.base + "/oauth/token", form=form)


def exchange(server, client_id, code, verifier):
    return token(server, grant_type="authorization_code", code=code, redirect_uri=REDIRECT,
                 client_id=client_id, code_verifier=verifier, resource=server.url)


def refresh(server, client_id, refresh_token):
    return token(server, grant_type="refresh_token", refresh_token=refresh_token,
                 client_id=client_id, resource=server.url)


def assert_invalid_grant(r):
    assert r.status == 400, r
    assert r.headers.get("Content-Type", "").startswith("application/json"), r
    assert r.json()["error"] == "invalid_grant", r


def challenge_params(header):
    """The auth-params of a `Bearer` WWW-Authenticate challenge, as a dict."""
    assert header and header.startswith("Bearer "), header
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


# --- the SDK's OAuth client -------------------------------------------------------------------


class MemoryStorage:
    """The SDK's `TokenStorage` protocol, in memory (the same four methods in 1.x and 2.x)."""

    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


class Owner:
    """Stands in for the browser and the owner: the SDK's `redirect_handler` consents over HTTP
    (with "Allow reading only" ticked when `read_only`) and its `callback_handler` returns what
    the redirect carried: `(code, state)` in 1.x, `AuthorizationCodeResult(code, state, iss)` in
    2.x (which checks `iss`, RFC 9207). Every authorization request the SDK made is in `asked`."""

    def __init__(self, read_only=False):
        self.read_only = read_only
        self.asked = []
        self.back = []

    async def redirect_handler(self, url):
        self.asked.append(url)
        # urllib blocks; the SDK's event loop must not.
        self.back.append(await anyio.to_thread.run_sync(
            lambda: consent(url, read_only=self.read_only)))

    async def callback_handler(self):
        back = self.back[-1]
        if SDK_MAJOR >= 2:
            from mcp.client.auth import AuthorizationCodeResult

            return AuthorizationCodeResult(code=back["code"], state=back.get("state"),
                                           iss=back.get("iss"))
        return back["code"], back.get("state")


def run_oauth(server, body, owner, storage, **metadata):
    """Connects to `server.url` with the SDK's OAuth client and runs `body(session)`.

    Both majors: `OAuthClientProvider(server_url, client_metadata, storage, redirect_handler,
    callback_handler)` is an httpx `Auth` (httpx2 in 2.x) set on the HTTP client the transport
    uses; 2.x drives it with `Client` (stateless 2026-07-28), 1.x with `ClientSession`."""

    async def main():
        from mcp.client.auth import OAuthClientProvider
        from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
        from mcp.shared.auth import OAuthClientMetadata

        meta = OAuthClientMetadata(
            client_name=f"capvault SDK {SDK_MAJOR}.x test", redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"], response_types=["code"],
            **metadata,
        )
        auth = OAuthClientProvider(
            server_url=server.url, client_metadata=meta, storage=storage,
            redirect_handler=owner.redirect_handler, callback_handler=owner.callback_handler,
        )
        with anyio.fail_after(120):
            async with create_mcp_http_client(auth=auth) as http:
                transport = streamable_http_client(server.url, http_client=http)
                if SDK_MAJOR >= 2:
                    from mcp import Client

                    async with Client(transport) as c:
                        return await body(c)
                from mcp import ClientSession

                async with transport as (r, w, _):
                    async with ClientSession(r, w) as s:
                        await s.initialize()
                        return await body(s)

    return anyio.run(main)


def exceptions_in(e):
    """`e`, the exceptions it groups and the ones it was raised from, depth first."""
    seen = []
    todo = [e]
    while todo:
        x = todo.pop()
        if x is None or any(x is y for y in seen):
            continue
        seen.append(x)
        todo.extend(getattr(x, "exceptions", ()))
        todo.extend([x.__cause__, x.__context__])
    return seen


# --- the tests --------------------------------------------------------------------------------


def test_discovery_documents_and_registration_are_what_the_sdk_needs(server):
    """The 401 challenge names the protected resource metadata and the scopes; both PRM URLs
    serve the same document, whose `resource` is the MCP URL (the SDK refuses a resource that
    is not the URL it was given or a parent of it); the RFC 8414 metadata names its issuer exactly
    as the PRM does (2.x compares them as strings) with absolute endpoint URLs; a registration
    echoes `redirect_uris` (1.x cannot parse a reply without them) and the auth method (without
    it neither SDK sends the secret), and a public client gets no secret."""
    for method, body in (("GET", None), ("POST", {"jsonrpc": "2.0", "id": 1, "method": "ping"})):
        r = request(method, server.url, body=body,
                    headers={"Accept": "application/json, text/event-stream"})
        assert r.status == 401, r
        c = challenge_params(r.headers["WWW-Authenticate"])
        assert c["realm"] == "capvault", c
        assert c["resource_metadata"] == server.base + "/.well-known/oauth-protected-resource/mcp"
        assert set(c["scope"].split()) == BOTH, c

    prm = request("GET", server.base + "/.well-known/oauth-protected-resource/mcp")
    assert prm.status == 200, prm
    root = request("GET", server.base + "/.well-known/oauth-protected-resource")
    assert root.status == 200 and root.json() == prm.json(), (prm, root)
    doc = prm.json()
    assert doc["resource"] == server.url, doc
    assert doc["authorization_servers"] == [server.base], doc
    assert set(doc["scopes_supported"]) == BOTH, doc
    assert doc["bearer_methods_supported"] == ["header"], doc

    asm = request("GET", server.base + "/.well-known/oauth-authorization-server")
    assert asm.status == 200, asm
    meta = asm.json()
    assert meta["issuer"] == doc["authorization_servers"][0] == server.base, meta
    for key, path in (("authorization_endpoint", "/oauth/authorize"),
                      ("token_endpoint", "/oauth/token"),
                      ("registration_endpoint", "/oauth/register"),
                      ("revocation_endpoint", "/oauth/revoke")):
        assert meta[key] == server.base + path, (key, meta)
    assert meta["code_challenge_methods_supported"] == ["S256"], meta
    assert {"authorization_code", "refresh_token"} <= set(meta["grant_types_supported"]), meta
    assert "code" in meta.get("response_types_supported", ["code"]), meta
    assert set(meta["token_endpoint_auth_methods_supported"]) == {
        "none", "client_secret_post", "client_secret_basic"}, meta

    # The SDK's own models and checks accept them.
    from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
    from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url

    parsed = ProtectedResourceMetadata.model_validate(doc)
    assert check_resource_allowed(resource_url_from_server_url(server.url), str(parsed.resource))
    OAuthMetadata.model_validate(meta)

    public = register(server)
    assert public["client_id"] and "client_secret" not in public, public
    assert public["redirect_uris"] == [REDIRECT], public
    assert public["token_endpoint_auth_method"] == "none", public
    confidential = register(server, token_endpoint_auth_method="client_secret_post")
    assert confidential["client_secret"], confidential
    assert confidential["token_endpoint_auth_method"] == "client_secret_post", confidential


def test_the_sdk_registers_consents_and_reads_and_writes(server):
    """A client the SDK registers itself (DCR, no auth method asked, so the RFC 7591 default,
    a confidential client), asking "vault:read vault:write" of a --write server, ends with a
    working session: it lists the tools, reads Home.md and creates a note that lands in the
    vault; its storage holds an access token good for an hour and a refresh token."""
    owner = Owner()
    storage = MemoryStorage()

    async def body(s):
        names = {t.name for t in (await s.list_tools()).tools}
        assert {"read_note", "create_note"} <= names, sorted(names)
        r, err, note = await call(s, "read_note", {"path": "Home.md"})
        assert not err, r
        assert "# Home" in note["content"], note
        r, err, made = await call(s, "create_note", {"path": "OAuth Made", "content": "granted\n"})
        assert not err, r
        return made

    run_oauth(server, body, owner, storage, scope="vault:read vault:write")
    with open(os.path.join(server.vault, "OAuth Made.md")) as f:
        assert f.read() == "granted\n"

    assert len(owner.asked) == 1, owner.asked
    asked = query_of(owner.asked[0])
    print("SDK authorization request:", {k: v for k, v in asked.items() if k != "code_challenge"})
    assert asked["code_challenge_method"] == "S256" and asked["resource"] == server.url, asked
    assert set(asked["scope"].split()) == BOTH, asked
    assert owner.back[0].get("iss") == server.base, owner.back

    t = storage.tokens
    assert t is not None and t.access_token and t.refresh_token, t
    assert t.token_type == "Bearer" and 3500 <= t.expires_in <= 3600, t
    info = storage.client_info
    assert info.client_id and info.client_secret, info
    assert info.token_endpoint_auth_method in ("client_secret_basic", "client_secret_post"), info
    server.secrets += [t.access_token, t.refresh_token, info.client_secret]


def test_a_read_only_grant_reads_but_its_write_is_refused_with_403(server):
    """The owner ticks "Allow reading only" (and again when the SDK, refused with 403
    `insufficient_scope`, comes back for vault:write): the token is scoped vault:read, the client
    reads, the write call fails (2.x raises an MCP error; 1.x's transport fails with the HTTP
    403) and the note is not in the vault. The same token by raw HTTP gets the 403 challenge
    naming vault:write."""
    owner = Owner(read_only=True)
    storage = MemoryStorage()
    seen = {}

    async def body(s):
        names = {t.name for t in (await s.list_tools()).tools}
        assert "read_note" in names and "create_note" not in names, sorted(names)
        r, err, note = await call(s, "read_note", {"path": "Home.md"})
        assert not err, r
        seen["read"] = note["content"]
        try:
            seen["written"] = await call(s, "create_note", {"path": "OAuth Refused", "content": "no\n"})
        except Exception as e:  # 2.x: the 403 surfaces as an MCP error on this call
            seen["refused"] = e

    try:
        run_oauth(server, body, owner, storage, token_endpoint_auth_method="none")
    except Exception as e:  # 1.x: the 403 fails the transport (httpx.HTTPStatusError)
        seen.setdefault("refused", e)
    assert "# Home" in seen.get("read", ""), seen
    assert "written" not in seen, seen["written"]
    assert "refused" in seen, seen
    if SDK_MAJOR >= 2:
        from mcp.shared.exceptions import MCPError

        assert isinstance(seen["refused"], MCPError), repr(seen["refused"])
    else:
        statuses = [getattr(getattr(x, "response", None), "status_code", None)
                    for x in exceptions_in(seen["refused"])]
        assert 403 in statuses, repr(seen["refused"])
    assert not os.path.exists(os.path.join(server.vault, "OAuth Refused.md"))

    # The SDK read the 403 challenge and asked again, for vault:write (step-up).
    print("authorization requests:", [query_of(u)["scope"] for u in owner.asked])
    assert len(owner.asked) == 2, owner.asked
    assert "vault:write" in query_of(owner.asked[1])["scope"].split(), owner.asked
    t = storage.tokens
    assert t.scope is not None and set(t.scope.split()) == {"vault:read"}, t
    server.secrets += [t.access_token, t.refresh_token]

    r = request("POST", server.url, headers={
        "Authorization": f"Bearer {t.access_token}", "Accept": "application/json, text/event-stream",
    }, body={"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "create_note", "arguments": {"path": "OAuth Refused", "content": "no\n"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
    assert r.status == 403, r
    c = challenge_params(r.headers["WWW-Authenticate"])
    assert c["error"] == "insufficient_scope" and "vault:write" in c["scope"].split(), c
    assert not os.path.exists(os.path.join(server.vault, "OAuth Refused.md"))


@pytest.fixture(scope="module")
def client(server):
    """A public client registered by raw HTTP, for the refusal tests."""
    return register(server)["client_id"]


def test_a_wrong_passphrase_gets_the_page_again_with_401_and_an_error(server, client):
    """A wrong passphrase: no redirect, no code, the page again with status 401, an `id="error"`
    saying the passphrase is wrong, the same `request` and a fresh `csrf`; the right passphrase
    on that page then gets the 303 with a code."""
    url = authorize_url(server, client, pkce()[1])
    via = opener(http.cookiejar.CookieJar())
    _, before, posted = submit(url, passphrase="not the passphrase", via=via)
    assert posted.status == 401, posted
    assert "Location" not in posted.headers, posted
    again = Page(posted.text)
    assert again.error is not None and "passphrase" in again.error.lower(), posted
    assert again.inputs["request"]["value"] == before.inputs["request"]["value"]
    assert again.inputs["csrf"]["value"] != before.inputs["csrf"]["value"]
    assert "passphrase" in again.inputs, posted
    # The re-rendered form works: the right passphrase on it, in the same browser, is a 303.
    fields = {"request": again.inputs["request"]["value"], "csrf": again.inputs["csrf"]["value"],
              "passphrase": PASSPHRASE, "decision": "allow"}
    r = request("POST", urllib.parse.urljoin(url, again.action), form=fields,
                headers={"Origin": server.base, "Referer": url}, via=via)
    assert r.status == 303, r
    assert query_of(r.headers["Location"]).get("code"), r


def test_the_owner_can_deny(server, client):
    """Deny: 303 back to the client with error=access_denied and the state, no code."""
    url = authorize_url(server, client, pkce()[1])
    _, _, posted = submit(url, decision="deny")
    assert posted.status == 303, posted
    back = query_of(posted.headers["Location"])
    assert posted.headers["Location"].startswith(REDIRECT), posted
    assert back.get("error") == "access_denied" and back.get("state") == query_of(url)["state"]
    assert "code" not in back, back


def test_authorization_without_s256_pkce_is_refused_by_redirect(server, client):
    """No code_challenge, or code_challenge_method=plain: a 303 to the (valid) redirect URI
    with error=invalid_request and the state, before any consent page."""
    verifier, challenge = pkce()
    for params in ({"code_challenge": None, "code_challenge_method": None},
                   {"code_challenge": verifier, "code_challenge_method": "plain"}):
        url = authorize_url(server, client, challenge, **params)
        r = request("GET", url)
        assert r.status == 303, (params, r)
        location = r.headers["Location"]
        assert location.startswith(REDIRECT), location
        back = query_of(location)
        assert back.get("error") == "invalid_request", location
        assert back.get("state") == query_of(url)["state"] and "code" not in back, location


def test_an_unknown_client_or_redirect_uri_gets_400_and_never_a_redirect(server, client):
    """An unregistered redirect URI or an unknown client_id: a 400 HTML page and no Location (an
    open redirector would hand the error, or a code, to whoever named the URI)."""
    challenge = pkce()[1]
    for url in (authorize_url(server, client, challenge, redirect_uri="http://127.0.0.1:8976/evil"),
                authorize_url(server, client, challenge, redirect_uri="https://attacker.example/cb"),
                authorize_url(server, "no-such-client", challenge)):
        r = request("GET", url)
        assert r.status == 400, (url, r)
        assert "Location" not in r.headers, r
        assert r.headers.get("Content-Type", "").startswith("text/html"), r


def test_a_code_works_once(server, client):
    """The code exchanges once (S256 verifier) for a Bearer token of an hour and a refresh
    token, sent with no-store; the redirect carried `iss` = the issuer; the second exchange of
    the same code is invalid_grant."""
    verifier, challenge = pkce()
    back = consent(authorize_url(server, client, challenge))
    assert back.get("iss") == server.base, back
    first = exchange(server, client, back["code"], verifier)
    assert first.status == 200, first
    assert "no-store" in first.headers.get("Cache-Control", ""), first
    t = first.json()
    server.secrets += [t["access_token"], t["refresh_token"]]
    assert t["token_type"].lower() == "bearer" and 3500 <= t["expires_in"] <= 3600, t
    assert t["refresh_token"] and set(t.get("scope", "vault:read vault:write").split()) == BOTH, t
    assert_invalid_grant(exchange(server, client, back["code"], verifier))


def test_a_replayed_refresh_token_revokes_its_family(server, client):
    """Refresh tokens rotate: the first refresh gives a new one; presenting the old one again
    is invalid_grant, and it revokes the family, so the newer one is refused as well."""
    verifier, challenge = pkce()
    back = consent(authorize_url(server, client, challenge))
    r = exchange(server, client, back["code"], verifier)
    assert r.status == 200, r
    old = r.json()["refresh_token"]
    r = refresh(server, client, old)
    assert r.status == 200, r
    new = r.json()
    assert new["access_token"] and new["refresh_token"] and new["refresh_token"] != old, new
    server.secrets += [old, new["refresh_token"], new["access_token"]]
    assert_invalid_grant(refresh(server, client, old))
    assert_invalid_grant(refresh(server, client, new["refresh_token"]))


def test_a_wrong_code_verifier_is_invalid_grant(server, client):
    """A code exchanged with a verifier that does not hash to its challenge: invalid_grant."""
    _, challenge = pkce()
    back = consent(authorize_url(server, client, challenge))
    other_verifier, _ = pkce()
    assert_invalid_grant(exchange(server, client, back["code"], other_verifier))
