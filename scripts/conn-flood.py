#!/usr/bin/env python3
# conn-flood.py PORT N MODE: opens N connections to an omnistage server on
# 127.0.0.1:PORT (MODE keepalive: each makes one GET /health and stays open;
# silent: each sends nothing), then times 20 new clients (curl GET /health).
# With --max-conns 20, every new client must still be answered at once.
# Loopback only; raise ulimit -n above N first.
import socket, subprocess, sys, time
port = int(sys.argv[1]); n = int(sys.argv[2]); mode = sys.argv[3]
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    if mode == "keepalive":
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    socks.append(s)
if mode == "keepalive":
    ok = 0
    for s in socks:
        s.settimeout(10)
        try:
            if s.recv(4096).startswith(b"HTTP/1.1 200"): ok += 1
        except Exception: pass
    print(f"{ok} of {n} keep-alive connections answered /health", flush=True)
times = []
for i in range(20):
    t = time.time()
    r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "30", f"http://127.0.0.1:{port}/health"], capture_output=True, text=True)
    times.append((r.stdout, round(time.time() - t, 3)))
codes = [c for c, _ in times]
print(f"{mode}: 20 new clients: codes {sorted(set(codes))}, {codes.count('200')} ok, max {max(t for _, t in times)} s, mean {sum(t for _, t in times)/20:.3f} s")
