"""One module per CLI verb (pipx style): ``add_parser(subparsers)`` and ``run(args) -> int``."""
