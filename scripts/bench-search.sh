#!/usr/bin/env bash
# Search, side by side with other Obsidian MCP servers. One command:
#
#   scripts/bench-search.sh                  # generated vaults of 1,000 and 10,000 notes
#   scripts/bench-search.sh 100000           # one generated size (1000, 10000, 100000, any N)
#   scripts/bench-search.sh 1000,10000       # several sizes
#   scripts/bench-search.sh ../shared/vaults/obsidian-hub   # a real vault
#
# Installs the peers into target/peers/ when missing (scripts/install-peers.sh), then runs
# benches/search.rs through `cargo bench`, which builds capvault in release mode. Options are
# environment variables read by the bench (see the top of benches/search.rs), for example
# CAPVAULT_BENCH_RUNS=5 or CAPVAULT_BENCH_SERVERS=capvault,mcpvault. Prints Markdown tables;
# the full output is also kept in target/bench-search/last-run.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

arg="${1:-}"
if [[ -z "$arg" ]]; then
    export CAPVAULT_BENCH_SIZES="${CAPVAULT_BENCH_SIZES:-1000,10000}"
elif [[ "$arg" =~ ^[0-9]+(,[0-9]+)*$ ]]; then
    export CAPVAULT_BENCH_SIZES="$arg"
    unset CAPVAULT_BENCH_VAULT
elif [[ -d "$arg" ]]; then
    export CAPVAULT_BENCH_VAULT="$(cd "$arg" && pwd)"
else
    echo "usage: $0 [N[,N...] | /path/to/vault]   (no such folder: $arg)" >&2
    exit 2
fi

echo "== peers"
scripts/install-peers.sh
echo
echo "== benchmark ($(date -u +%Y-%m-%dT%H:%MZ), $(git describe --always --dirty 2>/dev/null || echo '?'))"
mkdir -p target/bench-search
cargo bench --bench search 2> >(grep --line-buffered -v '^\s*\(Compiling\|Finished\|Running\)' >&2) | tee target/bench-search/last-run.txt
