"""The bottom layer: what the host, the engine, the verifier and every stage image share.

Standard library only (it is imported inside every stage image, before any
heavy dependency), and it imports nothing else of trace_tui (the layers
contract keeps it apart from ``trace_tui.errors``). One definition of each thing:

- ``digest``: sha256 of files, bytes and text; canonical JSON; ``sha256set:``.
- ``atomic``: all-or-nothing file writes (temp, fsync, rename, directory fsync).
- ``images_lock``: the one tolerant reader of ``images.lock.json``'s image names.
- ``safe_read``: reading a file of a folder handed over (a release, a campaign): a regular file,
  inside the folder, at most so many bytes.
- ``safe_write``: writing into a campaign handed over: never through a link, never outside it.
"""
