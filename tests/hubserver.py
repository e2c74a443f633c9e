"""A model repository served over the Hugging Face Hub's download API, for the ``hf:`` source tests.

It answers the requests ``huggingface_hub.snapshot_download`` and ``HfApi.model_info`` make against
``HF_ENDPOINT``: the model's info at a revision (``/api/models/{repo}[/revision/{rev}]``, with the commit as
``sha``), its file tree (``/api/models/{repo}/tree/{rev}``), each file (HEAD and GET
``/{repo}/resolve/{rev}/{file}`` with ``X-Repo-Commit`` and ``ETag``; weights as LFS files, whose ETag is their
sha256) and the (empty) agent-harness registry the client asks for. One repository, one commit (random per
server), reachable as the branch ``main`` or by its hash; any other revision or repository gets the hub's 404
with its ``X-Error-Code``. Every request is recorded so a test can check that the files really came through here.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt")  # stored in git-lfs on the hub
_API = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/(?P<what>revision|tree)/(?P<rev>[^/]+)(?P<sub>/.*)?)?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


@dataclass(frozen=True)
class RepoFile:
    path: str
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def git_oid(self) -> str:  # git's blob id: sha1 over "blob <size>\0" + content
        return hashlib.sha1(b"blob %d\0" % len(self.data) + self.data).hexdigest()

    @property
    def lfs(self) -> bool:
        return self.path.endswith(LFS_SUFFIXES)

    @property
    def etag(self) -> str:
        return self.sha256 if self.lfs else self.git_oid

    def tree_entry(self) -> dict[str, object]:
        entry: dict[str, object] = {"type": "file", "path": self.path, "size": len(self.data), "oid": self.git_oid}
        if self.lfs:
            entry["lfs"] = {"oid": self.sha256, "size": len(self.data), "pointerSize": 134}
        return entry


@dataclass
class FakeHubRepo:
    repo_id: str
    files: dict[str, RepoFile]
    commit: str = field(default_factory=lambda: secrets.token_hex(20))
    requests: list[tuple[str, str, int]] = field(default_factory=list)  # (method, path, status)
    url: str = ""

    @classmethod
    def from_folder(cls, repo_id: str, folder: Path) -> FakeHubRepo:
        files = {
            str(p.relative_to(folder)): RepoFile(str(p.relative_to(folder)), p.read_bytes())
            for p in sorted(folder.rglob("*"))
            if p.is_file() and ".cache" not in p.relative_to(folder).parts
        }
        return cls(repo_id, files)

    def commit_of(self, revision: str | None) -> str | None:
        return self.commit if revision in (None, "main", self.commit) else None


def _handler(repo: FakeHubRepo) -> type[BaseHTTPRequestHandler]:  # noqa: C901 - the sum of the nested class's short methods
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # requests go to repo.requests instead
            pass

        def do_GET(self) -> None:
            self._answer(body=True)

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def _send(self, status: int, data: bytes, headers: dict[str, str], body: bool) -> None:
            repo.requests.append((self.command, self.path, status))
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if body:
                self.wfile.write(data)

        def _json(self, obj: object, body: bool) -> None:
            self._send(200, json.dumps(obj).encode(), {"Content-Type": "application/json"}, body)

        def _error(self, status: int, code: str, message: str, body: bool) -> None:
            headers = {"Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": message}
            self._send(status, json.dumps({"error": message}).encode(), headers, body)

        def _answer(self, body: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            if path == "/api/agent-harnesses":  # huggingface_hub >= 1.x asks once a day, for its user agent
                self._json({"standardEnvVars": [], "harnesses": {}}, body)
            elif m := _API.match(path):
                self._api(m, body)
            elif m := _RESOLVE.match(path):
                self._resolve(m, body)
            else:
                self._error(404, "NotFound", f"no route for {path}", body)

        def _known(self, m: re.Match[str], body: bool) -> str | None:
            """The commit the request names, or None after answering 404 as the hub does."""
            if m["repo"] != repo.repo_id:
                self._error(404, "RepoNotFound", f"Repository {m['repo']} not found", body)
                return None
            commit = repo.commit_of(m["rev"])
            if commit is None:
                self._error(404, "RevisionNotFound", f"Invalid rev id: {m['rev']}", body)
            return commit

        def _api(self, m: re.Match[str], body: bool) -> None:
            if self._known(m, body) is None:
                return
            if m["what"] == "tree":
                prefix = (m["sub"] or "").strip("/")
                entries = [f.tree_entry() for p, f in repo.files.items() if p.startswith(prefix)]
                self._json(entries, body)
                return
            siblings = [{"rfilename": p} for p in repo.files]
            self._json({"id": repo.repo_id, "modelId": repo.repo_id, "sha": repo.commit, "siblings": siblings}, body)

        def _resolve(self, m: re.Match[str], body: bool) -> None:
            if self._known(m, body) is None:
                return
            f = repo.files.get(m["file"])
            if f is None:
                self._send(404, b"", {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": repo.commit}, body)
                return
            headers = {"X-Repo-Commit": repo.commit, "ETag": f'"{f.etag}"', "Accept-Ranges": "bytes"}
            if f.lfs:
                headers |= {"X-Linked-Etag": f'"{f.sha256}"', "X-Linked-Size": str(len(f.data))}
            data, status = f.data, 200
            if (rng := re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))) and body:
                start = int(rng[1])
                data, status = f.data[start:], 206
                headers["Content-Range"] = f"bytes {start}-{len(f.data) - 1}/{len(f.data)}"
            self._send(status, data, headers, body)

    return Handler


@contextmanager
def serve_repo(repo: FakeHubRepo) -> Iterator[FakeHubRepo]:
    """Serve ``repo`` on a free local port (``repo.url``) for the duration of the block."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(repo))
    httpd.daemon_threads = True
    repo.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, name="fake-hub", daemon=True)
    thread.start()
    try:
        yield repo
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)
