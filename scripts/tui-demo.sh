#!/usr/bin/env bash
# Runs `apollo tui` inside tmux against a live server with sample jobs,
# waits until the dashboard shows rows, and prints the captured screen.
#
#   scripts/tui-demo.sh [OUT_FILE]      (default: tui-screen.txt)
#
# It uses `apollo demo` when the binary has it, and otherwise `apollo
# server --jobs` with a small jobs file of its own. Needs tmux and Go.
# Environment: TUI_COLS, TUI_ROWS (default 120x40), TUI_TAB (1-5, the tab
# to capture; default 1), TUI_PORT (default: a free port), TUI_SETTLE
# (seconds to let more runs arrive before the capture; default 6).
set -euo pipefail

out=${1:-tui-screen.txt}
cols=${TUI_COLS:-120}
rows=${TUI_ROWS:-40}
tab=${TUI_TAB:-1}
port=${TUI_PORT:-}
session="apollo-tui-demo-$$"
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
server_pid=""

cleanup() {
	tmux kill-session -t "$session" 2>/dev/null || true
	if [ -n "$server_pid" ]; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

command -v tmux >/dev/null || { echo "tui-demo: tmux is needed (apt-get install tmux)" >&2; exit 1; }

echo "tui-demo: building apollo" >&2
(cd "$root" && go build -o "$work/apollo" ./cmd/apollo)
apollo="$work/apollo"

# A free port: nothing answers on it now.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if [ -z "$port" ]; then
	for _ in $(seq 1 50); do
		port=$((20000 + RANDOM % 20000))
		port_free "$port" && break
	done
fi
port_free "$port" || { echo "tui-demo: port $port is taken" >&2; exit 1; }
url="http://127.0.0.1:$port"

if "$apollo" demo --help >/dev/null 2>&1; then
	"$apollo" demo --listen "127.0.0.1:$port" --data "$work/data" >"$work/server.log" 2>&1 &
else
	cat >"$work/jobs.yaml" <<'JOBS'
defaults:
  timeout: 30s
jobs:
  - name: batch_orders
    schedule: "@every 2s"
    shell: "sleep 0.3"
  - name: batch_invoices
    schedule: "@every 3s"
    shell: "sleep 0.5; test $(( $(date +%s%N) / 1000000 % 4 )) -ne 0"
  - name: etl_sales
    schedule: "@every 5s"
    shell: "sleep 1.2"
  - name: report_daily
    schedule: "@every 7s"
    shell: "sleep 0.2; exit 1"
  - name: cleanup_tmp
    schedule: "@every 4s"
    shell: "true"
JOBS
	"$apollo" server --listen "127.0.0.1:$port" --data "$work/data" --jobs "$work/jobs.yaml" >"$work/server.log" 2>&1 &
fi
server_pid=$!

ready=""
for _ in $(seq 1 100); do
	kill -0 "$server_pid" 2>/dev/null || { echo "tui-demo: the server exited:" >&2; cat "$work/server.log" >&2; exit 1; }
	curl -fsS "$url/readyz" >/dev/null 2>&1 && { ready=1; break; }
	sleep 0.1
done
[ -n "$ready" ] || { echo "tui-demo: the server did not get ready:" >&2; cat "$work/server.log" >&2; exit 1; }

tmux new-session -d -s "$session" -x "$cols" -y "$rows" \
	"TERM=xterm-256color $apollo tui --server $url; sleep 30"

# Rows have come when the health board (the first tab) shows a verdict
# under its title.
rowstart='^(ok|failing|timing out|running too long|late|no recent runs|success|running|failed|pending) '
for _ in $(seq 1 150); do
	if tmux capture-pane -p -t "$session" | grep -Eq "$rowstart"; then
		break
	fi
	sleep 0.2
done
if [ "$tab" != 1 ]; then
	tmux send-keys -t "$session" "$tab"
fi
# Let the jobs' metrics and a few more runs arrive.
sleep "${TUI_SETTLE:-6}"
tmux capture-pane -p -t "$session" >"$out"
cat "$out"
if ! grep -Eq "$rowstart|batch_" "$out"; then
	echo "tui-demo: the dashboard showed no rows; server log:" >&2
	tail -20 "$work/server.log" >&2
	exit 1
fi
