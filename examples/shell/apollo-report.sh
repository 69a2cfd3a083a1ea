#!/bin/sh
# apollo-report.sh: report task runs to Apollo-11 with POSIX sh and curl.
#
# It follows docs/protocol.md: one JSON event per lifecycle step, POSTed to
# /api/v1/events. Resending is always safe, so what the server could not
# take (network error, 5xx, 429) is sent again after Retry-After or a
# growing wait.
#
# Usage:
#   apollo-report.sh [OPTIONS] report --task ID --status STATUS [--name JOB]
#       [--seq N] [--timeout SECS] [--cost SECS] [--scheduled-at UNIX_SECS]
#       [--extra KEY=VALUE]...
#   apollo-report.sh [OPTIONS] run --name JOB [--task ID] [--timeout SECS]
#       [--start-wait SECS] -- COMMAND [ARGS...]
#
# Examples:
#   apollo-report.sh report --task backup-20261129 --name nightly_backup --status running
#   apollo-report.sh report --task backup-20261129 --status success --extra rows=1200
#   apollo-report.sh run --name nightly_backup --timeout 7200 -- /usr/local/bin/backup --full
#
# OPTIONS (or the environment):
#   --server URL           $APOLLO_SERVER, else http://127.0.0.1:1969
#   --token SECRET         $APOLLO_TOKEN; handed to curl on stdin, never on its command line
#   --give-up-after SECS   keep retrying one request this long (default 60)
#
# report: exit 0 when stored (or the server already had it), 1 when not
# delivered, 2 when rejected by the server or the arguments are wrong.
# run: reports running, runs the command, reports success or failed with
# its exit code, and exits with the command's own code.

set -u

server=${APOLLO_SERVER:-http://127.0.0.1:1969}
token=${APOLLO_TOKEN:-}
give_up_after=60
me=apollo-report

say() { printf '%s: %s\n' "$me" "$*" >&2; }
usage() { # [EXIT CODE]
	sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2
	exit "${1:-2}"
}
die_usage() { say "$*"; exit 2; }

# now_ms prints the time in Unix milliseconds. %N is GNU and busybox;
# where date lacks it, whole seconds are padded with zeros.
now_ms() {
	t=$(date +%s%3N)
	case $t in *[!0-9]*) t=$(date +%s)000 ;; esac
	printf '%s\n' "$t"
}

# step_seq STATUS prints the default sequence of a step: its place in a
# run, as `apollo report` numbers it.
step_seq() {
	case $1 in
	pending) echo 1 ;;
	running) echo 2 ;;
	manual_blocked) echo 3 ;;
	*) echo 4 ;;
	esac
}

# json_str prints $1 as a JSON string, as the server, the Go SDK and the
# Python example keep it: '"', '\' and control characters (tabs and line
# ends too) escaped, so that "a<TAB>b" and "a b" stay two task IDs. The
# "." after $1 keeps a line end at its end from being lost on the way.
json_str() {
	printf '%s.' "$1" | LC_ALL=C awk '
	BEGIN {
		for (i = 1; i < 32; i++) esc[sprintf("%c", i)] = sprintf("\\u%04x", i)
		esc["\""] = "\\\""; esc["\\"] = "\\\\"; esc["\t"] = "\\t"; esc["\r"] = "\\r"
		printf "\""
	}
	# Written piece by piece, never built up: a value of 100 KiB of quotes
	# takes a moment with any awk.
	function put(line,   n, i, j, c) {
		n = length(line); j = 1
		for (i = 1; i <= n; i++) {
			c = substr(line, i, 1)
			if (c in esc) {
				printf "%s%s", substr(line, j, i - j), esc[c]
				j = i + 1
			}
		}
		printf "%s", substr(line, j)
	}
	NR > 1 { put(last); printf "\\n" }
	{ last = $0 }
	END { put(substr(last, 1, length(last) - 1)); printf "\"" }'
}

is_uint() { case $1 in '' | *[!0-9]*) return 1 ;; esac; }

