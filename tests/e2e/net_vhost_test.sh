#!/usr/bin/env bash
# End-to-end hostile virtio-net driver against tern with vhost=on (issue 31 items 5, 6): the
# net_hostile test (tests/e2e/net_hostile_test.sh, its driver's vhost mode; the checks are listed
# in tests/e2e/net_hostile_scenario.sh under NET_VHOST=on): a driver without MRG_RXBUF is served
# in userspace and gets num_buffers = 1; a TX chain vhost-net refuses sets NEEDS_RESET, is counted
# and logged once, and the driver recovers.
# Usage: tests/e2e/net_vhost_test.sh     Environment: TERN_BIN (default build/tern), E2E_LOG.
set -euo pipefail
NET_HOSTILE_E2E=net_vhost exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/net_hostile_test.sh"
