"""node with and without --jitless, direct and under autotool-launcher: spawn -> initialize ->
tools listed, and a warm call, on the real @modelcontextprotocol/server-filesystem.

    python3 bench/tools/node_jitless.py LAYER TOOL_DIR LAUNCHER

LAYER is an installed npm layer ($AUTOTOOL_HOME/layers/npm-<sha256>) of the filesystem server,
TOOL_DIR the added tool's directory ($AUTOTOOL_HOME/tools/fs/1). Seven interleaved runs of each;
the launcher runs with a minimal policy (no egress, no granted directory; `/tmp` as the server's
directory). docs/added.md has the figures and the choice.
"""
import json
import os
import statistics
import subprocess
import sys
import time

layer, tooldir = sys.argv[1], sys.argv[2].rstrip("/")
entry="node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
def policy(jitless):
    return {"tool_dir": tooldir, "tool_file": "tool.py", "interpreter": "/usr/bin/node",
      "interpreter_args": ["--jitless"] if jitless else [], "packages": layer,
      "layer_program": {"entry": entry, "args": ["/tmp"]},
      "env": {"PATH": "/usr/bin:/bin", "HOME": "/home/tool", "TMPDIR": "/tmp", "LANG": "C.UTF-8"}}
def run(argv, pol=None):
    t=time.monotonic()
    if pol is None:
        p=subprocess.Popen(argv,stdin=subprocess.PIPE,stdout=subprocess.PIPE,stderr=subprocess.PIPE)
    else:
        r,w=os.pipe()
        p=subprocess.Popen(argv+["--policy-fd",str(r)],stdin=subprocess.PIPE,stdout=subprocess.PIPE,stderr=subprocess.PIPE,pass_fds=(r,))
        os.close(r); os.write(w,json.dumps(pol).encode()); os.close(w)
    def send(m): p.stdin.write((json.dumps(m)+"\n").encode()); p.stdin.flush()
    send({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"m","version":"1"}}})
    line=p.stdout.readline()
    if not line:
        print("FAILED", p.stderr.read().decode()[-600:]); sys.exit(1)
    send({"jsonrpc":"2.0","method":"notifications/initialized"})
    send({"jsonrpc":"2.0","id":2,"method":"tools/list"}); n=len(json.loads(p.stdout.readline())["result"]["tools"])
    dt=time.monotonic()-t
    t2=time.monotonic()
    for i in range(50):
        send({"jsonrpc":"2.0","id":10+i,"method":"tools/call","params":{"name":"list_allowed_directories","arguments":{}}}); p.stdout.readline()
    warm=(time.monotonic()-t2)/50
    p.stdin.close(); p.wait()
    return dt, warm, n
L = sys.argv[3]
cases={"direct node": (["node", layer+"/"+entry, "/tmp"], None),
       "direct node --jitless": (["node","--jitless", layer+"/"+entry, "/tmp"], None),
       "launcher node --jitless": ([L], policy(True)),
       "launcher node (JIT)": ([L], policy(False))}
res={k:[] for k in cases}
for i in range(7):
    for k,(argv,pol) in cases.items():
        try: res[k].append(run(argv,pol))
        except SystemExit: res[k].append(None)
for k,v in res.items():
    v=[x for x in v if x]
    if not v: print(f"{k:26} failed every run"); continue
    st=sorted(x[0] for x in v); wm=sorted(x[1] for x in v)
    print(f"{k:26} spawn->listed median {statistics.median(st)*1000:.0f} ms (min {st[0]*1000:.0f}); warm call median {statistics.median(wm)*1000:.2f} ms; tools {v[0][2]}")