# secs CMD FLAG VALUE sets $n to VALUE, whole seconds, without leading
# zeros (the shell's arithmetic reads 010 as octal, and 09 not at all), or
# refuses it: more than 12 digits would wrap around in milliseconds, and
# the server would be sent a negative number.
secs() {
	is_uint "$3" || die_usage "$1: $2 $3 is not a whole number of seconds"
	n=${3#"${3%%[!0]*}"}
	[ ${#n} -le 12 ] || die_usage "$1: $2 $3 is too large (whole seconds, at most 12 digits)"
	n=${n:-0}
}

# event TASK NAME SEQ STATUS TS TIMEOUT_MS COST_MS SCHEDULED_MS EXTRA_JSON
# prints one event object; empty or 0 optional fields are left out.
event() {
	e="{\"taskID\":$(json_str "$1")"
	[ -n "$2" ] && e="$e,\"name\":$(json_str "$2")"
	e="$e,\"sequence\":$3,\"status\":\"$4\",\"ts\":$5"
	[ "${6:-0}" != 0 ] && e="$e,\"timeoutMs\":$6"
	[ -n "$7" ] && e="$e,\"costMs\":$7"
	[ "${8:-0}" != 0 ] && e="$e,\"scheduledAt\":$8"
	[ -n "$9" ] && e="$e,\"extra\":{$9}"
	printf '%s}\n' "$e"
}

work=$(mktemp -d "${TMPDIR:-/tmp}/apollo-report.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# post BODY: one request. Sets $code (000 when the server was not reached),
# leaves the answer in $work/answer and the headers in $work/headers.
post() {
	printf '%s' "$1" >"$work/body"
	# The token goes to curl as a config line on stdin, so that it never
	# shows in the process list.
	if [ -n "$token" ]; then
		printf 'header = "Authorization: Bearer %s"\n' "$token"
	fi | curl -sS -K - -X POST "$server/api/v1/events" \
		-H 'Content-Type: application/json' -H 'User-Agent: apollo-report-sh/1' \
		--data-binary "@$work/body" --max-time 10 \
		-D "$work/headers" -o "$work/answer" -w '%{http_code}' >"$work/code" 2>"$work/curl-error"
	code=$(cat "$work/code")
	[ -n "$code" ] || code=000
}

# field NAME prints a top-level number of the answer (accepted, rejected...).
field() { sed -n "s/.*\"$1\": *\([0-9][0-9]*\).*/\1/p" "$work/answer" | head -n 1; }

# messages prints the error messages of the answer, one per line:
# "FIELD: MESSAGE (HINT)", without the parts an error leaves out. It reads
# the JSON strings whole, escapes included: a reason that quotes a value
# ("\"..\" cannot be named in a URL") or holds a brace is printed as the
# server wrote it.
messages() {
	LC_ALL=C awk '
	{ text = text $0 "\n" }
	function hex(h,   k, d) {
		d = 0
		for (k = 1; k <= 4; k++) d = d * 16 + index("0123456789abcdef", tolower(substr(h, k, 1))) - 1
		return d
	}
	function say(d,   line) {
		line = msg[d]
		if (fld[d] != "") line = fld[d] ": " line
		if (hnt[d] != "") line = line " (" hnt[d] ")"
		print line
	}
	END {
		n = length(text); d = 0; key = ""
		for (i = 1; i <= n; i++) {
			c = substr(text, i, 1)
			if (c == "{") {
				d++; fld[d] = ""; msg[d] = ""; hnt[d] = ""; has[d] = 0
			} else if (c == "}") {
				if (d > 0 && has[d]) say(d)
				if (d > 0) d--
			} else if (c == "\"") {
				s = ""
				for (i++; i <= n; i++) {
					c = substr(text, i, 1)
					if (c == "\"") break
					if (c != "\\") { s = s c; continue }
					e = substr(text, ++i, 1)
					if (e == "u") {
						u = hex(substr(text, i + 1, 4)); i += 4
						s = s (u >= 32 && u < 127 ? sprintf("%c", u) : u < 32 ? " " : "\\u" substr(text, i - 3, 4))
					} else if (index("bfnrt", e)) {
						s = s " "
					} else {
						s = s e
					}
				}
				for (j = i + 1; substr(text, j, 1) ~ /[ \t\r\n]/; j++) {}
				if (substr(text, j, 1) == ":") {
					key = s; i = j
					continue
				}
				if (key == "field") fld[d] = s
				if (key == "hint") hnt[d] = s
				if (key == "message") { msg[d] = s; has[d] = 1 }
				key = ""
			}
		}
	}' "$work/answer"
}

# send BODY [GIVE_UP_AFTER]: delivers one request (one event, or an array)
# until every event in it has a final answer. Returns 0 when all were
# stored or already there, 1 when it gave up, 2 when any was rejected.
send() {
	started=$(date +%s)
	limit=${2:-$give_up_after}
	backoff=1
	while :; do
		post "$1"
		case $code in
		2??)
			rejected=$(field rejected)
			if [ -z "$rejected" ]; then
				problem="HTTP $code without per-event results (is this Apollo-11?)"
			elif [ "$rejected" != 0 ]; then
				messages | while IFS= read -r m; do say "rejected, not resent: $m"; done
				return 2
			else
				return 0
			fi
			;;
		000) problem="server unreachable ($(tail -n 1 "$work/curl-error"))" ;;
		408 | 429 | 5??) problem="HTTP $code $(messages | head -n 1)" ;;
		*)
			say "the server refused the request: HTTP $code: $(messages | head -n 1)"
			return 2
			;;
		esac
		# Wait as long as the server asked (Retry-After, in seconds), or a
		# backoff of 1, 2, 4 ... 30 seconds with jitter, whichever is longer.
		after=$(sed -n 's/^[Rr]etry-[Aa]fter: *\([0-9][0-9]*\).*/\1/p' "$work/headers" 2>/dev/null | head -n 1)
		wait=$(awk -v b="$backoff" -v seed="$$$(date +%s)" 'BEGIN { srand(seed); w = int(b / 2 + rand() * (b / 2 + 1)); print (w < 1 ? 1 : w) }')
		if is_uint "${after:-}" && [ "$after" -gt "$wait" ]; then wait=$after; fi
		if [ $(($(date +%s) + wait - started)) -gt "$limit" ]; then
			say "gave up after ${limit}s: $problem"
			return 1
		fi
		say "$problem; retrying in ${wait}s"
		sleep "$wait"
		backoff=$((backoff * 2))
		[ "$backoff" -gt 30 ] && backoff=30
	done
}

