"""The ``datacheck`` command line: :mod:`datacheck.cli.main` (the parser, exit codes) and one module
per verb in :mod:`datacheck.cli.commands`."""
