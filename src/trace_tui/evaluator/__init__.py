"""The release's own evaluator, driven from outside: its pinned sources for the images (`source`), the
command lines and environments the workers launch it with (`launcher`), and its campaign layout read back as
progress and scores (`layout`)."""
