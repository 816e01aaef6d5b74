"""capvault over Streamable HTTP, driven by the official MCP Python SDK's HTTP client (1.x speaks
2025-11-25 with sessions; 2.x speaks 2026-07-28, stateless). The binary runs
`serve --transport http --listen 127.0.0.1:0` on a copy of the example vault, with a token file
holding a read token and a write token; every read tool is called through the SDK and its
result validated against its output schema, and the token scopes are checked as a client sees
them.
"""

import os
import re
import shutil
import subprocess
import tempfile
import threading

import anyio
import jsonschema
import pytest

from test_sdk import BIN, CALLS, SDK_MAJOR, ROOT, call, dump, error_of, wait_ready

READ = "read-token-for-the-python-sdk-0123456789"
WRITE = "write-token-for-the-python-sdk-012345678"


@pytest.fixture(scope="module")
def server():
    tmp = tempfile.mkdtemp()
    vault = os.path.join(tmp, "vault")
    shutil.copytree(os.path.join(ROOT, "examples", "vault"), vault)
    tokens = os.path.join(tmp, "tokens")
    with open(tokens, "w") as f:
        f.write(f"{READ} read\n{WRITE} write\n")
    os.chmod(tokens, 0o600)
    state = os.path.join(tmp, "state")
    proc = subprocess.Popen(
        [BIN, "serve", vault, "--no-index-cache", "--transport", "http",
         "--listen", "127.0.0.1:0", "--token-file", tokens, "--write", "--state-dir", state],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={"CAPVAULT_LOG": "capvault=info", "PATH": os.environ.get("PATH", "")},
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
    yield url, vault, log
    proc.terminate()
    assert proc.wait(timeout=30) == 0, "".join(log[-20:])
    shutil.rmtree(tmp)


def run_http(url, token, body):
    """Connects with the SDK's Streamable HTTP client and `token` as the bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def main():
        from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

        transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
        if SDK_MAJOR >= 2:
            from mcp import Client

            async with Client(transport) as c:
                return await body(c, c.protocol_version)
        from mcp import ClientSession

        async with transport as (r, w, _):
            async with ClientSession(r, w) as s:
                init = await s.initialize()
                return await body(s, init.protocolVersion)

    return anyio.run(main)


def test_every_read_tool_over_http_matches_its_output_schema(server):
    url, _, _ = server

    async def body(s, negotiated):
        assert negotiated == ("2026-07-28" if SDK_MAJOR >= 2 else "2025-11-25")
        await wait_ready(s)
        tools = (await s.list_tools()).tools
        schemas = {t.name: dump(t)["outputSchema"] for t in tools}
        for name, args in CALLS:
            r, is_error, structured = await call(s, name, args)
            assert not is_error, (name, args, r)
            jsonschema.validate(structured, schemas[name], cls=jsonschema.Draft202012Validator)
        r, is_error, _ = await call(s, "read_note", {"path": "Nowhere.md"})
        assert is_error and error_of(r)["code"] == "not_found"
        return len(tools)

    n = run_http(url, READ, body)
    print(f"HTTP: {n} tools for a read token")
    assert n == 19


def test_a_read_token_lists_no_write_tool_and_a_write_token_writes(server):
    url, vault, _ = server

    async def read_body(s, _):
        names = {t.name for t in (await s.list_tools()).tools}
        assert "read_note" in names and "create_note" not in names and "edit_note" not in names
        return names

    run_http(url, READ, read_body)

    async def write_body(s, _):
        names = {t.name for t in (await s.list_tools()).tools}
        assert "create_note" in names
        r, is_error, structured = await call(s, "create_note", {"path": "From HTTP.md", "content": "hi\n"})
        assert not is_error, r
        return structured

    run_http(url, WRITE, write_body)
    with open(os.path.join(vault, "From HTTP.md")) as f:
        assert f.read() == "hi\n"


def test_no_or_a_wrong_token_is_refused_with_401(server):
    url, _, log = server
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "httpx", "version": "1"}}}
    head = {"Accept": "application/json, text/event-stream"}
    delete = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "delete_note", "arguments": {"path": "Home.md"}}}

    async def main():
        # The HTTP client the SDK itself uses (httpx in 1.x, its fork in 2.x).
        from mcp.client.streamable_http import create_mcp_http_client

        async with create_mcp_http_client() as http:
            r = await http.post(url, json=init, headers=head)
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
            wrong = {**head, "Authorization": "Bearer " + READ[:-1] + "?"}
            r = await http.post(url, json=init, headers=wrong)
            assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]
            r = await http.post(url, json=delete, headers={**head, "Authorization": f"Bearer {READ}"})
            assert r.status_code == 403 and 'scope="write"' in r.headers["www-authenticate"]

    anyio.run(main)
    assert not any(READ in line or WRITE in line for line in log), "a token in the log"


def test_a_note_changed_on_disk_is_notified_over_http(server):
    """2.x: `subscriptions/listen` on a stateless 2026-07-28 connection (the request's stream
    carries the notifications); 1.x: `resources/subscribe` in a 2025-11-25 session (its GET
    stream carries them)."""
    url, vault, _ = server
    note = os.path.join(vault, "Live over HTTP.md")
    with open(note, "w") as f:
        f.write("# Live\n")
    uri = "capvault:///Live%20over%20HTTP.md"
    headers = {"Authorization": f"Bearer {READ}"}

    def edit():
        with open(note, "w") as f:
            f.write("# Live\nedited\n")

    async def ready(s):
        await wait_ready(s)
        for _ in range(200):
            r, err, _ = await call(s, "read_note", {"path": "Live over HTTP.md"})
            if not err:
                return
            await anyio.sleep(0.05)
        raise AssertionError("the new note never appeared")

    async def main():
        from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

        transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
        if SDK_MAJOR >= 2:
            from mcp import Client
            from mcp.client.subscriptions import ResourceUpdated

            async with Client(transport) as c:
                assert c.protocol_version == "2026-07-28"
                await ready(c)
                async with c.listen(resource_subscriptions=[uri]) as sub:
                    assert list(sub.honored.resource_subscriptions or []) == [uri]
                    edit()
                    with anyio.fail_after(10):
                        event = await sub.__anext__()
                    assert isinstance(event, ResourceUpdated) and event.uri == uri, event
            return
        from mcp import ClientSession

        got = []
        arrived = anyio.Event()

        async def handler(message):
            m = getattr(message, "root", None)
            if getattr(m, "method", None) == "notifications/resources/updated":
                got.append(str(m.params.uri))
                arrived.set()

        async with transport as (r, w, _):
            async with ClientSession(r, w, message_handler=handler) as s:
                await s.initialize()
                await ready(s)
                await s.subscribe_resource(uri)
                edit()
                with anyio.fail_after(10):
                    await arrived.wait()
                assert got == [uri], got

    anyio.run(main)
