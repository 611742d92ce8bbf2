#!/usr/bin/env bash
# Self-test of images/debian/build.sh's caching with a fake mmdebstrap (first on PATH: it writes a
# file into the tree and sleeps) and a local "mirror" (DEBIAN_MIRROR=file://...): no network, ~10 s.
# Two builds of one --out at once: both exit 0 and the tree is made once (they shared $out.tmp: one
# removed or moved the other's half-written image); a killed build leaves no image, key or temporary
# and the next run builds; --out a directory or "" is refused (exit 2). Needs root (mount, mkfs).
# Usage: tests/testhost/debian_image_build_test.sh
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[[ $(id -u) -eq 0 ]] || { echo "FAIL needs root (build.sh does)"; exit 1; }
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/bin" "$dir/mirror/dists/bookworm"
touch "$dir/mirror/dists/bookworm/Release"
cat >"$dir/bin/mmdebstrap" <<'FAKE'
#!/usr/bin/env bash
tree=${*: -2:1}  # mmdebstrap ... SUITE TARGET MIRROR
echo x >>"$FAKE_COUNT"
mkdir -p "$tree/etc" && echo tern-debian >"$tree/etc/hostname"
sleep "${FAKE_SLEEP:-2}"
FAKE
chmod +x "$dir/bin/mmdebstrap"
export PATH="$dir/bin:$PATH" DEBIAN_MIRROR="file://$dir/mirror" FAKE_COUNT="$dir/count"
img="$dir/out/debian-12.img"
fails=0
expect() {  # expect NAME CONDITION...: one PASS/FAIL line per property
    local name="$1"; shift
    if "$@"; then echo "PASS $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
build() { "$repo/images/debian/build.sh" --out "$img"; }
count() { if [[ -f $FAKE_COUNT ]]; then wc -l <"$FAKE_COUNT"; else echo 0; fi; }

# Killed (SIGTERM to its process group, as Ctrl-C is) while mmdebstrap runs: nothing published.
FAKE_SLEEP=30 setsid "$repo/images/debian/build.sh" --out "$img" >"$dir/killed.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [[ $(count) -ge 1 ]] && break; sleep 0.1; done
kill -TERM -- "-$pid"
wait "$pid" || true
expect "killed build: no image" test ! -e "$img"
expect "killed build: no key" test ! -e "$img.key"
expect "killed build: no temporary image" test ! -e "$img.tmp"

rm -f "$FAKE_COUNT"
rc1=0 rc2=0
build >"$dir/a.log" 2>&1 & p1=$!
build >"$dir/b.log" 2>&1 & p2=$!
wait "$p1" || rc1=$?
wait "$p2" || rc2=$?
expect "concurrent builds exit 0 (rc $rc1 $rc2)" test "$rc1" -eq 0 -a "$rc2" -eq 0
expect "concurrent builds: the tree made once ($(count))" test "$(count)" -eq 1
expect "image is a clean ext4" e2fsck -fn "$img"
expect "key written" test -s "$img.key"
expect "no temporaries left" test -z "$(find "$dir/out" -name '*.tmp' -o -name '*.rootfs.*')"
rc=0; build >"$dir/c.log" 2>&1 || rc=$?
expect "third run: up to date" grep -q "up to date" "$dir/c.log"

rc=0; "$repo/images/debian/build.sh" --out "$dir/out" >"$dir/d.log" 2>&1 || rc=$?
expect "--out DIR refused (rc=$rc)" test "$rc" -eq 2
rc=0; "$repo/images/debian/build.sh" --out "" >"$dir/e.log" 2>&1 || rc=$?
expect "--out '' refused (rc=$rc)" test "$rc" -eq 2
((fails == 0)) || { tail -n 5 "$dir"/*.log; exit 1; }
