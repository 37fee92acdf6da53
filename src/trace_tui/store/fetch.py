"""`trace-tui store fetch`: download what a recipe needs that the store lacks, verified.

- Models and datasets come from the Hugging Face hub at the pinned commit (never a branch):
  the hub's metadata for that revision (``model_info``/``get_paths_info``, then a HEAD on each
  file's resolve URL, exactly as ``hf_hub_download`` does) states each file's size and hash
  (LFS sha256, or the git blob id for small files) and the commit the revision resolves to.
- Release files come from the upstream repository's raw file URL at the pinned commit
  (``$TRACE_TUI_RELEASE_URL``, default ``https://raw.githubusercontent.com``), checked through
  the release manifest whose sha256 the lock pins.
- Benchmark files come from the provenance matrix's locations, checked against its md5.

Bytes go to ``store/partial/.../<file>.part`` and are resumed with an HTTP Range request after
an interruption (huggingface_hub's ``http_get`` does the transfer, retries and Range); a file
enters a staging folder only once complete, and the entry enters the store only once every file
has been verified. ``HF_TOKEN`` and the standard Hugging Face configuration (``HF_ENDPOINT``,
the saved token, ``HF_HUB_OFFLINE``) are honoured; the token is never logged and never sent to
hosts other than the hub.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable
from urllib.parse import urlsplit

from trace_tui.errors import CheckFailed, RequirementsError, TraceTuiError
from trace_tui.logs import redact_text
from trace_tui.store import names as N
from trace_tui.store import sources as S
from trace_tui.store.importer import dataset_plan_checked, provenance_bytes
from trace_tui.store.manifest import EntryRecord, Expected, Source
from trace_tui.store.store import Staging, Store

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.release import ReleaseLock

DEFAULT_RELEASE_URL = "https://raw.githubusercontent.com"


@dataclass(frozen=True)
class FetchProgress:
    entry: str
    file: str
    done: int
    total: int | None
    phase: str  # "download" | "stored" | "skipped"


OnProgress = Callable[[FetchProgress], None]


def hf_endpoint() -> str:
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def _release_url_parts() -> tuple[str, str | None, str | None]:
    """$TRACE_TUI_RELEASE_URL as (the URL without its userinfo, user, password)."""
    url = (os.environ.get("TRACE_TUI_RELEASE_URL") or DEFAULT_RELEASE_URL).rstrip("/")
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None, None
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=host).geturl(), parts.username, parts.password


def release_base_url() -> str:
    """The raw file host's URL, without credentials: a URL is printed in errors and recorded in the store."""
    return _release_url_parts()[0]


