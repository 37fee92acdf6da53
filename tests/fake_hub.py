"""A local HTTP server standing in for the Hugging Face hub and the upstream repository host, which are
unreachable here, at the narrowest edge.

It answers exactly the requests huggingface_hub 2.x makes for ``model_info``/``dataset_info`` (GET
``/api/{models|datasets}/REPO/revision/REV?blobs=True``), ``get_paths_info`` (POST
``/api/{type}s/REPO/paths-info/REV``) and the metadata HEAD + GET of ``hf_hub_download``
(``/[datasets/]REPO/resolve/REV/PATH``: ``X-Repo-Commit``, ``ETag``; for LFS files a 302 to a "CDN" on
another origin with ``X-Linked-Etag``/``X-Linked-Size``), with HTTP Range on the CDN; and a raw file host
serving ``/OWNER/REPO/COMMIT/PATH`` like raw.githubusercontent.com. Everything above that edge —
huggingface_hub's HTTP client, the resumable download, verification, staging and the store — is the real
code. The ``hub`` fixture points ``HF_ENDPOINT`` and ``TRACE_TUI_RELEASE_URL`` at it (for this process and
the commands it starts).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[tuple[str, str], dict] = {}
        self.raw: dict[str, bytes] = {}
        self.requests: list[tuple[str, str, str | None, str | None]] = []  # method, path, Range, Authorization
        self.fail_cdn = False
        self.corrupt: set[str] = set()  # CDN sha256s served with wrong bytes
        self.lock = threading.Lock()

    def add_repo(self, repo_type: str, repo_id: str, commit: str, files: dict[str, bytes], lfs: set[str],
                 resolves_to: str | None = None) -> None:
        self.repos[(repo_type, repo_id)] = {"commit": commit, "files": files, "lfs": lfs,
                                            "served_commit": resolves_to or commit}

    def file_meta(self, repo: dict, path: str) -> dict:
        data = repo["files"][path]
        if path in repo["lfs"]:
            sha = hashlib.sha256(data).hexdigest()
            pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {len(data)}\n".encode()
            return {"size": len(data), "blob": git_blob_id(pointer), "sha256": sha}
        return {"size": len(data), "blob": git_blob_id(data), "sha256": None}


def _handler(hub: FakeHub, port_box: list[int]):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in separate writes

        def log_message(self, *args):  # quiet
            pass

        def _send(self, code: int, body: bytes = b"", headers: dict | None = None, head: bool = False):
            self.send_response(code)
            for k, v in (headers or {}).items():
                self.send_header(k, str(v))
            if "Content-Length" not in (headers or {}):
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _repo(self, repo_type: str, repo_id: str, rev: str):
            repo = hub.repos.get((repo_type, repo_id))
            if repo is None:
                self._send(404, b'{"error":"Repository not found"}', {"X-Error-Code": "RepoNotFound"})
                return None
            if rev != repo["commit"]:
                self._send(404, b'{"error":"Invalid rev id"}', {"X-Error-Code": "RevisionNotFound"})
                return None
            return repo

        def _range_body(self, data: bytes, head: bool, extra: dict):
            rng = self.headers.get("Range")
            m = re.match(r"bytes=(\d+)-$", rng or "")
            if m and int(m.group(1)) >= len(data):
                self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"}, head)
            elif m:
                start = int(m.group(1))
                body = data[start:]
                self._send(206, body, {**extra, "Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}",
                                       "Accept-Ranges": "bytes"}, head)
            else:
                self._send(200, data, {**extra, "Accept-Ranges": "bytes"}, head)

        def _route(self, method: str):
            url = urlsplit(self.path)
            path = url.path
            with hub.lock:
                hub.requests.append((method, path, self.headers.get("Range"), self.headers.get("Authorization")))
            m = re.match(r"^/api/(models|datasets)/([^/]+/[^/]+)/revision/([^/]+)$", path)
            if m and method == "GET":
                repo = self._repo(m[1][:-1], m[2], m[3])
                if repo is None:
                    return
                sib = []
                for p in repo["files"]:
                    meta = hub.file_meta(repo, p)
                    s = {"rfilename": p, "size": meta["size"], "blobId": meta["blob"]}
                    if meta["sha256"]:
                        s["lfs"] = {"sha256": meta["sha256"], "size": meta["size"], "pointerSize": 130}
                    sib.append(s)
                body = json.dumps({"id": m[2], "sha": repo["served_commit"], "siblings": sib}).encode()
                return self._send(200, body, {"Content-Type": "application/json"})
            m = re.match(r"^/api/(models|datasets)/([^/]+/[^/]+)/paths-info/([^/]+)$", path)
            if m and method == "POST":
                form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode())
                repo = self._repo(m[1][:-1], m[2], m[3])
                if repo is None:
                    return
                out = []
                for p in form.get("paths", []):
                    if p in repo["files"]:
                        meta = hub.file_meta(repo, p)
                        item = {"type": "file", "path": p, "size": meta["size"], "oid": meta["blob"]}
                        if meta["sha256"]:
                            item["lfs"] = {"oid": meta["sha256"], "size": meta["size"], "pointerSize": 130}
                        out.append(item)
                return self._send(200, json.dumps(out).encode(), {"Content-Type": "application/json"})
            m = re.match(r"^/(datasets/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
            if m and method in ("GET", "HEAD"):
                repo = self._repo("dataset" if m[1] else "model", m[2], m[3])
                if repo is None:
                    return
                fpath = m[4]
                if fpath not in repo["files"]:
                    return self._send(404, b"", {"X-Error-Code": "EntryNotFound"}, method == "HEAD")
                meta = hub.file_meta(repo, fpath)
                common = {"X-Repo-Commit": repo["served_commit"]}
                if meta["sha256"]:
                    # LFS: redirect to the CDN on another origin (localhost vs 127.0.0.1)
                    loc = f"http://localhost:{port_box[0]}/cdn/{meta['sha256']}?X-Amz-Signature=secret"
                    return self._send(302, b"", {**common, "Location": loc, "ETag": f'"{meta["blob"]}"',
                                                 "X-Linked-Etag": f'"{meta["sha256"]}"',
                                                 "X-Linked-Size": meta["size"]}, method == "HEAD")
                return self._range_body(repo["files"][fpath], method == "HEAD",
                                        {**common, "ETag": f'"{meta["blob"]}"'})
            m = re.match(r"^/cdn/([0-9a-f]{64})$", path)
            if m and method == "GET":
                if hub.fail_cdn:
                    return self._send(500, b"down")
                for repo in hub.repos.values():
                    for data in repo["files"].values():
                        if hashlib.sha256(data).hexdigest() == m[1]:
                            if m[1] in hub.corrupt:
                                data = data[:-1] + bytes([data[-1] ^ 1])
                            return self._range_body(data, False, {})
                return self._send(404)
            m = re.match(r"^/raw(/.+)$", path)
            if m and method == "GET":
                data = hub.raw.get(m[1])
                if data is None:
                    return self._send(404, b"404: Not Found")
                return self._range_body(data, False, {})
            self._send(404)

        def do_GET(self):
            self._route("GET")

        def do_HEAD(self):
            self._route("HEAD")

        def do_POST(self):
            self._route("POST")

    return H


@pytest.fixture
def hub(monkeypatch):
    box: list[int] = [0]
    hub = FakeHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub, box))
    box[0] = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{box[0]}"
    monkeypatch.setenv("HF_ENDPOINT", base)
    monkeypatch.setenv("TRACE_TUI_RELEASE_URL", f"{base}/raw")
    monkeypatch.setenv("HF_TOKEN", "hf_test_secret_token")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    hub.base = base
    yield hub
    server.shutdown()
    server.server_close()
