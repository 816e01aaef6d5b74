#!/usr/bin/env bash
# The MCP Inspector CLI (the official TypeScript SDK's client) against the binary `cargo test`
# built, as a user tries a server from a shell: tools/list must carry no schema the SDK warns about
# (it printed dozens of `unknown format "uint"` lines before), and `--tool-arg limit=2`, which it
# sends as the string "2", must work. Prints one `N passed, N failed` line.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${CAPVAULT_BIN:-$PWD/target/debug/capvault}"
dir=target/inspector
if ! command -v npm >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
fi
# Pinned: a new release changes this run only when the pin here moves.
inspector_version=0.15.0
if [ ! -x "$dir/node_modules/.bin/mcp-inspector" ] ||
   ! grep -q "\"version\": \"$inspector_version\"" "$dir/node_modules/@modelcontextprotocol/inspector/package.json" 2>/dev/null; then
  mkdir -p "$dir"
  (cd "$dir" && npm install --silent --no-audit --no-fund --save-exact \
    "@modelcontextprotocol/inspector@$inspector_version" >/dev/null)
fi
inspector="$dir/node_modules/.bin/mcp-inspector"
vault=$(mktemp -d)
cp -r examples/vault/. "$vault"
passed=0 failed=0
check() { # name, command...; the command's exit status decides
  local name="$1"; shift
  if "$@"; then passed=$((passed + 1)); echo "ok: $name"; else failed=$((failed + 1)); echo "FAILED: $name"; fi
}
run() { timeout 60 "$inspector" --cli "$bin" serve "$vault" --no-index-cache "$@"; }
run --method tools/list > "$dir/list.out" 2> "$dir/list.err" || true
check "tools/list lists 19 tools" test "$(grep -c '"name": "' "$dir/list.out" | tr -d ' ')" -ge 19
check "no schema warnings" bash -c "! grep -qi 'unknown format' '$dir/list.out' '$dir/list.err'"
run --method tools/call --tool-name list_notes --tool-arg limit=2 > "$dir/call.out" 2> "$dir/call.err" || true
check "limit=2 sent as a string lists two notes" \
  bash -c "grep -q '\"total\": 14' '$dir/call.out' && test \$(grep -c '\"path\": ' '$dir/call.out') -ge 2 && ! grep -q '\"isError\": true' '$dir/call.out'"
run --method tools/call --tool-name read_note --tool-arg path=Nowhere > "$dir/err.out" 2> "$dir/err.err" || true
check "a miss is a not_found tool error" grep -q 'not_found: Nowhere' "$dir/err.out"
rm -rf "$vault"
echo "inspector: ${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
