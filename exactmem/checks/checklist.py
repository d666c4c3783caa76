"""The checklist interface: what a construction's trusted side declares to the verifier.

pytest is the model (docs/trust.md): a small trusted core runs the one exact evaluation and
hands its values to a :class:`Checklist`; everything construction-specific — built-in or a
third party's — reaches the core only through a :class:`Construction` registered in the
``exactmem.constructions`` entry-point group (:mod:`exactmem.checks.registry`).

Every check a checklist can emit is declared as a :class:`CheckSpec`: the paper and result it
tests, the mechanism in the proof's words, and at least one :class:`Breaker` — a change to an
honest model (or to the builder's options) that destroys exactly that mechanism, so that the
check is *seen to fail* (``exactmem selftest``).

The types hold no construction code: a builder is referred to by an import path and loaded
only by ``build`` (:meth:`Construction.builder`), so that certifying never runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gmpy2 import mpq

    from exactmem.checks.certificate import Check
    from exactmem.core.model import Resources, Transformer
    from exactmem.datasets.dataset import Dataset
    from exactmem.evaluate.records import Trace

__all__ = [
    "Unset",
    "define_texts",
    "Breaker",
    "CheckSpec",
    "Checklist",
    "Construction",
    "BOUND_METRICS",
    "EVALUATES",
    "LOWER_BOUNDS",
    "Evidence",
    "guarded",
    "undecided_if_inconclusive",
]

BOUND_METRICS = (
    "width",
    "depth",
    "relu_layers",
    "dense_parameters",
    "nonzero_parameters",
    "max_bits",
    "total_bits",
    "margin",
)
"""What a declared bound may bound: the resources counted from the weights (upper bounds) and
``margin``, the smallest non-zero |pre-activation| of the ReLU layers (a lower bound)."""

LOWER_BOUNDS = ("lower_bound.theorem_4_2",)
"""The lower-bound checks a checklist may demand (:attr:`Checklist.lower_bounds`)."""

EVALUATES = ("exact", "hardmax-limit", "balls")
"""How a checklist's values are obtained: the exact evaluation of the model as its file defines
it; the exact evaluation of the model, or of its hardmax limit where softmax scores are unequal
(the checklist must then certify that the model equals that limit: ``limit_check``); or Arb
balls (the core's exact trace where there is one, else none)."""


@dataclass(frozen=True)
class Breaker:
    """A change that destroys one mechanism of an honest model, leaving the rest plausible.

    Exactly one of ``model`` (a function of the honest model and its dataset returning the
    broken model) and ``options`` (builder options that build the broken model instead, e.g.
    ``{"temperature": "0"}`` for a Boltzmann operator at λ = 0) is given. ``fails`` names the
    check that must then FAIL — its full name, or a prefix ending in ``.``. ``dataset``
    optionally names the adversarial dataset generator the breaker needs (by the generator's
    keyword arguments); None: the construction's small self-test dataset.
    """

    name: str
    destroys: str
    fails: str
    model: Callable[[Transformer, Dataset], Transformer] | None = None
    options: Mapping[str, Any] | None = None
    dataset: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if (self.model is None) == (self.options is None):
            raise ValueError(f"breaker {self.name!r}: give exactly one of model and options")


@dataclass(frozen=True)
class Unset:
    """A define whose options, not given, mean a build without them: ``given`` is the formula
    when they are, ``otherwise`` the bound of the build that did not use them (a bit budget
    not given: the memorizers are not split). A check judged by ``otherwise`` says so."""

    given: str
    otherwise: str


def define_texts(define: object) -> tuple[str, ...]:
    """The formulas of a bound define — a formula, a (formula, fallback) pair or an
    :class:`Unset` — for the readers that scan them (the figures and options they name)."""
    if isinstance(define, Unset):
        return (define.given, define.otherwise)
    return tuple(define) if isinstance(define, tuple) else (str(define),)


@dataclass(frozen=True)
class CheckSpec:
    """One check a checklist emits: ``name`` as it appears in the certificate (or a family's
    prefix ending in ``.``, e.g. ``memorizer.``), the ``paper`` and ``result`` it tests, the
    ``mechanism`` in the proof's words, and its ``breakers``."""

    name: str
    paper: str
    result: str
    mechanism: str
    breakers: tuple[Breaker, ...] = ()

    def matches(self, check_name: str) -> bool:
        """Whether a certificate's check named ``check_name`` is this spec's."""
        if self.name.endswith("."):
            return check_name.startswith(self.name) or check_name.endswith("." + self.name[:-1])
        return check_name == self.name or check_name.endswith("." + self.name)


@dataclass(frozen=True)
class Evidence:
    """What the trusted core hands a checklist: the model as its file defines it, the dataset,
    the one trusted evaluation (``trace``; None where the model is not exactly evaluable and
    the checklist evaluates on balls), and the user's criteria. ``run`` is the trusted
    evaluator that produced ``trace`` — for a checklist that must evaluate a model derived
    from this one (never an evaluation path of its own)."""

    model: Transformer
    dataset: Dataset
    trace: Trace | None
    view: Any  # exactmem.datasets.sequences.SequenceView for sequence tasks, None for points
    run: Callable[..., Trace]
    readout: str  # "label" | "argmax"
    feed: str  # "vectors" | "vectors with positions" | "token ids"
    resources: Resources
    tolerance: mpq | None = None
    max_precision: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)  # the user's --set, parsed


