#!/usr/bin/env python3
# See README.md: binds a store's name as an unprivileged user and reports every fd it receives.
import array, json, os, select, socket, sys, time

address, uid, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
os.setgroups([])
os.setgid(uid)
os.setuid(uid)
name = '\0' + address[1:] if address.startswith('@') else address
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
try:
    sock.bind(name)
    print(json.dumps({'bound': True, 'error': None, 'uid': os.getuid()}), flush=True)
except OSError as err:
    print(json.dumps({'bound': False, 'error': err.strerror, 'uid': os.getuid()}), flush=True)
    print(json.dumps({'final': True, 'messages': 0, 'fds': 0}), flush=True)
    sys.exit(0)
messages = fds = 0
deadline = time.monotonic() + seconds
while True:
    left = deadline - time.monotonic()
    if left <= 0:
        break
    if not select.select([sock], [], [], left)[0]:
        continue
    got = array.array('i')
    data, ancdata, _flags, _addr = sock.recvmsg(4096, socket.CMSG_SPACE(253 * got.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            got.frombytes(payload[:len(payload) - (len(payload) % got.itemsize)])
    messages += 1
    fds += len(got)
    print(json.dumps({'text': data.decode('utf-8', 'replace'), 'fds': len(got)}), flush=True)
print(json.dumps({'final': True, 'messages': messages, 'fds': fds}), flush=True)
