# Runs moqd (argv[1:]) under a fake systemd: binds a unix datagram socket, passes it as
# NOTIFY_SOCKET, and records what moqd notifies while the test drives it: after READY=1 it sends
# SIGHUP and waits for the READY=1 that ends the reload, then SIGTERM. Prints JSON:
# {"messages": [...], "exit": code, "ready_line": first stdout line}.
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

path = os.path.join(tempfile.mkdtemp(), "notify.sock")
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(path)
sock.settimeout(10)
env = dict(os.environ, NOTIFY_SOCKET=path)
proc = subprocess.Popen(sys.argv[1:], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
messages = []


def expect(state):
    while True:
        data = sock.recv(4096).decode()
        messages.append(data)
        if state in data.split("\n"):
            return


expect("READY=1")
ready_line = proc.stdout.readline().strip()
proc.send_signal(signal.SIGHUP)
expect("RELOADING=1")
expect("READY=1")
proc.send_signal(signal.SIGTERM)
expect("STOPPING=1")
code = proc.wait(timeout=15)
print(json.dumps({"messages": messages, "exit": code, "ready_line": ready_line}))
