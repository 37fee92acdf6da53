from trace_tui.cli import main

raise SystemExit(main())
