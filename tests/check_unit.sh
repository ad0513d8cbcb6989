#!/usr/bin/env bash
# tests/check_unit.sh: the generated systemd unit (doc/tileatomd.service, from
# doc/tileatomd.service.in by make). Always: every @variable@ substituted; the daemon runs as
# a user of its own with a read-only system, its socket and state directories, no
# capabilities and the NVIDIA devices only (the settings docs/OPERATING.md describes); the
# socket it is started on is the system socket the client library looks for
# (client/tac_util.c), since a daemon that is not root has no default under /run. Where
# systemd-analyze is installed: `verify` reports nothing and `security --offline` rates
# the exposure at most 2.0 (1.6 when written; docs/OPERATING.md). Run from the top build
# folder (as `make check` does).
set -u
srcdir=${srcdir:-$(dirname "$0")/..}
build=$(pwd)
unit="$build/doc/tileatomd.service"
[ -f "$unit" ] || { echo "check_unit: $unit is missing (make builds it)" >&2; exit 1; }
fails=0
fail() {
	echo "check_unit: FAIL: $*" >&2
	fails=$((fails + 1))
}

grep -q '@[a-z]*@' "$unit" && fail "unsubstituted variables: $(grep '@[a-z]*@' "$unit")"
for line in DynamicUser=yes ProtectSystem=strict RuntimeDirectory=tileatom \
	StateDirectory=tileatom CapabilityBoundingSet= DevicePolicy=closed NoNewPrivileges=yes \
	PrivateTmp=yes ProtectHome=yes Type=notify 'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6' \
	SystemCallArchitectures=native LockPersonality=yes; do
	grep -qx "$line" "$unit" || fail "no line '$line'"
done
grep -q '^User=\|^PrivateUsers=yes\|^MemoryDenyWriteExecute=yes\|^PrivateDevices=yes' "$unit" &&
	fail "a setting docs/OPERATING.md says the unit leaves out: $(grep '^User=\|^PrivateUsers=yes\|^MemoryDenyWriteExecute=yes\|^PrivateDevices=yes' "$unit")"
exec_line=$(grep '^ExecStart=' "$unit")
sock=$(echo "$exec_line" | sed -n 's/.* --socket \([^ ]*\).*/\1/p')
[ -n "$sock" ] || fail "ExecStart names no --socket: $exec_line"
grep -q "\"$sock\"" "$srcdir/client/tac_util.c" ||
	fail "the unit's socket $sock is not the client library's system socket (client/tac_util.c)"
case "$sock" in
/run/tileatom/*) ;;
*) fail "the socket $sock is not in the unit's RuntimeDirectory (/run/tileatom)" ;;
esac

if command -v systemd-analyze >/dev/null 2>&1; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	# verify wants ExecStart's program to exist: point it at the daemon just built
	sed "s|^ExecStart=[^ ]*|ExecStart=$build/daemon/tileatomd|" "$unit" >"$tmp/tileatomd.service"
	if ! (cd "$tmp" && systemd-analyze verify --man=no tileatomd.service) >"$tmp/verify" 2>&1 ||
		[ -s "$tmp/verify" ]; then
		fail "systemd-analyze verify: $(cat "$tmp/verify")"
	fi
	(cd "$tmp" && systemd-analyze security --offline=yes --threshold=20 tileatomd.service) \
		>"$tmp/security" 2>&1 ||
		fail "systemd-analyze security: $(tail -n 1 "$tmp/security") (at most 2.0 wanted)"
	echo "check_unit: $(tail -n 1 "$tmp/security")"
else
	echo "check_unit: systemd-analyze is not installed: verify and security not run"
fi
[ "$fails" -eq 0 ] || exit 1
echo "check_unit: the unit runs tileatomd as its own user, sandboxed, on the clients' socket"
