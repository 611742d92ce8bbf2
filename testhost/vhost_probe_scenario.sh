#!/bin/sh
# Dev tool: runs tern's vhost-net unit tests (src/virtio/net/vhost_*_test.cc) on the test host's
# real /dev/vhost-net and a real tap, where the build machine has neither. From the repository:
#   strip -o build/vhost_probe_tests build/tern_unit_tests
#   flock /tmp/testhost.lock testhost/run.sh --scenario testhost/vhost_probe_scenario.sh --no-tern \
#       --modules "tun tap vhost_iotlb vhost vhost_net" --bin "$PWD/build/vhost_probe_tests" \
#       --env VHOST_PROBE="$PWD/build/vhost_probe_tests" --timeout 600
# Prints VHOST-PROBE-RESULT rc=N; the scenario's rc is the tests' rc (a skipped real test fails it).
[ -x "$VHOST_PROBE" ] || { echo "VHOST-PROBE-ERROR no test binary (VHOST_PROBE=$VHOST_PROBE)"; exit 2; }
ls -l /dev/vhost-net /dev/net/tun || { echo "VHOST-PROBE-ERROR device nodes missing"; exit 2; }
out=/tmp/vhost-probe.log
"$VHOST_PROBE" --gtest_filter='VhostNet*:VhostCallRelay*:VirtioPciInterrupt.QueueIrqfd*' \
    --gtest_repeat="${VHOST_PROBE_REPEAT:-3}" >"$out" 2>&1
rc=$?
cat "$out"
# The real tests must have run, not skipped.
if grep -q 'SKIPPED \] VhostNetReal' "$out"; then echo "VHOST-PROBE-ERROR real tests skipped"; rc=3; fi
echo "VHOST-PROBE-RESULT rc=$rc"
exit $rc
