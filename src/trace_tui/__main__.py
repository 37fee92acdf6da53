from trace_tui.cli import entry

entry()
