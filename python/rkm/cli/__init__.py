"""The ``rkm`` command: ``info``, ``demo`` (rkm.cli.demo) and ``bench`` (rkm.cli.bench)."""

from rkm.cli.commands import build_parser, main

__all__ = ["build_parser", "main"]
