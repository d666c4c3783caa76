"""Helpful messages: "did you mean" for a mistyped option, command or construction name, the
constructions that fit a dataset's task, and counted nouns in the singular or plural.

A mistyped option is the commonest first mistake (``build --contruction vys``). argparse meets
it as an unknown argument, but reports first whatever required option the typo left missing
("the following arguments are required: --construction"), which hides the cause. The parser
here (:class:`Parser`, the class of every ``exactmem`` parser) names the unknown option and the
closest known one instead. Suggestions are labels for the user only: nothing is decided by them.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence

from exactmem.core.wording import closest, did_you_mean, plural

__all__ = ["Parser", "closest", "constructions_for", "did_you_mean", "plural", "wrong_task"]


def constructions_for(task: str) -> list[str]:
    """The registered constructions whose checklist takes datasets of ``task``, in the
    registry's order."""
    from exactmem.checks import registry

    return [
        name
        for name, c in registry.loaded().items()
        if c.checklist is not None and task in c.checklist.tasks
    ]


def wrong_task(construction: str, task: str, verb: str = "needs") -> str | None:
    """Why ``construction`` cannot take a dataset of ``task``, naming the constructions that
    can (the one whose name is closest first); None when it can, or when its checklist names
    no tasks (a plugin's builder then decides). ``verb``: what the construction does with the
    task ("needs" to build, "certifies" to verify)."""
    from exactmem.checks import registry

    found = registry.find(construction)
    if found is None or found.checklist is None or not found.checklist.tasks:
        return None
    tasks = found.checklist.tasks
    if task in tasks:
        return None
    fits = constructions_for(task)
    needs = " or ".join(repr(t) for t in tasks)
    message = f"construction {construction!r} {verb} task {needs}, the dataset has {task!r}"
    if not fits:
        return message + " (no installed construction takes it)"
    best = closest(construction, fits) or fits[0]
    rest = [f for f in fits if f != best]
    also = f" (or {', '.join(rest)})" if rest else ""
    return f"{message}; for {task} data, use --construction {best}{also}"


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors name a mistyped option or choice and the closest known
    one ("unrecognized option --contruction; did you mean --construction?") in place of the
    error it caused (a required option reported missing). Sub-parsers are of this class too."""

    _seen: Sequence[str] = ()

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        self._seen = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):  # type: ignore[override]
        hint = self._mistyped()
        target = self
        if hint is not None:
            message, target = hint, self._chosen() or self  # the command's usage, not the top's
        elif "invalid choice:" in message:
            message += self._choice_hint(message)
        argparse.ArgumentParser.error(target, message)

    def _chosen(self) -> Parser | None:
        """The sub-parser of the command given (the top-level parser reports the unknown
        arguments its sub-parser left)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for token in self._seen:
                    parser = action.choices.get(token)
                    if parser is not None:
                        return parser if isinstance(parser, Parser) else None
        return None

    def _mistyped(self) -> str | None:
        """ "unrecognized option X; did you mean Y?" for the first ``--option`` given that is
        neither one of this parser's (nor a prefix of one), or None."""
        chosen = self._chosen()
        if chosen is not None:
            return chosen._mistyped()
        known = [s for a in self._actions for s in a.option_strings if s.startswith("--")]
        for token in self._seen:
            if token == "--":
                break
            if not token.startswith("--"):
                continue
            name = token.split("=", 1)[0]
            if name in known or (self.allow_abbrev and any(k.startswith(name) for k in known)):
                continue
            import difflib

            best = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            if best:
                return f"unrecognized option {name}; did you mean {best[0]}?"
            return None
        return None

    def _choice_hint(self, message: str) -> str:
        """``; did you mean X?`` for argparse's "invalid choice: 'v' (choose from 'a', …)"."""
        found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if found is None:
            return ""
        return did_you_mean(found.group(1), re.findall(r"'([^']*)'", found.group(2)))
