"""Idle connections without a token against `capvault serve --transport http` (issue 60): one and
eight flooders of 1,000 connections each from 127.0.0.1, an authenticated `initialize` during each,
and the server's peak memory (VmHWM, reset between rounds). Prints figures; asserts nothing.

    cargo build && cp -r ../shared/vaults/kepano-obsidian /tmp/flood/v && python3 scripts/connection_flood.py
"""
import socket, subprocess, time, threading, json, os, sys, urllib.request
BIN=os.environ.get("CAPVAULT_BIN", os.path.join(os.path.dirname(__file__), "..", "target", "debug", "capvault")); TOKEN="flood-token-0123456789abcdef0123456789"
p=subprocess.Popen([BIN,"serve","/tmp/flood/v","--transport","http","--listen","127.0.0.1:38471","--no-index-cache"],env=dict(os.environ,CAPVAULT_TOKEN=TOKEN,CAPVAULT_LOG="capvault=error"),stderr=subprocess.DEVNULL)
def hwm():
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith(("VmHWM","VmRSS")): print("  ",l.strip())
def reset(): open(f"/proc/{p.pid}/clear_refs","w").write("5")
INIT=json.dumps({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}).encode()
def authed():
    t=time.time()
    r=urllib.request.Request("http://127.0.0.1:38471/mcp",data=INIT,headers={"Authorization":"Bearer "+TOKEN,"Content-Type":"application/json","Accept":"application/json, text/event-stream"})
    try: code=urllib.request.urlopen(r,timeout=20).status
    except Exception as e: code=repr(e)[:60]
    return code, round((time.time()-t)*1000,1)
time.sleep(3)
print("baseline, authenticated initialize:",authed()); reset(); hwm()
def flood(n,out):
    for _ in range(n):
        try:
            s=socket.create_connection(("127.0.0.1",38471)); out.append(s)
        except Exception: pass
for k in (1,8):
    held=[]; t=time.time()
    ths=[threading.Thread(target=flood,args=(1000,held)) for _ in range(k)]
    [x.start() for x in ths]; [x.join() for x in ths]
    print(f"{k} flooder(s) x 1000 idle connections in {time.time()-t:.1f} s; authenticated initialize during it:",authed())
    hwm(); reset()
    for s in held: s.close()
    time.sleep(1)
p.terminate(); p.wait()
