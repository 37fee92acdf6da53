"""A Hub dataset snapshot from the store, served to ``datasets.load_dataset(REPO_ID, split=...)`` offline.

The release's EvoChart and CountQA adapters build their TSV with ``load_dataset(HF_DATASET, split=...)``
(no revision, no data files) under the HF_HOME the launcher sets. Offline, ``datasets`` (5.x, the score
image's) never reads the Hub file cache (``hub/datasets--OWNER--NAME/snapshots/...``): with the Hub out
of reach it falls back to the prepared Arrow cache, ``<HF_DATASETS_CACHE>/<owner>___<snake name>/<config>/
<version>/<hash>/`` (dataset_info.json and ``<snake name>-<split>.arrow``), which a first online load
writes. This module writes that cache from the store's snapshot with ``datasets`` itself: the snapshot is
read as a local dataset folder (its README's configs and the Hub's split patterns resolved by the same
code), prepared, and put under the repository's cache name, with the pinned commit as its hash folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def cached_dataset_dirname(repo_id: str) -> str:
    """The folder ``datasets`` looks up for REPO_ID in HF_DATASETS_CACHE (CachedDatasetModuleFactory)."""
    from datasets.naming import camelcase_to_snakecase

    owner, _, name = repo_id.rpartition("/")
    return f"{owner}___{camelcase_to_snakecase(name)}" if owner else camelcase_to_snakecase(name)


def cached_revision(datasets_cache: Path, repo_id: str) -> str | None:
    """The commit of the prepared cache of REPO_ID under DATASETS_CACHE (its one hash folder), if complete."""
    done = sorted((datasets_cache / cached_dataset_dirname(repo_id)).glob("*/*/*/dataset_info.json"))
    return done[0].parent.name if len(done) == 1 else None


def cache_hub_dataset(snapshot: Path, repo_id: str, revision: str, datasets_cache: Path) -> Path:
    """The prepared cache of SNAPSHOT (REPO_ID at REVISION) under DATASETS_CACHE, replacing any other of
    REPO_ID (``datasets`` would pick the most recent of several); returns its folder. Kept as it is when
    it is already the cache of REVISION."""
    from datasets import load_dataset_builder

    dest_root = datasets_cache / cached_dataset_dirname(repo_id)
    if cached_revision(datasets_cache, repo_id) == revision:
        return next(dest_root.glob(f"*/*/{revision}"))
    datasets_cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".building-", dir=datasets_cache))
    try:
        # Read under the repository's name, so the Arrow files carry the name `datasets` derives from it.
        local = work / repo_id.rpartition("/")[2]
        local.symlink_to(snapshot.resolve(), target_is_directory=True)
        builder = load_dataset_builder(str(local), cache_dir=str(work / "prepared"))
        builder.download_and_prepare()
        built = Path(builder.cache_dir)
        config, version = built.parts[-3], built.parts[-2]
        staged = work / "out" / dest_root.name / config / version / revision
        staged.parent.mkdir(parents=True)
        os.replace(built, staged)
        if dest_root.exists():
            shutil.rmtree(dest_root)
        os.replace(work / "out" / dest_root.name, dest_root)
        return dest_root / config / version / revision
    finally:
        shutil.rmtree(work, ignore_errors=True)
