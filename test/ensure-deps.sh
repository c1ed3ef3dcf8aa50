#!/usr/bin/env bash
# Installs what the test suite needs from Debian's packages when it is missing: runc, crun,
# containerd (its CRI plugin and ctr), Podman, umoci and a static busybox for the end-to-end
# tests; systemd-socket-activate (systemd), unshare/nsenter (util-linux) and kubectl
# (kubernetes-client) for the deploy tests; strace to hold a helper inside a syscall
# (test/e2e/nshelper-crash.test.ts). Fails loudly instead of letting a test skip.
# The unit tier needs none of them.
set -euo pipefail
# command (or, for a package that ships no command of its own name, a file) -> Debian package
declare -A tools=(
  [runc]=runc
  [crun]=crun
  [containerd]=containerd
  [ctr]=containerd
  [podman]=podman
  [conmon]=conmon
  [umoci]=umoci
  [/bin/busybox]=busybox-static
  [systemd-socket-activate]=systemd
  [nsenter]=util-linux
  [unshare]=util-linux
  [kubectl]=kubernetes-client
  [strace]=strace
)
present() { case "$1" in /*) [ -x "$1" ] ;; *) command -v "$1" >/dev/null 2>&1 ;; esac; }
need=()
for tool in "${!tools[@]}"; do
  present "$tool" || need+=("${tools[$tool]}")
done
# busybox (not busybox-static) also provides /bin/busybox, but a dynamic one: the rootfs needs
# the static build.
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
  mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
  if [ "$(id -u)" != 0 ]; then
    # Not root: test/run.js runs the unit tier only, which needs none of these.
    echo "test/ensure-deps.sh: not root: not installing ${need[*]} (the integration and e2e tiers need them, and root)" >&2
    exit 0
  fi
  echo "test/ensure-deps.sh: installing ${need[*]} from Debian's packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # No recommends: Podman's (buildah, slirp4netns, fuse-overlayfs...) are not used by the tests.
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
for tool in "${!tools[@]}"; do
  present "$tool" || { echo "test/ensure-deps.sh: $tool still missing after installing ${tools[$tool]}" >&2; exit 1; }
done
