"""`verify --campaign`: the campaign checked offline, and compared with the release's published values where
they are at hand (the release directory given, else the release files in the store)."""

from __future__ import annotations

from pathlib import Path

from trace_tui import paths
from trace_tui.release import release_lock
from trace_tui.service.requests import VerifyRequest
from trace_tui.store.names import release_entry
from trace_tui.store.store import Store
from trace_tui.verify.campaign import CampaignVerification, load_published, verify_campaign

Published = dict[tuple[str, int | None, str], tuple[float, float]]


def published_values(request: VerifyRequest) -> tuple[Published | None, str | None]:
    """(published (mean, std) per model, seed and benchmark, where they came from); (None, None) when the release
    directory was not given and the store holds no release files (the output says there is nothing to compare)."""
    if request.release_dir is not None:
        return load_published(request.release_dir.expanduser()), str(request.release_dir)

    try:
        lock = release_lock()
        store = Store(paths.store_dir(paths.home(request.home)))
        name = release_entry(lock)
        if store.has(name):
            where = store.path_of(name)
            return load_published(where, lock), str(where)
    except Exception:  # noqa: BLE001 - no store or no release entry: no comparison, said in the output
        pass
    return None, None


def verify_campaign_request(request: VerifyRequest) -> CampaignVerification:
    published, source = published_values(request)
    return verify_campaign(Path(request.campaign), published=published, published_source=source)
