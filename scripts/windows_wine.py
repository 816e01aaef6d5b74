"""The Windows build, run here under Wine, through the official Python SDK (1.x).

    python3 -m venv target/py/mcp1 && target/py/mcp1/bin/pip install "mcp==1.30.0"
    rustup target add x86_64-pc-windows-gnu
    apt-get install gcc-mingw-w64-x86-64 wine64        # Debian
    cargo build --target x86_64-pc-windows-gnu --no-default-features --features pdf
    target/py/mcp1/bin/python scripts/windows_wine.py [path/to/capvault.exe]

Wine is not Windows: its files are Linux's underneath (a symlink is followed by Wine itself, so
the attack table means nothing here), and this proves only that the Windows binary starts,
serves a real session over stdio, that the write path of the portable capability layer
(`src/vault/sys/portable.rs`: hard link then unlink, check then rename) behaves through
Windows' own file API as Wine implements it, and that a PDF's text is read by the PDF worker
(a child process in a job object, `src/engine/pdf.rs`), a file that is not a PDF is reported and
the next PDF is read again. What it checks, it asserts; it prints each step.

Wine 8 (Debian 12) lacks `bcryptprimitives.dll`, which the Rust standard library's Windows
random numbers call (`ProcessPrng`): the script builds a stand-in with mingw into its own Wine
prefix, forwarding to `RtlGenRandom`.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parent.parent
EXE = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "target/x86_64-pc-windows-gnu/debug/capvault.exe"
WINE = shutil.which("wine64") or "/usr/lib/wine/wine64"

PRNG_STUB = r"""
#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG len);
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len) {
        ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!SystemFunction036(data, n)) return FALSE;
        data += n; len -= n;
    }
    return TRUE;
}
"""


def prefix(tmp: Path) -> dict:
    """A Wine prefix of its own, with the `ProcessPrng` stand-in when Wine has none."""
    env = dict(os.environ, WINEPREFIX=str(tmp / "wine"), WINEDEBUG="-all")
    subprocess.run([WINE, "cmd", "/c", "exit"], env=env, check=True, capture_output=True)
    system32 = tmp / "wine/drive_c/windows/system32"
    if not (system32 / "bcryptprimitives.dll").exists():
        src = tmp / "prng.c"
        src.write_text(PRNG_STUB)
        subprocess.run(
            ["x86_64-w64-mingw32-gcc", "-shared", "-o", str(system32 / "bcryptprimitives.dll"),
             str(src), "-ladvapi32"],
            check=True,
        )
    return env


def sample_pdf(text: str) -> bytes:
    """A one-page PDF whose page shows `text` in Helvetica, with a correct cross-reference table."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        "/Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R >>",
        f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for i, body in enumerate(objects):
        offsets.append(len(out))
        out += f"{i + 1} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for o in offsets:
        out += f"{o:010} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def step(text):
    print(f"--- {text}", flush=True)


