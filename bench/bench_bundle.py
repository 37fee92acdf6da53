"""Bundle export/import throughput against `docker save` / `docker load` and `sha256sum`.

Target: within 1.3x of the plain tools on the same image in the same run.
Uses the local base image (present wherever the cpu flavour was built).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

IMAGE = "trace-tui/debian-base:bookworm"


def _time(fn) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def run() -> list[str]:
    from trace_tui import images

    client = images.docker_client()
    img = client.images.get(IMAGE)
    # A bundle's lock names an image for each stage, tagged as trace-tui tags it: here all three are
    # the one base image under bench tags (removed at the end), which the export saves once.
    tags = {name: f"trace-tui/{name}:bench-cpu" for name in images.IMAGE_NAMES}
    for tag in tags.values():
        img.tag(tag)
    lock = images.ImagesLock(flavor="cpu", version="bench", images={
        name: images.LockedImage(name=name, tag=tag, id=img.id, base_image=IMAGE, base_id=img.id,
                                 build_args={}, requirement_locks={}) for name, tag in tags.items()})
    try:
        return _run(client, img, lock)
    finally:
        for tag in tags.values():
            client.images.remove(tag, noprune=True)


def _run(client, img, lock) -> list[str]:  # type: ignore[no-untyped-def]
    from trace_tui import bundle
    from trace_tui.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        t_save = _time(lambda: subprocess.run(["docker", "save", "-o", str(tmpd / "plain.tar"), img.id], check=True))
        t_sum = _time(lambda: subprocess.run(["sha256sum", str(tmpd / "plain.tar")], check=True, capture_output=True))
        t_export = _time(lambda: bundle.export_bundle(tmpd / "b", recipe="bench", entries=[], store=Store(tmpd / "s"),
                                                      images_lock=lock, client=client, say=lambda _m: None,
                                                      wheelhouse=False))
        t_load = _time(lambda: subprocess.run(["docker", "load", "-q", "-i", str(tmpd / "plain.tar")], check=True,
                                              capture_output=True))
        t_import = _time(lambda: bundle.import_bundle(tmpd / "b", store=Store(tmpd / "s2"), client=client,
                                                      images_lock_path=tmpd / "lock.json", say=lambda _m: None))
        size = (tmpd / "plain.tar").stat().st_size >> 20
        shutil.rmtree(tmpd / "b")
    return [
        f"image {IMAGE}: {size} MiB",
        f"export {t_export:.2f} s vs docker save + sha256sum {t_save + t_sum:.2f} s: ratio {t_export / (t_save + t_sum):.2f} (target <= 1.3)",
        f"import {t_import:.2f} s vs sha256sum + docker load {t_sum + t_load:.2f} s: ratio {t_import / (t_sum + t_load):.2f} (target <= 1.3)",
    ]
