"""A construction's build options (``--set KEY=VALUE``) as data and as criteria (trusted): parsed
by the parsers the construction registers
(:attr:`~exactmem.checks.checklist.Construction.options`), and bounded by the dataset before any
work — the same code for ``build``, ``verify --set``, :func:`exactmem.certify` (``options=``),
``recheck`` and the claim files' ``[options]``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from exactmem.core.errors import InputError
from exactmem.core.wording import did_you_mean

__all__ = ["LIMITS_HELP", "OPTION_LIMITS", "check_option_limits", "options_of", "parse_options"]


VALUE_CHARS = 10_000  # any --set value (paper_direction lists a rational per coordinate)


def options_of(construction: str) -> Mapping[str, tuple[str, Callable[[str, str], object]]]:
    """The ``--set`` options of a registered construction (:mod:`exactmem.checks.registry`): the
    built-ins' tables (:mod:`exactmem.plugins.options`), or what a plugin declares."""
    from exactmem.checks import registry  # (the registry imports the checklists: not for --help)

    try:
        return registry.get(construction).options
    except KeyError as exc:
        raise InputError(f"--construction {exc.args[0]}") from None


def parse_options(construction: str, items: Sequence[str]) -> dict:
    """``--set KEY=VALUE`` pairs, checked against the construction's options."""
    known = options_of(construction)
    options: dict = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"--set {item[:80]!r}: expected KEY=VALUE")
        if key not in known:
            raise InputError(
                f"--set {key[:80]}: unknown option for {construction!r}; known: {', '.join(known)}"
                + did_you_mean(key[:80], known)
            )
        if key in options:
            raise InputError(f"--set {key}: given twice; give each option once")
        if len(value) > VALUE_CHARS:
            raise InputError(f"--set {key}: the value has more than {VALUE_CHARS} characters")
        options[key] = known[key][1](key, value)
    return options


def _items(dataset) -> int:
    """What a memorizer stores at most: N points or sequences, N·n positions for seq2seq."""
    if dataset.task == "seq2seq":
        return dataset.size * len(dataset.sequences[0])
    return dataset.size


# Upper bounds of the numeric options, checked against the dataset before building: past them
# an option only adds work (a group_size of 10⁶ on 20 points ran for minutes) or size.
OPTION_LIMITS = {
    "group_size": (_items, "a group cannot hold more slots than the {limit} items to memorize"),
    "bit_budget": (
        lambda ds: max(2, _items(ds)),
        "B = {limit} already puts every item in one sub-network (B² ≥ {limit})",
    ),
    "direction_bound": (lambda ds: max(ds.size**2, 2**64), "at most max(N², 2⁶⁴) = {limit}"),
    "heads": (lambda ds: ds.size, "more heads than the {limit} examples have nothing to store"),
    "d": (
        lambda ds: max(2, ds.size),
        "d ≥ {limit} (the number of examples) stores every association without heads",
    ),
    "head_dim": (
        lambda ds: max(2, ds.size, ds.dim),
        "a head of dimension above max(2, N, the token dimension) = {limit} has nothing to store",
    ),
    "scale": (lambda ds: 2**64, "at most 2⁶⁴"),
    "functional_bound": (lambda ds: max(ds.size**2, 2**64), "at most max(N², 2⁶⁴) = {limit}"),
    "id_multiplier": (lambda ds: 2**64, "at most 2⁶⁴"),
    "precision": (lambda ds: 2**16, "at most 65536 bits (it is doubled up to 7 times)"),
    "temperature": (lambda ds: 2**64, "at most 2⁶⁴ (the automatic search stops at 2¹³)"),
    "width": (lambda ds: 2 * ds.size, "a width above 2N = {limit} adds nothing to fit"),
    "bits": (lambda ds: 4096, "at most 4096 significant bits"),
    "frac_bits": (lambda ds: 4096, "at most 4096 fractional bits"),
    "int_bits": (lambda ds: 4096, "at most 4096 integer bits"),
}


LIMITS_HELP = """option limits (exit 2 beyond them): group_size ≤ the items to memorize (N, or N·n
for seq2seq), bit_budget ≤ max(2, items); heads ≤ N; d ≤ max(2, N); head_dim ≤ max(2, N, the
token dimension); direction_bound, functional_bound ≤ max(N², 2⁶⁴); scale, temperature,
id_multiplier ≤ 2⁶⁴; precision ≤ 65536; width ≤ 2N; bits, frac_bits, int_bits ≤ 4096; numbers
≤ 64 characters"""


def check_option_limits(options: dict, dataset) -> None:
    """Refuse option values beyond what the dataset can use (exit 2 naming the limit)."""
    from fractions import Fraction

    for key, (limit_of, why) in OPTION_LIMITS.items():
        if options.get(key) is None:
            continue
        limit = limit_of(dataset)
        if Fraction(options[key]) > limit:
            raise InputError(
                f"--set {key}={options[key]}: too large for this dataset of {dataset.size} "
                f"items; " + why.format(limit=limit)
            )
