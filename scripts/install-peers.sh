#!/usr/bin/env bash
# Installs the MCP servers that `scripts/bench-search.sh` compares capvault with, into
# target/peers/ (git-ignored, under target/). Idempotent: a peer already installed is left alone.
# Prints one line per peer saying what it did; a peer that cannot be installed is reported as
# "<peer>: install failed: <reason>" and the script goes on with the others (exit status 0, so the
# benchmark still runs and reports that peer as missing).
#
#   obsidian-mcp-rs      crates.io  cargo install --locked --root target/peers/cargo obsidian-mcp-rs
#   @bitbonsai/mcpvault  npm        npm install --prefix target/peers/npm @bitbonsai/mcpvault
#   some-vault-some-mcp  PyPI       python3 -m venv target/peers/venv; pip install some-vault-some-mcp
#
# Set PEERS_FORCE=1 to reinstall all three.
set -u
cd "$(dirname "$0")/.."
PEERS=target/peers
mkdir -p "$PEERS"
force="${PEERS_FORCE:-0}"

# Prints a peer's outcome and records it in target/peers/<peer>.status for the benchmark, which
# quotes it when the peer is missing.
say() { echo "$1: $2"; echo "$1: $2" >"$PEERS/$1.status"; }

# The last meaningful line of a failed command's output, as the reason.
reason() { grep -v '^\s*$' "$1" | tail -n 3 | tr '\n' ' ' | cut -c1-300; }

# --- obsidian-mcp-rs (Rust, crates.io) ---------------------------------------------------------
bin="$PEERS/cargo/bin/obsidian-mcp-rs"
if [[ -x "$bin" && "$force" != 1 ]]; then
    say obsidian-mcp-rs "already installed ($bin)"
else
    out="$PEERS/obsidian-mcp-rs.install.log"
    # Shares a build directory so a retry does not rebuild the dependencies.
    if CARGO_TARGET_DIR="$PEERS/cargo-build" cargo install --locked --root "$PEERS/cargo" obsidian-mcp-rs >"$out" 2>&1; then
        say obsidian-mcp-rs "installed with cargo install --locked ($bin)"
    elif CARGO_TARGET_DIR="$PEERS/cargo-build" cargo install --root "$PEERS/cargo" obsidian-mcp-rs >>"$out" 2>&1; then
        say obsidian-mcp-rs "installed with cargo install (without --locked: the locked build failed) ($bin)"
    else
        say obsidian-mcp-rs "install failed: $(reason "$out") (full log: $out)"
    fi
fi

# --- @bitbonsai/mcpvault (TypeScript, npm) -----------------------------------------------------
pkg="$PEERS/npm/node_modules/@bitbonsai/mcpvault/package.json"
if [[ -f "$pkg" && "$force" != 1 ]]; then
    say mcpvault "already installed ($(dirname "$pkg"))"
else
    out="$PEERS/mcpvault.install.log"
    if ! command -v npm >/dev/null; then
        say mcpvault "install failed: npm not found on PATH"
    elif npm install --no-audit --no-fund --prefix "$PEERS/npm" @bitbonsai/mcpvault >"$out" 2>&1 && [[ -f "$pkg" ]]; then
        say mcpvault "installed with npm ($(dirname "$pkg"))"
    else
        say mcpvault "install failed: $(reason "$out") (full log: $out)"
    fi
fi

# --- some-vault-some-mcp (Python, PyPI) --------------------------------------------------------
venv="$PEERS/venv"
if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -m pip show some-vault-some-mcp >/dev/null 2>&1 && [[ "$force" != 1 ]]; then
    say some-vault-some-mcp "already installed ($venv)"
else
    out="$PEERS/some-vault-some-mcp.install.log"
    if { [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"; } >"$out" 2>&1 \
        && "$venv/bin/python" -m pip install some-vault-some-mcp >>"$out" 2>&1; then
        say some-vault-some-mcp "installed with pip into $venv"
    else
        say some-vault-some-mcp "install failed: $(reason "$out") (full log: $out)"
    fi
fi