@dataclass(frozen=True)
class Checklist:
    """A construction's trusted checks.

    ``tasks``: the dataset tasks it certifies. ``evaluates``: one of :data:`EVALUATES`.
    ``checks``: every check it can emit (:class:`CheckSpec`). ``run``: the function from
    :class:`Evidence` to the list of :class:`~exactmem.checks.certificate.Check` — it raises
    :class:`~exactmem.checks.certificate.ChecklistStructureError` where the model lacks a part it
    reads.
    ``bounds``: the resource bounds the construction promises, as claim-file formulas
    (:mod:`exactmem.core.formula`) in the dataset's figures N, n, d, C, r, delta, omega, keyed by
    the metrics of :data:`BOUND_METRICS` (upper bounds; ``margin`` a lower bound on the
    smallest non-zero |pre-activation|), judged by the core under ``--construction`` as
    ``NAME.bounds.<metric>`` checks. ``consistency``: how equal inputs must be labelled
    (``sequence``, ``multiset``; None: by task). ``require``: called with the dataset and the
    user's tolerance before any evaluation, it raises :class:`~exactmem.core.errors.InputError`
    where the checklist cannot judge without a criterion the user did not give (a dataset of
    target distributions without ``--tolerance``). ``limit_check``: for a checklist that
    ``evaluates`` the ``hardmax-limit``, the check that certifies the model equal to its limit
    where the labels are read; the core judges the labels on the limit only when it passed
    (else on Arb balls of the model itself). ``lower_bounds``: the lower-bound checks of
    :mod:`exactmem.checks.lower_bounds` the checklist demands beyond those that always run (e.g.
    ``lower_bound.theorem_4_2``, Kajitsuka & Sato 2025's Theorem 4.2); the core runs them with
    the others, whatever the checklist's own checks find. ``bound_defines``: names the bound
    formulas may use, each a formula of the figures, the build options the user states
    (``verify --set``) and the defines before it, as a claim file's ``[define]``."""

    name: str
    tasks: tuple[str, ...]
    summary: str
    checks: tuple[CheckSpec, ...] = ()
    run: Callable[[Evidence], list[Check]] | None = None
    evaluates: str = "exact"
    bounds: Mapping[str, str] = field(default_factory=dict)
    consistency: str | None = None
    require: Callable[[Dataset, mpq | None], None] | None = None
    limit_check: str | None = None
    lower_bounds: tuple[str, ...] = ()
    bound_defines: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.evaluates not in EVALUATES:
            raise ValueError(f"checklist {self.name!r}: evaluates {self.evaluates!r}")
        if self.consistency not in (None, "sequence", "multiset"):
            raise ValueError(f"checklist {self.name!r}: consistency {self.consistency!r}")
        if set(self.lower_bounds) - set(LOWER_BOUNDS):
            raise ValueError(
                f"checklist {self.name!r}: lower bounds {self.lower_bounds}; known: "
                f"{', '.join(LOWER_BOUNDS)}"
            )
        unknown = sorted(set(self.bounds) - set(BOUND_METRICS))
        if unknown:
            raise ValueError(
                f"checklist {self.name!r}: bounds on unknown metrics {', '.join(unknown)}; "
                f"known: {', '.join(BOUND_METRICS)}"
            )

    def spec(self, check_name: str) -> CheckSpec | None:
        """The declared spec of a certificate's check (None: undeclared)."""
        for s in self.checks:
            if s.matches(check_name):
                return s
        return None


