#!/usr/bin/env bash
# npm run demo: both planes on the default sockets, a demo workload under a real seccomp filter,
# then what the agent saw and did. `npm run demo -- --keep-running` leaves the planes running.
set -euo pipefail
cd "$(dirname "$0")/../.."
keep=false
[ "${1:-}" = "--keep-running" ] && keep=true
if [ "$(id -u)" != 0 ]; then echo "demo: run as root (the sockets live under /run, filters and pidfds need it)" >&2; exit 1; fi
[ -f build/Release/seccomp_agent.node ] && [ -f dist/dataplane/main.js ] || { echo "demo: run 'npm ci' first (builds the addon and the TypeScript)" >&2; exit 1; }

work=$(mktemp -d /tmp/seccomp-agent-demo.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# wait_for WHAT SECONDS COMMAND...: polls COMMAND until it succeeds; on a loaded machine this takes
# what it takes, up to SECONDS, then the demo stops and says what it waited for.
wait_for() {
  local what=$1 seconds=$2; shift 2
  local end=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$end" ]; then
      echo "demo: gave up after ${seconds} s waiting for $what; logs:" >&2
      tail -n 20 "$work"/*.log >&2 || true
      exit 1
    fi
    sleep 0.1
  done
}
status_has() { bin/seccompctl status --json | grep -q "$1"; }

echo "== starting seccomp-keeper -- seccomp-dataplane (listener /run/seccomp-agent.socket, gRPC observer /run/seccomp-agent/dataplane.sock, control /run/seccomp-agent/control.sock)"
echo "   the keeper holds a copy of every fd, as in the DaemonSet: a crash of the data plane loses no container"
bin/seccomp-keeper -- bin/seccomp-dataplane >"$work/dataplane.log" 2>&1 & pids+=($!)
wait_for "the data plane to serve" 60 bin/seccompctl health --timeout 1
bin/seccompctl health
bin/seccompctl health --control

echo "== starting seccomp-controlplane --no-kubernetes (pod identity from the runtime's annotations; attaches on the control socket)"
bin/seccomp-controlplane --no-kubernetes --control-socket /run/seccomp-agent/control.sock >"$work/controlplane.log" 2>&1 & pids+=($!)
wait_for "the control plane to attach" 60 status_has '"controlPlane"'

bin/seccompctl watch >"$work/watch.log" 2>&1 & pids+=($!)
# Watch sees only what happens after it subscribed: wait until the data plane counts it.
wait_for "seccompctl watch to subscribe" 60 status_has '"watchers":[1-9]'

echo "== demo workload: mkdir $work/hello under a filter that notifies mkdir and mkdirat,"
echo "   with listenerMetadata MKDIR_TMPL=-{{.Namespace}}-{{.Pod}} and containerd pod annotations demo/web-1"
bin/seccomp-run --socket /run/seccomp-agent.socket --syscalls mkdir,mkdirat --id demo-workload \
  --metadata 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}' \
  --annotation io.kubernetes.cri.sandbox-namespace=demo --annotation io.kubernetes.cri.sandbox-name=web-1 \
  -- /bin/sh -c "mkdir '$work/hello' && echo 'workload: mkdir returned 0'"
echo "== what exists now in $work:"
ls "$work" | grep -v '\.log$' | sed 's/^/   /'
wait_for "seccompctl watch to show the answer" 30 grep -q 'answer .*demo-workload' "$work/watch.log"
echo "== seccompctl watch saw:"
sed 's/^/   /' "$work/watch.log"
echo "== seccompctl status:"
bin/seccompctl status | sed 's/^/   /'
if $keep; then
  echo "== planes keep running; try: bin/seccompctl watch  (Ctrl-C stops the demo)"
  wait
fi
