"""One module per subcommand: ``add_arguments(parser)`` and ``run(args) -> int``, stdlib-only imports at top."""
