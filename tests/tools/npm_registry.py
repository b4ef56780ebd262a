"""An npm registry for the tests, on loopback, over packages fetched once.

`fetch DIR PACKAGE@VERSION...`: lock each package's tree with npm (isolated: empty user and
global config, a cache of its own, no scripts) into DIR/locks/, and download every tarball the
locks name into DIR/tarballs/, each checked against its sha512 integrity. `.ci/test` runs it.

`serve DIR [EXTRA_TARBALL...]`: answer GET /<name> (a packument built from every lock in
DIR/locks, and from each extra tarball's package.json) and GET /-/t/<file> (the tarball), on
127.0.0.1 at a random port, which it prints as its first line of stdout; runs until stdin
closes.
"""

import base64
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def read_json(path):
    with open(path) as f:
        return json.load(f)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=1)


def isolated_npm(args, cwd, cache):
    user = os.path.join(cwd, ".user-npmrc")
    glob = os.path.join(cwd, ".global-npmrc")
    for f in (user, glob):
        open(f, "w").close()
    env = {"PATH": "/usr/bin:/bin", "HOME": cwd, "LANG": "C.UTF-8"}
    for k in ("NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY",
              "https_proxy", "http_proxy", "no_proxy"):
        if k in os.environ:
            env[k] = os.environ[k]
    subprocess.run(
        ["/usr/bin/npm", *args, "--userconfig", user, "--globalconfig", glob, "--cache", cache,
         "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=cwd, env=env, check=True,
    )


def fetch(out, specs):
    os.makedirs(os.path.join(out, "locks"), exist_ok=True)
    os.makedirs(os.path.join(out, "tarballs"), exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        cache = os.path.join(work, "cache")
        for i, spec in enumerate(specs):
            name, _, version = spec.rpartition("@")
            d = os.path.join(work, str(i))
            os.makedirs(d)
            with open(os.path.join(d, "package.json"), "w") as f:
                json.dump({"name": "fetch", "private": True, "dependencies": {name: version}}, f)
            isolated_npm(["install", "--package-lock-only"], d, cache)
            lock = read_json(os.path.join(d, "package-lock.json"))
            safe = name.replace("/", "__").replace("@", "")
            write_json(os.path.join(out, "locks", safe + ".json"), lock)
            for path, p in lock["packages"].items():
                if not path:
                    continue
                url = p["resolved"]
                target = os.path.join(out, "tarballs", url.rsplit("/", 1)[1])
                if os.path.exists(target):
                    continue
                data = urllib.request.urlopen(url, timeout=60).read()
                algo, _, want = p["integrity"].partition("-")
                got = base64.b64encode(hashlib.new(algo, data).digest()).decode()
                if got != want:
                    sys.exit(f"{url}: integrity mismatch")
                with open(target, "wb") as f:
                    f.write(data)


METADATA = ("dependencies", "optionalDependencies", "peerDependencies", "peerDependenciesMeta",
            "bin", "engines", "os", "cpu", "license")


def package_name(path):
    return path.rsplit("node_modules/", 1)[1]


def integrity_of(data):
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def catalog(root, extras):
    """{name: {version: manifest without dist}}, {version: tarball file name}."""
    packages, files = {}, {}
    locks = os.path.join(root, "locks")
    for lock_name in sorted(os.listdir(locks)) if os.path.isdir(locks) else []:
        lock = read_json(os.path.join(locks, lock_name))
        for path, p in lock["packages"].items():
            if not path:
                continue
            name = package_name(path)
            meta = {k: p[k] for k in METADATA if k in p}
            meta.update({"name": name, "version": p["version"]})
            file = p["resolved"].rsplit("/", 1)[1]
            meta["dist"] = {"integrity": p["integrity"], "file": file}
            packages.setdefault(name, {})[p["version"]] = meta
            files[file] = os.path.join(root, "tarballs", file)
    for extra in extras:
        data = read_bytes(extra)
        with tarfile.open(fileobj=io.BytesIO(data)) as t:
            manifest = json.load(t.extractfile("package/package.json"))
        file = os.path.basename(extra)
        manifest["dist"] = {"integrity": integrity_of(data), "file": file}
        packages.setdefault(manifest["name"], {})[manifest["version"]] = manifest
        files[file] = extra
    return packages, files


def version_key(v):
    return [int(x) if x.isdigit() else x for x in v.split("-")[0].split(".")]


def serve(root, extras):
    packages, files = catalog(root, extras)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, code, body, kind):
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_GET(self):
            path = urllib.parse.unquote(self.path.split("?")[0]).lstrip("/")
            base = f"http://127.0.0.1:{self.server.server_address[1]}"
            if path.startswith("-/t/") and path[4:] in files:
                return self.answer(200, read_bytes(files[path[4:]]), "application/octet-stream")
            versions = packages.get(path)
            if not versions:
                return self.answer(404, b'{"error":"not found"}', "application/json")
            out = {}
            for v, meta in versions.items():
                meta = dict(meta)
                dist = dict(meta["dist"])
                dist["tarball"] = f"{base}/-/t/{dist.pop('file')}"
                meta["dist"] = dist
                out[v] = meta
            latest = max(out, key=version_key)
            body = json.dumps({"name": path, "dist-tags": {"latest": latest}, "versions": out})
            self.answer(200, body.encode(), "application/json")

        do_HEAD = do_GET

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    if sys.argv[1] == "fetch":
        fetch(sys.argv[2], sys.argv[3:])
    else:
        serve(sys.argv[2], sys.argv[3:])