# extra_pair KEY=VALUE prints "KEY":"VALUE" for the extra object.
extra_pair() {
	case $1 in
	?*=*) printf '%s:%s' "$(json_str "${1%%=*}")" "$(json_str "${1#*=}")" ;;
	*) die_usage "--extra $1: write key=value" ;;
	esac
}

cmd_report() {
	task='' name='' status='' seq='' timeout=0 cost='' scheduled=0 extra=''
	while [ $# -gt 0 ]; do
		[ $# -ge 2 ] || die_usage "$1 needs a value"
		case $1 in
		--task) task=$2 ;;
		--name) name=$2 ;;
		--status) status=$2 ;;
		--seq) seq=$2 ;;
		--timeout) timeout=$2 ;;
		--cost) cost=$2 ;;
		--scheduled-at) scheduled=$2 ;;
		--extra) extra="$extra${extra:+,}$(extra_pair "$2")" || exit 2 ;;
		*) die_usage "report: unknown option $1" ;;
		esac
		shift 2
	done
	[ -n "$task" ] || die_usage "report: --task is required"
	case $status in
	pending | running | success | failed | timeout | manual_blocked) ;;
	*) die_usage "report: --status must be pending, running, success, failed, timeout or manual_blocked" ;;
	esac
	is_uint "${seq:-0}" || die_usage "report: --seq $seq is not a whole number"
	# JSON has no leading zeros: 007 is sent as 7 (and 000 as 0).
	if [ -n "$seq" ]; then
		seq=${seq#"${seq%%[!0]*}"}
		seq=${seq:-0}
	fi
	secs report --timeout "$timeout"
	timeout=$n
	secs report --scheduled-at "$scheduled"
	scheduled=$n
	if [ -n "$cost" ]; then
		secs report --cost "$cost"
		cost=$n
	fi
	# Without --seq, the step's place in a run, as `apollo report` numbers
	# it: a run's steps reported in order need no counter, a step reported
	# twice is a duplicate, and a run reported only by its end is a finished
	# run with an unknown start.
	[ -n "$seq" ] || seq=$(step_seq "$status")
	send "$(event "$task" "$name" "$seq" "$status" "$(now_ms)" $((timeout * 1000)) \
		"${cost:+$((cost * 1000))}" $((scheduled * 1000)) "$extra")"
	rc=$?
	if [ $rc = 0 ]; then
		if [ "$(field duplicate)" = 1 ]; then
			echo "duplicate (the server already had it)"
		elif [ "$(field waiting)" = 1 ]; then
			echo "waiting (stored; an earlier event of this run has not arrived: it applies when that does, or when the reorder window ends)"
		else
			echo accepted
		fi
	fi
	return $rc
}

