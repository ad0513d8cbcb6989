#!/usr/bin/env bash
# tests/check_tour.sh: runs README.md's tours as a newcomer would and checks that they print
# exactly what README.md shows. In the sections "A short tour from the shell" and "The same
# from C", every fenced line "$ COMMAND" is run (in a temporary folder, with `ta` being
# tileatom-cli on a private daemon's socket in place of /tmp/ta.sock) and its stdout is
# compared with the lines below it up to the next command or the fence; stderr must stay
# empty. The C tour's `cc` line is not run (it needs the installed library): `./tour` is
# the build tree's doc/examples/tour, compiled from the same file by `make`. Run from the
# top build folder (as `make check` does); srcdir points at the sources.
set -u
srcdir=${srcdir:-$(dirname "$0")/..}
build=$(pwd)
readme="$srcdir/README.md"
daemon="$build/daemon/tileatomd"
cli="$build/client/tileatom-cli"
tour="$build/doc/examples/tour"
for f in "$readme" "$daemon" "$cli" "$tour"; do
	[ -e "$f" ] || { echo "check_tour: $f is missing" >&2; exit 1; }
done

tmp=$(mktemp -d)
sock="$tmp/ta.sock"
"$daemon" --socket "$sock" --backend "${TA_TEST_BACKEND:-cpu}" 2>"$tmp/tileatomd.log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "check_tour: tileatomd did not start" >&2; cat "$tmp/tileatomd.log" >&2; exit 1; }

ta() { "$cli" -s "$sock" "$@"; }

# The "$ " lines and their expected output of one README section, as a list of records:
# "C<TAB>command" then "O<TAB>line" for each expected line.
extract() {
	awk -v title="$1" '
		/^## / { insec = ($0 == "## " title) ; next }
		!insec { next }
		/^```/ { infence = !infence; cmd = 0; next }
		!infence { next }
		/^\$ / { print "C\t" substr($0, 3); cmd = 1; next }
		cmd { print "O\t" $0 }
	' "$readme"
}

fails=0
ncmds=0
# Runs the command collected so far and compares its output with the expected lines.
flush() {
	[ -n "$cmd" ] || return 0
	ncmds=$((ncmds + 1))
	local run=${cmd//\/tmp\/ta.sock/$sock}
	case "$run" in
	cc\ *) cmd=""; expected=""; return 0 ;; # needs the installed library
	./tour*) run="$tour${run#./tour}" ;;
	esac
	(cd "$tmp" && eval "$run") >"$tmp/out" 2>"$tmp/err"
	if ! printf '%s' "$expected" | cmp -s - "$tmp/out"; then
		echo "check_tour: '$cmd' printed:" >&2
		cat "$tmp/out" >&2
		echo "check_tour: README.md shows:" >&2
		printf '%s' "$expected" >&2
		fails=$((fails + 1))
	fi
	if [ -s "$tmp/err" ]; then
		echo "check_tour: '$cmd' wrote to stderr:" >&2
		cat "$tmp/err" >&2
		fails=$((fails + 1))
	fi
	cmd=""
	expected=""
}

for section in "A short tour from the shell" "The same from C"; do
	cmd=""
	expected=""
	while IFS= read -r rec; do
		case "$rec" in
		C$'\t'*) flush; cmd=${rec#C$'\t'} ;;
		O$'\t'*) expected+="${rec#O$'\t'}"$'\n' ;;
		esac
	done < <(extract "$section")
	flush
done
if [ "$ncmds" -lt 10 ]; then
	echo "check_tour: found only $ncmds commands in $readme (did the sections move?)" >&2
	exit 1
fi
if grep -q . "$tmp/tileatomd.log" && grep -qv '^<[5-7]>' "$tmp/tileatomd.log"; then
	echo "check_tour: the daemon logged warnings or errors:" >&2
	cat "$tmp/tileatomd.log" >&2
	fails=$((fails + 1))
fi
[ "$fails" -eq 0 ] || exit 1
echo "check_tour: $ncmds README commands print what README.md shows"