@dataclass(frozen=True)
class Construction:
    """What a plugin registers under the ``exactmem.constructions`` entry-point group.

    ``builder``: ``"module:function"`` of the untrusted builder, called as
    ``function(dataset, options, progress)`` and imported only when something builds.
    ``options``: the ``--set KEY=VALUE`` options, name → (help, parser) as
    :mod:`exactmem.plugins.options` declares them. ``package`` and ``version`` are filled in by the
    registry from the distribution that provides the entry point. ``example`` makes the small
    dataset (seeded, a few seconds to build and verify) on which ``selftest`` builds the honest
    model with ``example_options`` and applies every breaker."""

    name: str
    paper: str
    summary: str
    checklist: Checklist | None = None
    builder: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    example: Callable[[], Dataset] | None = None
    example_options: Mapping[str, Any] = field(default_factory=dict)
    package: str = ""
    version: str = ""

    def builder_function(self) -> Callable[..., Transformer]:
        """Import the builder (untrusted code: only ``build`` and ``selftest`` call this)."""
        if not self.builder:
            raise LookupError(f"construction {self.name!r} registers no builder")
        module, _, attr = self.builder.partition(":")
        return getattr(import_module(module), attr)


def _undecided_name(name: str, exc: Exception, fallback: str) -> str:
    """The check an :class:`InconclusiveError` names (its message starts ``NAME.check:``),
    else ``fallback``."""
    head = str(exc).split(":", 1)[0].strip()
    if head.startswith(name + ".") and " " not in head:
        return head
    return fallback


def undecided_if_inconclusive(name: str, run_checks: Callable[[], list[Check]]) -> list[Check]:
    """The construction-independent checks (labels, lower bounds): an
    :class:`InconclusiveError` is the undecided result of ``name``; nothing else is caught."""
    from exactmem.checks.certificate import undecided_check
    from exactmem.core.errors import InconclusiveError

    try:
        return run_checks()
    except InconclusiveError as exc:
        return [undecided_check(_undecided_name(name, exc, name), str(exc))]


def guarded(
    name: str, run_checks: Callable[[], list[Check]], undecided: str | None = None
) -> list[Check]:
    """Run checks that may raise: a model without the parts they read is refuted by a failed
    ``NAME.structure`` check, never judged on fewer checks; an :class:`InconclusiveError` is
    the undecided result of the check it names (``NAME.<check>: …``; else ``undecided``,
    default ``NAME.checklist``), never discarding the results of the checks run beside it.

    A checklist's ``run`` may call this around each of its parts, so that one undecided part
    leaves the others' results standing; the core calls it around the whole ``run``."""
    from exactmem.checks.certificate import Check, ChecklistStructureError, undecided_check
    from exactmem.core.errors import InconclusiveError, MissingPartError

    try:
        return run_checks()
    except InconclusiveError as exc:
        fallback = undecided or f"{name}.checklist"
        return [undecided_check(_undecided_name(name, exc, fallback), str(exc))]
    except (ChecklistStructureError, MissingPartError) as exc:
        # only the structure errors a checklist raises on purpose (and a lane or probe the
        # model lacks) refute: a KeyError or ValueError from anywhere else (an arithmetic
        # library's limit, a bug) is an internal error, never a failed check (review r1, M2)
        why = str(exc)
    return [
        Check(
            f"{name}.structure",
            False,
            f"the model does not have the structure the {name} checklist reads ({why})",
        )
    ]
