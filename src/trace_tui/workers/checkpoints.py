"""Where a training worker left its checkpoint: the folder its run receipt names (``checkpoint.path``,
campaign-relative), which must be a folder inside the job's own output folder. The runner signs what
this names (trace_tui.engine.execution), so a receipt is data here like any file a worker wrote."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from trace_tui.campaign_files.state import MIB, cut, read_campaign_json
from trace_tui.errors import CheckFailed

RUN_RECEIPT = "run_receipt.json"


def trained_checkpoints(campaign: Path, out_rel: str) -> list[str]:
    """The campaign-relative checkpoint folder the train worker's run receipt in OUT_REL names ([] when it
    names none). ValueError, a phrase naming the file and the value, when that is not a folder inside OUT_REL."""
    receipt = campaign / out_rel / RUN_RECEIPT
    try:
        data = read_campaign_json(receipt, limit=MIB)
    except FileNotFoundError:
        return []
    except CheckFailed as exc:
        raise ValueError(exc.message) from None
    named = data.get("checkpoint") if isinstance(data, dict) else None
    if named is None:
        return []
    rel = named.get("path") if isinstance(named, dict) else None
    parts = PurePosixPath(rel).parts if isinstance(rel, str) and rel and "\x00" not in rel else ()
    top = PurePosixPath(out_rel).parts
    if len(parts) <= len(top) or parts[:len(top)] != top or ".." in parts or PurePosixPath(rel).is_absolute():
        raise ValueError(f"{receipt}: checkpoint.path {cut(rel)} is not a folder inside {out_rel}")
    here = campaign
    for part in parts:  # every folder on the way a real one, never a link out of the campaign
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except OSError:
            raise ValueError(f"{receipt}: checkpoint.path {cut(rel)} is not there") from None
        if not stat.S_ISDIR(mode):
            raise ValueError(f"{receipt}: checkpoint.path {cut(rel)} is not a folder (at {here.name})")
    return [rel]