cmd_run() {
	name='' task='' timeout=0 start_wait=5
	while [ $# -gt 0 ]; do
		case $1 in
		--) shift; break ;;
		--name | --task | --timeout | --start-wait) [ $# -ge 2 ] || die_usage "$1 needs a value" ;;
		esac
		case $1 in
		--name) name=$2 ;;
		--task) task=$2 ;;
		--timeout) timeout=$2 ;;
		--start-wait) start_wait=$2 ;;
		*) die_usage "run: unknown option $1 (the command goes after --)" ;;
		esac
		shift 2
	done
	[ -n "$name" ] || die_usage "run: --name is required"
	[ $# -gt 0 ] || die_usage "run: no command (write it after --)"
	secs run --timeout "$timeout"
	timeout=$n
	secs run --start-wait "$start_wait"
	start_wait=$n
	started_ms=$(now_ms)
	[ -n "$task" ] || task="$name@sh-$started_ms-$$"

	# running, then the command. The job must not wait long for monitoring:
	# if the server does not take the event within --start-wait seconds, it
	# goes again with the end, in one request, so the order stays right.
	# (A start the server rejected is not sent again: send said why.)
	running=$(event "$task" "$name" 1 running "$started_ms" $((timeout * 1000)) '' 0 '')
	pending_start=''
	send "$running" "$start_wait"
	if [ $? = 1 ]; then
		pending_start="$running,"
		say "the start of $task was not reported; it goes with the end"
	fi
	# Ctrl-C reaches the command directly (same process group); the shell
	# only notes it and reports the end once the command has exited.
	trap ':' INT TERM
	APOLLO_TASK_ID=$task APOLLO_JOB_NAME=$name "$@"
	rc=$?
	trap 'exit 130' INT
	trap 'exit 143' TERM
	ended_ms=$(now_ms)
	cost=$((ended_ms - started_ms))
	host=$(hostname 2>/dev/null || uname -n)
	extra="\"exitCode\":$rc,\"host\":$(json_str "$host")"
	# The clock stepped back while the command ran: the cost is not known
	# (a negative one would have the end rejected).
	if [ "$cost" -ge 0 ]; then
		extra="$extra,\"durationMs\":$cost"
	else
		cost=''
	fi
	status=success
	if [ $rc -ne 0 ]; then
		status=failed
		[ $rc -gt 128 ] && extra="$extra,\"signal\":$((rc - 128))"
	fi
	send "[$pending_start$(event "$task" "$name" 2 "$status" "$ended_ms" 0 "$cost" 0 "$extra")]"
	[ $? = 1 ] && say "the end of $task ($status) was not reported"
	return $rc
}

while [ $# -gt 0 ]; do
	case $1 in
	--server) [ $# -ge 2 ] || die_usage "--server needs a value"; server=${2%/}; shift 2 ;;
	--token) [ $# -ge 2 ] || die_usage "--token needs a value"; token=$2; shift 2 ;;
	--give-up-after) is_uint "${2:-}" || die_usage "--give-up-after takes whole seconds"; give_up_after=$2; shift 2 ;;
	-h | --help) usage 0 ;;
	*) break ;;
	esac
done
command -v curl >/dev/null 2>&1 || { say "curl is not installed"; exit 1; }
# No HTTP header carries a control character: the server would refuse
# every request as malformed, without a word of the token.
case $token in
*[[:cntrl:]]*) die_usage "the token holds a control character; a line end read with it from a file? remove it" ;;
esac
case ${1:-} in
report) shift; cmd_report "$@" ;;
run) shift; cmd_run "$@" ;;
*) usage ;;
esac
