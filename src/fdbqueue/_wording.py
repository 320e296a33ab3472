"""Wording shared by the command line and the benchmark's report."""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless ``count`` is 1: ``1 dead letter``, ``2 items``."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"
