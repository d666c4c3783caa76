"""Words for messages: counted nouns in the singular or plural, and the closest of a few names
("did you mean"). Pure functions of their arguments, so every module may use them (the dataset
side included); :mod:`exactmem.commands.suggest` adds what needs the registry and the parser."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["closest", "did_you_mean", "plural"]


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``count`` and ``noun``, plural unless ``count`` is 1: ``plural(1, "pair")`` is
    "1 pair", ``plural(2, "pair")`` "2 pairs"; ``many`` for an irregular plural."""
    return f"{count} {noun if count == 1 else (many or noun + 's')}"


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice closest to ``word`` (difflib's ratio, at least 0.6), or None. The first choice
    that ``word`` is a prefix of wins (``ks25`` → ``ks25-next-token``)."""
    import difflib  # here: the CLI imports this module for every command, even --help

    options = list(choices)
    starts = [c for c in options if c.startswith(word) and word]
    if starts:
        return starts[0]
    found = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean X?"`` for the closest choice, or an empty string."""
    best = closest(word, choices)
    return f"; did you mean {best}?" if best is not None else ""