async def session(env, vault: Path, state: Path):
    params = StdioServerParameters(
        command=WINE,
        args=[str(EXE), "serve", str(vault), "--write", "--state-dir", str(state),
              "--no-index-cache", "--no-watch"],
        env={**env, "CAPVAULT_LOG": "capvault=warn"},
    )
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            init = await s.initialize()
            step(f"initialize: {init.serverInfo.name} {init.serverInfo.version}, "
                 f"protocol {init.protocolVersion}")
            tools = (await s.list_tools()).tools
            names = {t.name for t in tools}
            step(f"tools/list: {len(tools)} tools")
            assert {"read_note", "search_notes", "create_note", "move_note"} <= names

            async def call(name, args):
                r = await s.call_tool(name, args)
                return r.isError, r.structuredContent, r

            for _ in range(400):
                _, info, _ = await call("vault_info", {})
                if info["index"]["state"] == "ready":
                    break
                await anyio.sleep(0.05)
            step(f"vault_info: {info['notes']} notes, index {info['index']['state']}")
            assert info["notes"] >= 10

            (vault / "Docs").mkdir(exist_ok=True)
            (vault / "Docs/plan.pdf").write_bytes(sample_pdf("The zebra migration starts in May"))
            (vault / "Docs/garbage.pdf").write_bytes(b"%PDF-1.4 this is not a PDF")
            err, pdf, r = await call("read_attachment", {"path": "Docs/plan.pdf"})
            text = " ".join(c.text for c in r.content if c.type == "text")
            assert not err and "zebra migration" in text, r
            step("read_attachment Docs/plan.pdf: its text, read by the PDF worker")
            err, _, r = await call("read_attachment", {"path": "Docs/garbage.pdf"})
            text = " ".join(c.text for c in r.content if c.type == "text")
            assert "zebra" not in text, r
            step(f"read_attachment Docs/garbage.pdf: reported ({text[:70]}...)")
            err, _, r = await call("read_attachment", {"path": "Docs/plan.pdf"})
            text = " ".join(c.text for c in r.content if c.type == "text")
            assert not err and "zebra migration" in text, r
            step("read_attachment Docs/plan.pdf again: read")

            err, hits, _ = await call("search_notes", {"query": "garden compost", "limit": 3})
            assert not err and hits["hits"], hits
            step(f"search_notes: first hit {hits['hits'][0]['path']}")

            err, note, _ = await call("read_note", {"path": "Home.md"})
            assert not err and "Home" in note["content"], note
            step("read_note Home.md: read")

            for bad in ["../outside.md", ".obsidian/app.json", "C:/Windows/win.ini",
                        "Projects\\..\\..\\outside.md", "Home.md:stream"]:
                err, _, r = await call("read_note", {"path": bad})
                assert err, f"{bad} was not refused"
                step(f"read_note {bad!r}: refused ({r.content[0].text[:70]}...)")

            err, made, _ = await call("create_note", {"path": "Wine/New.md", "content": "# New\n"})
            assert not err, made
            assert (vault / "Wine/New.md").read_text() == "# New\n"
            step("create_note Wine/New.md: on disk")

            err, _, r = await call("create_note", {"path": "Wine/New.md", "content": "again"})
            assert err and (vault / "Wine/New.md").read_text() == "# New\n"
            step(f"create_note over it: refused ({r.content[0].text[:60]}...)")

            err, edited, _ = await call("edit_note", {
                "path": "Wine/New.md", "edits": [{"old_text": "# New", "new_text": "# Newer"}],
                "if_match": made["sha256"]})
            assert not err, edited
            assert (vault / "Wine/New.md").read_text() == "# Newer\n"
            step("edit_note with if_match: on disk")

            (vault / "Wine/Taken.md").write_text("taken\n")
            err, _, r = await call("move_note", {"from": "Wine/New.md", "to": "Wine/Taken.md"})
            assert err and (vault / "Wine/Taken.md").read_text() == "taken\n"
            step(f"move_note onto an existing note: refused, nothing replaced")

            err, moved, _ = await call("move_note", {"from": "Wine/New.md", "to": "Wine/Moved.md"})
            assert not err, moved
            assert not (vault / "Wine/New.md").exists()
            assert (vault / "Wine/Moved.md").read_text() == "# Newer\n"
            step("move_note (hard link, then unlink): moved")

            (vault / "Archive").mkdir()
            err, _, r = await call("move_note", {"from": "Wine", "to": "Archive"})
            assert err and (vault / "Wine/Moved.md").exists()
            step("move a folder onto an existing folder: refused")
            err, moved, _ = await call("move_note", {"from": "Wine", "to": "Archived Wine"})
            assert not err, moved
            assert (vault / "Archived Wine/Moved.md").read_text() == "# Newer\n"
            step("move a folder (check, then rename): moved")

            err, gone, _ = await call("delete_note", {"path": "Archived Wine/Moved.md"})
            assert not err, gone
            assert not (vault / "Archived Wine/Moved.md").exists()
            assert (vault / gone["trashed_to"]).read_text() == "# Newer\n"
            step(f"delete_note: into Obsidian's trash ({gone['trashed_to']})")

            err, back, _ = await call("restore_note", {"path": "Archived Wine/Moved.md",
                                                        "sha256": gone["sha256"]})
            assert not err, back
            assert (vault / "Archived Wine/Moved.md").read_text() == "# Newer\n"
            step("restore_note: back from the history")


def main():
    assert EXE.exists(), f"no {EXE}: build it first (see this file's docs)"
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        env = prefix(tmp)
        version = subprocess.run([WINE, str(EXE), "--version"], env=env, check=True,
                                 capture_output=True, text=True).stdout.strip()
        step(f"{EXE.name} --version: {version} (Wine: "
             f"{subprocess.run([WINE, '--version'], capture_output=True, text=True).stdout.strip()})")
        demo = subprocess.run([WINE, str(EXE), "demo"], env=env, check=True,
                              capture_output=True, text=True).stdout
        assert '"name": "capvault"' in demo and "refused" in demo
        step(f"demo: {len(demo.splitlines())} lines, the handshake and the refused escapes")
        vault = tmp / "vault"
        shutil.copytree(ROOT / "examples/vault", vault)
        anyio.run(session, env, vault, tmp / "state")
    print("windows under wine: every check passed")


if __name__ == "__main__":
    main()
