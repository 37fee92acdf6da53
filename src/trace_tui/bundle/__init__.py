"""Air-gapped bundles: everything a recipe needs to run with no network, in one directory.

Layout::

    DIR/manifest.json        sha256 and size of every other file (written last but one)
    DIR/manifest.dsse.json   the signature: an in-toto Statement of every file, image and entry
                             with its digest, in a DSSE envelope (signature.py)
    DIR/signing-key.pub.json the signer's public key, for the operator to compare (never trusted
                             for being here)
    DIR/images.lock.json     the image lock the images were built under
    DIR/images/stages.tar    one `docker save` of every stage image: layers the
                             images share (infer and score share nearly all) once
    DIR/store/<kind>/<dir>/  the store entries the recipe needs (record + files)
    DIR/wheelhouse/          trace-tui's own wheel and its host dependencies

A bundle comes from elsewhere and is input, not trusted. Import first checks all that can be
checked without changing the host: its signature against the keys the site trusts (an unsigned
bundle is refused: images and hub-stated models enter only as signed subjects), then that the
manifest, files, images and entries are exactly what was signed, no symbolic link or special file anywhere in it, the
manifest (a missing, extra or altered file is refused by name), the image lock (one image per
stage, each under a trace-tui stage tag), the image archives' own index (the images they hold and
the tags `docker load` would apply), and every store entry's record. Only then does it change the
host, in this order: the store entries (through the store's verifying import), the images (loaded
untagged, their ids checked against the lock: a registry digest does not survive save/load, the id
does), the lock's tags, and the image lock last. A failure on the way takes back what this import
added, and its one line says what was and was not changed.

The package, by concern (each module imports only those above it):

    files.py      the manifest's model; listing and reading the bundle folder; check_bundle
    signature.py  the signed statement: writing it, verifying it, holding the bundle to it
    export.py     writing a bundle: export_bundle, the image archive, the wheelhouse
    archives.py   the image lock's checks (stage tags), the archives' own index, the untagged load
    importing.py  the store entries' checks, check_before_import, import_bundle and its undo
"""

from __future__ import annotations

from trace_tui.bundle.files import (CHUNK, LOCK_FILE, MANIFEST, MANIFEST_LIMIT, RECORD_LIMIT, REEXPORT, BundleFile,
                                    BundleManifest, RecipeName, Say, bundle_files, check_bundle, read_manifest, shown)
from trace_tui.bundle.signature import PUBLIC_KEY_FILE, SIGNATURE
from trace_tui.bundle.export import IMAGES_TAR, UNSIZED_STEP, _save_images, entries_to_carry, export_bundle
from trace_tui.bundle.archives import (DOCKER_MANIFEST, IMAGE_ID, INDEX_LIMIT, OCI_INDEX, REPOSITORIES, ArchiveIndex,
                                       is_stage_tag, load_untagged, read_archive_index, stage_tag_rule)
from trace_tui.bundle.importing import CheckedBundle, HostChanges, _import_entry, check_before_import, import_bundle

__all__ = [
    # files
    "CHUNK", "LOCK_FILE", "MANIFEST", "MANIFEST_LIMIT", "RECORD_LIMIT", "REEXPORT", "BundleFile", "BundleManifest",
    "RecipeName", "Say", "bundle_files", "check_bundle", "read_manifest", "shown",
    # signature
    "PUBLIC_KEY_FILE", "SIGNATURE",
    # export
    "IMAGES_TAR", "UNSIZED_STEP", "_save_images", "entries_to_carry", "export_bundle",
    # archives
    "DOCKER_MANIFEST", "IMAGE_ID", "INDEX_LIMIT", "OCI_INDEX", "REPOSITORIES", "ArchiveIndex", "is_stage_tag",
    "load_untagged", "read_archive_index", "stage_tag_rule",
    # importing
    "CheckedBundle", "HostChanges", "_import_entry", "check_before_import", "import_bundle",
]