def release_headers() -> dict[str, str]:
    """The credentials $TRACE_TUI_RELEASE_URL carries (https://USER:PASSWORD@host), sent as HTTP basic
    authentication instead of in the URL, so that no message or record ever holds them."""
    import base64
    from urllib.parse import unquote

    _url, user, password = _release_url_parts()
    if user is None:
        return {}
    token = base64.b64encode(f"{unquote(user)}:{unquote(password or '')}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


class _CountingFile:
    """The file object http_get writes to: counts bytes for per-file progress."""

    def __init__(self, fh: IO[bytes], on_bytes: Callable[[int], None]) -> None:
        self._fh = fh
        self._on_bytes = on_bytes

    def write(self, data: bytes) -> int:
        n = self._fh.write(data)
        self._on_bytes(len(data))
        return n

    def tell(self) -> int:
        return self._fh.tell()

    def seek(self, *args: int) -> int:
        return self._fh.seek(*args)

    def truncate(self, *args: int) -> int:
        n = self._fh.truncate(*args)
        self._on_bytes(0)
        return n


def _hub_error(exc: BaseException, what: str) -> TraceTuiError:
    """One line for a hub or network failure (messages carry URLs, never the token)."""
    from huggingface_hub import errors as E

    if isinstance(exc, E.GatedRepoError):
        return RequirementsError(f"{what}: gated repository, access not granted to this token",
                                 hint="accept the terms on the hub and set HF_TOKEN")
    if isinstance(exc, E.RevisionNotFoundError):
        return CheckFailed(f"{what}: the pinned revision does not exist on the hub")
    if isinstance(exc, E.RepositoryNotFoundError):
        return CheckFailed(f"{what}: repository not found (or private: set HF_TOKEN)")
    if isinstance(exc, E.EntryNotFoundError):
        return CheckFailed(f"{what}: not at the pinned revision on the hub")
    import re

    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    # signed URLs carry credentials in their query string; tokens never appear, but redact anyway
    text = redact_text(re.sub(r"(https?://[^\s?'\"]+)\?[^\s'\"]*", r"\1", text))
    return RequirementsError(f"{what}: {text}", hint="no network? use `trace-tui store import DIR`")


def download(url: str, part: Path, *, headers: dict[str, str], expected_size: int | None,
             on_bytes: Callable[[int, int | None], None] = lambda _d, _t: None, display: str) -> Path:
    """Download ``url`` into ``part``, resuming what an earlier, interrupted run left there."""
    from huggingface_hub.file_download import http_get

    part.parent.mkdir(parents=True, exist_ok=True)
    with open(part, "ab") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CheckFailed(f"{display}: another fetch is downloading this file") from None
        have = fh.tell()
        if expected_size is not None and have > expected_size:
            fh.truncate(0)  # longer than the file can be: not a prefix of it
            have = 0
        if expected_size is not None and have == expected_size:
            on_bytes(have, expected_size)
            return part
        done = [have]

        def count(n: int) -> None:
            done[0] = fh.tell() if n == 0 else done[0] + n
            on_bytes(done[0], expected_size)

        try:
            http_get(url, _CountingFile(fh, count), resume_size=have, headers=headers,
                     expected_size=expected_size, displayed_filename=display)
        except OSError as exc:
            from huggingface_hub import errors as E

            if isinstance(exc, E.HfHubHTTPError):
                if have > 0 and _status(exc) == 416:
                    # the part was already complete (interrupted between download and staging):
                    # it is verified like any other download
                    on_bytes(have, have)
                    return part
                raise
            fh.flush()
            got = fh.tell()
            if expected_size is not None and got > expected_size:
                fh.truncate(0)
            raise CheckFailed(f"{display}: download incomplete ({got} of {expected_size} bytes)",
                              hint="run the fetch again to resume") from None
    return part


class Fetcher:
    def __init__(self, store: Store, lock: "ReleaseLock", *, on_progress: OnProgress = lambda _p: None,
                 on_log: Callable[[str], None] = lambda _m: None) -> None:
        self.store = store
        self.lock = lock
        self.on_progress = on_progress
        self.on_log = on_log

    # -- common --------------------------------------------------------------------------------
    def _hub_headers(self) -> dict[str, str]:
        from huggingface_hub.utils import build_hf_headers

        return build_hf_headers()

    def _get_file(self, entry: str, rel: str, url: str, headers: dict[str, str], size: int | None, *,
                  allow_missing: bool = False) -> Path | None:
        part = self.store.partial_path(entry, rel)

        def on_bytes(done: int, total: int | None) -> None:
            self.on_progress(FetchProgress(entry, rel, done, total, "download"))

        try:
            return download(url, part, headers=headers, expected_size=size, on_bytes=on_bytes,
                            display=f"{entry} {rel}")
        except TraceTuiError:
            raise
        except Exception as exc:  # noqa: BLE001 - one line naming the file
            if allow_missing and _is_not_found(exc):
                part.unlink(missing_ok=True)
                return None
            raise _hub_error(exc, f"{entry} {rel} ({_safe_url(url)})") from None

    def _stage_part(self, st: Staging, entry: str, rel: str, part: Path, expected: list[Expected],
                    size: int | None, display: str) -> None:
        """Move a complete .part into the staging folder and verify it there; a bad file is deleted,
        never resumed (its bytes are complete and wrong)."""
        try:
            st.add(rel, part, expected=expected, expected_size=size, display=display, move=True)
        finally:
            part.unlink(missing_ok=True)
        rec = st.files[rel]
        self.on_progress(FetchProgress(entry, rel, rec.size, rec.size, "stored"))

    # -- hub repositories ---------------------------------------------------------------------
    def _hub_files(self, repo_id: str, revision: str, repo_type: str, paths: list[str] | None) -> list[dict]:
        """[{path, size, sha256|None, blob_id}] stated by the hub for that revision."""
        from huggingface_hub import HfApi

        api = HfApi(endpoint=hf_endpoint())
        what = f"{repo_id}@{revision}"
        try:
            if paths is None:
                info = (api.model_info if repo_type == "model" else api.dataset_info)(
                    repo_id, revision=revision, files_metadata=True)
                if info.sha and info.sha != revision:
                    raise CheckFailed(f"{what}: the hub resolves this revision to {info.sha}",
                                      hint="a revision that does not match is refused")
                return [{"path": s.rfilename, "size": s.size, "blob_id": s.blob_id,
                         "sha256": s.lfs.sha256 if s.lfs else None} for s in info.siblings or []]
            items = api.get_paths_info(repo_id, paths, revision=revision, repo_type=repo_type)
        except TraceTuiError:
            raise
        except Exception as exc:  # noqa: BLE001 - turned into one line naming the repository
            raise _hub_error(exc, what) from None
        found = {i.path: i for i in items if hasattr(i, "blob_id")}
        for p in paths:
            if p not in found:
                raise CheckFailed(f"{what} {p}: not at the pinned revision on the hub")
        return [{"path": p, "size": found[p].size, "blob_id": found[p].blob_id,
                 "sha256": found[p].lfs.sha256 if found[p].lfs else None} for p in paths]

    def _fetch_hub_file(self, st: Staging, entry: str, repo_id: str, revision: str, repo_type: str, item: dict,
                        rel: str, extra: list[Expected] = ()) -> None:
        from huggingface_hub import hf_hub_url
        from huggingface_hub.file_download import get_hf_file_metadata

        path = item["path"]
        what = f"{repo_id}@{revision} {path}"
        url = hf_hub_url(repo_id, path, repo_type=repo_type, revision=revision, endpoint=hf_endpoint())
        headers = self._hub_headers()
        try:
            meta = get_hf_file_metadata(url, headers=headers, retry_on_errors=True)
        except Exception as exc:  # noqa: BLE001
            raise _hub_error(exc, what) from None
        if meta.commit_hash != revision:
            raise CheckFailed(f"{what}: the hub served revision {meta.commit_hash}, the pin is {revision}",
                              hint="a revision that does not match is refused")
        if item["sha256"]:
            exp = [Expected(algorithm="sha256", value=item["sha256"], source="hub metadata (LFS sha256)")]
        elif item["blob_id"]:
            exp = [Expected(algorithm="git-sha1", value=item["blob_id"], source="hub metadata (git blob id)")]
        else:
            raise CheckFailed(f"{what}: the hub states no hash for this file")
        if meta.etag and meta.etag != exp[0].value:
            raise CheckFailed(f"{what}: the hub's file header says {meta.etag}, its metadata {exp[0].value}")
        size = item["size"] if item["size"] is not None else meta.size
        location = meta.location
        dl_headers = dict(headers)
        if urlsplit(location).netloc != urlsplit(url).netloc:
            dl_headers.pop("authorization", None)  # signed CDN URLs need no token: keep it on the hub
            dl_headers.pop("Authorization", None)
        part = self._get_file(entry, rel, location, dl_headers, size)
        self._stage_part(st, entry, rel, part, exp + list(extra), size, what)

    def fetch_model(self, name: str) -> EntryRecord:
        e = N.parse(name)
        assert e.repo_id and e.revision
        items = self._hub_files(e.repo_id, e.revision, "model", None)
        if not items:
            raise CheckFailed(f"{e.repo_id}@{e.revision}: the hub lists no files")
        with self.store.staging(name) as st:
            for item in items:
                self._fetch_hub_file(st, name, e.repo_id, e.revision, "model", item, item["path"])
            return st.commit(revision=e.revision,
                             source=Source(type="huggingface", repo_id=e.repo_id, repo_type="model",
                                           revision=e.revision, url=hf_endpoint()),
                             notes={"verified_against": "hub metadata at the pinned revision"})

    def fetch_dataset(self, name: str) -> EntryRecord:
        e = N.parse(name)
        if name != N.dataset_entry(self.lock, e.split or ""):
            raise CheckFailed(f"{name}: the release pins {N.dataset_entry(self.lock, e.split or 'validation')}")

        plan = dataset_plan_checked(self.store, self.lock, e.split or "")
        ds = self.lock.dataset
        items = self._hub_files(ds.repo_id, ds.revision, "dataset", [f.path for f in plan.files])
        specs = plan.by_path()
        with self.store.staging(name) as st:
            for item in items:
                spec = specs[item["path"]]
                if item["sha256"] and item["sha256"] != spec.expected[0].value:
                    raise CheckFailed(f"{ds.repo_id}@{ds.revision} {item['path']}: the hub states sha256 "
                                      f"{item['sha256']}, the equivalence receipt {spec.expected[0].value}")
                self._fetch_hub_file(st, name, ds.repo_id, ds.revision, "dataset", item, item["path"],
                                     extra=list(spec.expected))
            return st.commit(revision=ds.revision,
                             source=Source(type="huggingface", repo_id=ds.repo_id, repo_type="dataset",
                                           revision=ds.revision, url=hf_endpoint()), notes=plan.notes)

    # -- release ------------------------------------------------------------------------------
    def _raw_url(self, ref: str, path: str) -> str:
        return f"{release_base_url()}/{self.lock.upstream.repository}/{ref}/{path}"

    def fetch_release(self, name: str) -> EntryRecord:
        commit = self.lock.upstream.commit
        if name != N.release_entry(self.lock):
            raise CheckFailed(f"{name}: the release pins {N.release_entry(self.lock)}")
        mpath = self._get_file(name, S.RELEASE_MANIFEST, self._raw_url(commit, S.RELEASE_MANIFEST), release_headers(),
                               None)
        assert mpath is not None
        data = mpath.read_bytes()
        try:
            S.check_release_manifest(self.lock, data, self._raw_url(commit, S.RELEASE_MANIFEST))
        except CheckFailed:
            mpath.unlink(missing_ok=True)
            raise
        plan = S.release_plan(self.lock, data)
        absent: list[str] = []
        with self.store.staging(name) as st:
            for spec in plan.files:
                url = self._raw_url(commit, spec.path)
                if spec.path != S.RELEASE_MANIFEST:
                    part = self._get_file(name, spec.path, url, release_headers(), spec.size,
                                          allow_missing=not spec.required)
                    if part is None:  # a file the appliance does not read, missing upstream: recorded absent
                        absent.append(spec.path)
                        self.on_progress(FetchProgress(name, spec.path, 0, None, "skipped"))
                        continue
                else:
                    part = mpath
                self._stage_part(st, name, spec.path, part, list(spec.expected), spec.size, url)
            return st.commit(revision=commit,
                             source=Source(type="git-raw", repo_id=self.lock.upstream.repository, revision=commit,
                                           url=release_base_url()), absent=absent, notes=plan.notes)

    def fetch_paper(self, name: str) -> EntryRecord:
        plan = S.paper_plan(self.lock)
        spec = plan.files[0]
        url = self._raw_url(self.lock.upstream.paper_branch, spec.path)
        with self.store.staging(name) as st:
            part = self._get_file(name, spec.path, url, release_headers(), None)
            self._stage_part(st, name, spec.path, part, list(spec.expected), None, url)
            return st.commit(revision=None, source=Source(type="git-raw", repo_id=self.lock.upstream.repository,
                                                          url=release_base_url()), notes=plan.notes)

    # -- benchmarks ---------------------------------------------------------------------------
    def fetch_benchmark(self, name: str, sources: dict[str, S.BenchmarkSource] | None = None) -> EntryRecord:
        key = N.parse(name).key or ""
        if sources is None:
            sources = S.benchmark_sources(provenance_bytes(self.store, self.lock))
        src = sources.get(key)
        if src is None:
            raise CheckFailed(f"{name}: not in the provenance matrix {S.PROVENANCE}")
        notes: dict[str, Any] = {} if src.md5 else {
            "checksum": "the provenance matrix publishes none; sha256 computed on download"}
        with self.store.staging(name) as st:
            if src.kind == "url":
                assert src.url
                part = self._get_file(name, src.filename, src.url, {}, None)
                self._stage_part(st, name, src.filename, part, list(src.expected()), None, src.url)
                source = Source(type="url", url=src.url)
            else:
                assert src.repo_id and src.revision
                paths = [src.path] if src.kind == "hf-file" and src.path else None
                items = self._hub_files(src.repo_id, src.revision, "dataset", paths)
                for item in items:
                    rel = src.filename if paths else item["path"]
                    extra = list(src.expected()) if paths else []
                    self._fetch_hub_file(st, name, src.repo_id, src.revision, "dataset", item, rel, extra=extra)
                source = Source(type="huggingface", repo_id=src.repo_id, repo_type="dataset",
                                revision=src.revision, url=hf_endpoint())
            return st.commit(revision=src.revision, source=source, notes=notes)

    # -- dispatch -----------------------------------------------------------------------------
    def fetch(self, name: str) -> EntryRecord:
        e = N.parse(name)
        if e.kind == "local":
            raise RequirementsError(f"{name}: a local entry has no upstream to fetch from",
                                    hint=f"trace-tui store import --local {e.key} PATH")
        if _offline():
            raise RequirementsError(f"{name}: HF_HUB_OFFLINE is set, nothing is downloaded",
                                    hint="use `trace-tui store import DIR`")
        self.on_log(f"fetching {name}")
        return {"model": self.fetch_model, "dataset": self.fetch_dataset, "release": self.fetch_release,
                "paper": self.fetch_paper, "benchmark": self.fetch_benchmark}[e.kind](name)


def _safe_url(url: str) -> str:
    """A URL without query string (signed URLs carry credentials there) or userinfo."""
    return redact_text(url.split("?", 1)[0])


def _status(exc: BaseException) -> int | None:
    return getattr(getattr(exc, "response", None), "status_code", None)


def _is_not_found(exc: BaseException) -> bool:
    return _status(exc) == 404


def fetch_order(names: list[str]) -> list[str]:
    """The release first: benchmark files are checked against its provenance matrix."""
    return N.dependency_order(names)


@dataclass
class FetchResult:
    fetched: list[EntryRecord]
    present: list[str]
    failed: list[tuple[str, TraceTuiError]]


def fetch_missing(store: Store, lock: "ReleaseLock", names: list[str], *, on_progress: OnProgress = lambda _p: None,
                  on_log: Callable[[str], None] = lambda _m: None) -> FetchResult:
    """Fetch every named entry the store lacks. One entry failing (a gated model, a bad file) does not
    stop the others; an interruption (Ctrl-C) does, and the next run resumes where it stopped."""
    fetcher = Fetcher(store, lock, on_progress=on_progress, on_log=on_log)
    result = FetchResult([], [], [])
    for name in fetch_order(names):
        if store.has(name):
            result.present.append(name)
            continue
        try:
            result.fetched.append(fetcher.fetch(name))
        except TraceTuiError as exc:
            on_log(f"failed {name}: {exc.line()}")
            result.failed.append((name, exc))
    return result
