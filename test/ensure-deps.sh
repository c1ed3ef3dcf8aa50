#!/usr/bin/env bash
# Installs what the test suite needs from Debian's packages when it is missing: runc and a static
# busybox for the end-to-end tests; systemd-socket-activate (systemd), unshare/nsenter
# (util-linux) and kubectl (kubernetes-client) for the deploy tests. Fails loudly instead of
# letting a test skip. The unit tier needs none of them.
set -euo pipefail
need=()
command -v runc >/dev/null 2>&1 || need+=(runc)
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
command -v systemd-socket-activate >/dev/null 2>&1 || need+=(systemd)
command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
command -v kubectl >/dev/null 2>&1 || need+=(kubernetes-client)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    # Not root: test/run.js runs the unit tier only, which needs none of these.
    echo "test/ensure-deps.sh: not root: not installing ${need[*]} (the integration and e2e tiers need them, and root)" >&2
    exit 0
  fi
  echo "test/ensure-deps.sh: installing ${need[*]} from Debian's packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
command -v runc >/dev/null || { echo "runc still missing after install" >&2; exit 1; }
[ -x /bin/busybox ] || { echo "busybox still missing after install" >&2; exit 1; }
for tool in systemd-socket-activate nsenter unshare kubectl; do
  command -v "$tool" >/dev/null || { echo "$tool still missing after install" >&2; exit 1; }
done
