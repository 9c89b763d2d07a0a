"""The ``datacheck`` command line: a thin layer over :mod:`datacheck.api`.

Exit codes (DESIGN.md): 0 pass; 1 the policy failed; 2 usage or config error; 3 internal error.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import traceback

from datacheck import __version__
from datacheck.constants import EXIT_INTERNAL, EXIT_OK, EXIT_POLICY_FAILED, EXIT_USAGE
from datacheck.errors import DatacheckError, PolicyFailed, ReportVersionError, UsageError

__all__ = ["main", "build_parser"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with the message, as argparse does, but our wording
        self.print_usage(sys.stderr)
        print(f"datacheck: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="datacheck", description="Audit ML training data shards before training.")
    p.add_argument("--version", action="version", version=f"datacheck {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in _command_modules():
        mod = importlib.import_module(f"datacheck.commands.{name}")
        sp = mod.add_parser(sub)
        sp.set_defaults(_run=mod.run)
    return p


def _command_modules() -> list[str]:
    """Every module in datacheck/commands/ is a verb with ``add_parser(subparsers)`` and ``run(args) -> int``."""
    import pkgutil

    import datacheck.commands as pkg

    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))
    return ["audit"] + [n for n in names if n != "audit"]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return args._run(args)
    except (UsageError, ReportVersionError) as exc:
        print(f"datacheck: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except PolicyFailed as exc:
        print(f"datacheck: {exc}", file=sys.stderr)
        return EXIT_POLICY_FAILED
    except DatacheckError as exc:
        print(f"datacheck: internal error: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        print("datacheck: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception:
        print("datacheck: internal error (a bug; please report it with this traceback):", file=sys.stderr)
        traceback.print_exc()
        return EXIT_INTERNAL
