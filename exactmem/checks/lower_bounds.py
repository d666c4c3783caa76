"""The lower bounds of Kajitsuka & Sato 2025 as checks every construction is held against.

* Theorem 4.3 (hardmax Transformers, seq-to-seq, all nN tokens distinct): a network that
  shatters the nN token labels has W ≥ √(nN / (9·log₂(48e·nN))) parameters.
* The finer sign-pattern count of its proof (eqs. (72), (86)–(89), Goldberg–Jerrum's Lemma B.4):
  for an architecture (d, m, s, H, q, L) the number of sign vectors K satisfies a product bound;
  shattering needs 2^{nN} ≤ K, which caps the nN it can shatter.
* Bit counting (Remarks 4.4, 4.6): one architecture with P parameters of b bits realises at most
  2^{P·b} functions, so shattering N labels needs P·b ≥ N.
* Theorem 4.2 (constant sequences): with identical columns, every column stays identical after
  every layer, and the network equals an MLP applied to the first column.

The formulas are those of Kajitsuka & Sato 2025, §4 and Appendix D (Theorems 4.2, 4.3, eq.
(72)); every
comparison is decided with Arb balls, never floats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from gmpy2 import mpq

from exactmem.core.errors import InconclusiveError
from exactmem.core.exact_arrays import exact, ratio_equal
from exactmem.core.model import (
    MLP,
    Affine,
    Attention,
    PositionalEncoding,
    Resources,
    Sublayer,
    Transformer,
    resources,
)
from exactmem.datasets.sequences import sequence_tokens

if TYPE_CHECKING:  # sympy and flint cost a quarter of a second to import: only when a bound is
    import sympy  # computed (all-distinct seq-to-seq data), never on a plain verify
    from flint import arb

__all__ = [
    "Architecture",
    "architecture_of",
    "bit_count_holds",
    "constant_sequence_check",
    "max_shatterable",
    "sign_pattern_log2",
    "theorem_4_3_bound",
    "theorem_4_3_holds",
]


def theorem_4_3_bound(n: int, N: int) -> sympy.Expr:
    """√(nN / (9·log₂(48e·nN))) (Theorem 4.3)."""
    import sympy

    nN = sympy.Integer(n * N)
    return sympy.sqrt(nN / (9 * sympy.log(48 * sympy.E * nN, 2)))


def theorem_4_3_holds(parameters: int, n: int, N: int):
    """Decide W ≥ √(nN / (9·log₂(48e·nN))) rigorously (a ``BoundResult``)."""
    from exactmem.core.bounds import decide_ge

    return decide_ge(parameters, theorem_4_3_bound(n, N))


@dataclass(frozen=True)
class Architecture:
    """The block architecture of the lower-bound proof: input dimension d, stream width m,
    head size s, heads H, FFN width q, blocks L (Kajitsuka & Sato 2025, Sec. 3.2)."""

    d: int
    m: int
    s: int
    H: int
    q: int
    L: int

    def parameters_before(self, layer: int) -> int:
        """W_l = m·d + l·[4msH + 2(m + 1)q] (the proof's bookkeeping, digest §4.2)."""
        return self.m * self.d + layer * (4 * self.m * self.s * self.H + 2 * (self.m + 1) * self.q)

    @property
    def parameters(self) -> int:
        return self.parameters_before(self.L)


def architecture_of(model: Transformer) -> Architecture:
    """The block architecture that contains ``model``: every MLP hidden layer becomes one block
    (attention set to zero, as the paper realises deep F^(FF)), every attention layer one block;
    widths are the model's width."""
    res = resources(model)
    heads = [a for a in model.sublayers if isinstance(a, Attention)]
    H = max((len(a.heads) for a in heads), default=1)
    s = max((h.value.out_dim for a in heads for h in a.heads), default=1)
    blocks = sum(len(x.layers) - 1 for x in model.sublayers if isinstance(x, MLP)) + len(heads)
    return Architecture(d=model.input_dim, m=res.width, s=s, H=H, q=res.width, L=max(blocks, 1))


def _log2_sign_vectors(M: int, D: int, W: int) -> arb:
    """log₂ of a bound on the sign vectors of M polynomials of degree ≤ D in W variables:
    Goldberg–Jerrum's (8eMD/W)^W when M ≥ W (Lemma B.4 needs it), and never more than 3^M —
    each polynomial has three signs. Without the cap the formula is meaningless for M < W."""
    from flint import arb

    trivial = M * arb(3).log() / arb(2).log()
    if M < W:
        return trivial
    gj = W * (8 * arb.const_e() * M * D / W).log() / arb(2).log()
    return gj.min(trivial)


def sign_pattern_log2(arch: Architecture, n: int, N: int, precision: int = 256) -> arb:
    """log₂ of the product bound on the number of sign vectors K (eqs. (72), (86)–(89)): per
    block, the hardmax pattern (N·H·n³ score differences of degree 8l − 4) and the ReLU pattern
    (n·q·N pre-activations of degree 4l), then the outputs (n·N of degree 4L + 2)."""
    from flint import arb, ctx

    old = ctx.prec
    ctx.prec = precision
    try:
        m, s, H, q, L = arch.m, arch.s, arch.H, arch.q, arch.L
        total = arb(0)
        for layer in range(1, L + 1):
            att = arch.parameters_before(layer - 1) + 2 * m * s * H
            total += _log2_sign_vectors(N * H * n**3, 8 * layer - 4, att)
            total += _log2_sign_vectors(n * q * N, 4 * layer, att + (m + 1) * q)
        total += _log2_sign_vectors(n * N, 4 * L + 2, arch.parameters)
        return total
    finally:
        ctx.prec = old


def max_shatterable(arch: Architecture, n: int, limit: int = 1 << 60) -> int:
    """The largest N such that 2^{nN} ≤ K(N) is not excluded (binary search, Arb-decided:
    N is excluded only when n·N > log₂ K(N) certainly)."""

    def excluded(N: int) -> bool:
        return bool(sign_pattern_log2(arch, n, N) < n * N)

    lo, hi = 1, 2
    while not excluded(hi):
        lo, hi = hi, hi * 2
        if hi > limit:
            return limit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if excluded(mid) else (mid, hi)
    return lo


def bit_count_holds(parameters: int, max_bits: int, labels: int) -> bool:
    """Remarks 4.4/4.6: P·b ≥ number of binary labels a fixed architecture must shatter."""
    return parameters * max_bits >= labels


# --------------------------------------------------------------------------- Theorem 4.2


def _attention_as_linear(att: Attention, width: int) -> MLP:
    """On identical columns every attention returns the common value: the sub-layer acts as
    H ↦ H + Σ_h W_O^h W_V^h H (eq. (65)), one affine layer in residual form."""
    den = math.lcm(*[h.value.denominator * h.output.denominator for h in att.heads]) or 1
    dense = [[0] * width for _ in range(width)]
    for h in att.heads:
        scale = den // (h.value.denominator * h.output.denominator)
        for i, orow in enumerate(h.output.rows):
            for j, a in orow:
                for c, b in h.value.rows[j]:
                    dense[i][c] += a * b * scale
    return MLP((Affine.from_dense(dense, None, den),), residual=True, label=att.label)


def equivalent_mlp(model: Transformer) -> Transformer:
    """The model on constant sequences: attention replaced by its linear action (Theorem 4.2).
    Token-wise sub-layers (MLPs, layer norms) are kept."""
    subs: list[Sublayer] = []
    width = model.embed.out_dim if model.embed else model.input_dim
    for s in model.sublayers:
        if isinstance(s, Attention):
            subs.append(_attention_as_linear(s, width))
        elif isinstance(s, PositionalEncoding):  # what the first column sees
            den = math.lcm(*[int(v.denominator) for v in s.table[0]])
            bias = [int(v * den) for v in s.table[0]]
            subs.append(MLP((Affine(width, ((),) * width, tuple(bias), den),), residual=True))
        else:
            subs.append(s)
            width = s.out_dim
    return Transformer(
        model.input_dim,
        tuple(subs),
        model.embed,
        model.unembed,
        dict(model.meta),
        model.token_inputs,
    )


def _mixing_prefix(model: Transformer) -> Transformer | None:
    """``model`` up to and including its last sub-layer that is not an MLP (attention,
    positional encoding: the only ones that see other columns), without the unembedding; None
    when every sub-layer is an MLP."""
    last = max((i for i, s in enumerate(model.sublayers) if not isinstance(s, MLP)), default=-1)
    if last < 0:
        return None
    return Transformer(
        model.input_dim,
        model.sublayers[: last + 1],
        model.embed,
        None,
        dict(model.meta),
        model.token_inputs,
    )


def _mixing_part(model: Transformer, vocab, tokens, run, entry=None):
    """The column-mixing part of :func:`_mixing_prefix` (from its first sub-layer that is not
    an MLP) and what enters it: the MLPs before that act on each column alone, so they are
    evaluated once, on the tokens alone, and their outputs become the part's vocabulary.
    ``entry``: those outputs if the caller has them (:func:`_entry_columns`). Returns (part,
    vocabulary, the tokens as indices into it, the part's first sub-layer), or None when every
    sub-layer is an MLP."""
    prefix = _mixing_prefix(model)
    if prefix is None:
        return None
    first = next(i for i, s in enumerate(prefix.sublayers) if not isinstance(s, MLP))
    if first == 0:
        return prefix, vocab, list(tokens), 0
    if entry is not None:
        part = Transformer(len(entry[0]), prefix.sublayers[first:], meta=dict(model.meta))
        return part, list(entry), list(range(len(tokens))), first
    head = Transformer(
        model.input_dim,
        prefix.sublayers[:first],
        model.embed,
        None,
        dict(model.meta),
        model.token_inputs,
    )
    outputs = run(head, vocab, [[t] for t in tokens]).outputs
    states = [outputs[i][0] for i in range(len(tokens))]
    part = Transformer(len(states[0]), prefix.sublayers[first:], meta=dict(model.meta))
    return part, states, list(range(len(tokens))), first


def constant_sequence_check(model: Transformer, vocab, tokens, n: int, run=None, entry=None):
    """Theorem 4.2 on the constant sequences (x, x, …, x) for x in ``tokens``: every column
    identical after every sub-layer, and the output equal to the MLP of :func:`equivalent_mlp`
    applied to x. ``run``: the exact evaluator (the reference one by default; the certificate
    passes the one it uses). Returns a :class:`~exactmem.checks.certificate.Check`.

    Both networks are evaluated from the first to the last sub-layer that mixes columns only:
    every other sub-layer is an MLP, applied column by column and shared by the two networks
    (so is the unembedding), so identical columns stay identical and equal inputs give equal
    outputs — what evaluating them on the sequences would show, known without it (the MLPs of
    a deep memorizer are most of the network). The MLPs before the first mixing sub-layer are
    evaluated once, on the tokens alone (:func:`_mixing_part`), or read from the evaluation of
    the dataset (``entry``, :func:`_entry_columns`)."""
    from exactmem.checks.certificate import Check, _examples

    if run is None:
        from exactmem.evaluate.reference import run

    bad = []
    trace = None
    mixing = _mixing_part(model, vocab, tokens, run, entry)
    if mixing is not None:
        part, inputs, ids, at = mixing
        try:
            trace = run(part, inputs, [[t] * n for t in ids])
        except InconclusiveError:
            # softmax of unequal scores: the columns already differ somewhere (equal columns
            # give equal scores, exact weights 1/n) — find where, on Arb balls
            bad.append(_differing_columns_on_balls(part, inputs, ids, tokens, n, at))
    if mixing is not None and trace is not None:
        for si, stream in enumerate(trace.streams, start=at):
            same = (stream.index == stream.index[:, :1]).all(axis=1)
            if not same.all():
                i = int(np.argmin(same))
                bad.append(f"sequence of vocab[{tokens[i]}]: columns differ after sub-layer {si}")
        linear = equivalent_mlp(part)
        if all(isinstance(x, MLP) and len(x.layers) == 1 for x in linear.sublayers):
            # affine maps on a few rows: no kernels to load, the reference evaluator is quicker
            from exactmem.evaluate.reference import run as reference

            mlp_trace = reference(linear, inputs, [[t] for t in ids])
        else:
            mlp_trace = run(linear, inputs, [[t] for t in ids])
        for i in _differing(trace.outputs, mlp_trace.outputs):
            what = "output differs from the equivalent MLP"
            bad.append(f"sequence of vocab[{tokens[i]}]: {what}")
    detail = (
        f"on {len(tokens)} constant sequences every column stays identical and the "
        "network equals an MLP on the first column"
    )
    return Check(
        "lower_bound.theorem_4_2",
        not bad,
        _examples(bad) if bad else detail,
        {"sequences": len(tokens), "sequence_length": n},
    )


def _differing_columns_on_balls(part: Transformer, inputs, ids, tokens, n: int, at: int) -> str:
    """The first sub-layer of ``part`` after which some constant sequence's columns certainly
    differ, evaluated by the trusted evaluators on the prefixes of ``part`` (exact where they
    can, else Arb balls at rising precision). InconclusiveError when no prefix shows it."""
    from exactmem.evaluate.reference import run as reference
    from exactmem.evaluate.softmax import ball_bounds, run_balls

    seqs = [[t] * n for t in ids]
    for k in range(1, len(part.sublayers) + 1):
        prefix = Transformer(
            part.input_dim, part.sublayers[:k], part.embed, None, {}, part.token_inputs
        )
        try:
            outputs = reference(prefix, inputs, seqs).outputs
            differ = [i for i, cols in enumerate(outputs) if any(c != cols[0] for c in cols)]
        except InconclusiveError:
            differ = []
            for precision in (128, 512, 2048):
                balls = run_balls(prefix, inputs, seqs, precision=precision).outputs
                differ = [i for i, cols in enumerate(balls) if _certainly_differ(cols, ball_bounds)]
                if differ:
                    break
        if differ:
            i = differ[0]
            return f"sequence of vocab[{tokens[i]}]: columns differ after sub-layer {at + k - 1}"
    raise InconclusiveError(
        "lower_bound.theorem_4_2: softmax scores of a constant sequence are unequal, yet no "
        "sub-layer's columns are certified to differ"
    )


def _certainly_differ(cols, ball_bounds) -> bool:
    """Whether some column's ball lies apart from the first column's in some coordinate."""
    first = [ball_bounds(x) for x in cols[0]]
    for col in cols[1:]:
        for (lo0, hi0), x in zip(first, col, strict=True):
            lo, hi = ball_bounds(x)
            if lo > hi0 or hi < lo0:
                return True
    return False


def _differing(outputs, reference) -> list[int]:
    """The sequences i with an output column unequal to ``reference[i][0]`` (the equivalent
    MLP's output): on the numerator arrays when both are the evaluator's
    :class:`~exactmem.evaluate.records.Outputs`, else column by column."""
    from exactmem.evaluate.records import Outputs

    if (
        isinstance(outputs, Outputs)
        and isinstance(reference, Outputs)
        and len(outputs.columns) == len(reference.columns)
        and len(outputs) == len(reference)
    ):
        same = np.ones(outputs.index.shape, bool)
        for mine, theirs in zip(outputs.columns, reference.columns, strict=True):
            got = exact(np.asarray(mine))[outputs.index]
            want = exact(np.asarray(theirs))[reference.index[:, :1]]
            same &= ratio_equal(got, outputs.den, want, reference.den)
        return np.flatnonzero(~same.all(axis=1)).tolist()
    return [
        i
        for i, (out, ref) in enumerate(zip(outputs, reference, strict=True))
        if any(col != ref[0] for col in out)
    ]


def lower_bound_checks(
    model: Transformer,
    dataset,
    sv=None,
    run=None,
    *,
    theorem_4_2: bool = False,
    res: Resources | None = None,
    trace=None,
) -> list:
    """The lower bounds that apply to a certified model on ``dataset``.

    Always: bit counting (P·b ≥ the number of labels). With ``theorem_4_2`` (the caller demands
    a Kajitsuka–Sato checklist): Theorem 4.2 on the constant sequences of (up to 50 of) the
    dataset's tokens.
    Seq-to-seq with all nN tokens pairwise distinct (Theorem 4.3's hypothesis): W ≥ the
    Theorem 4.3 bound, and nN within the eq. (72) count of the model's block architecture.
    ``run``: the exact evaluator for Theorem 4.2 (:func:`constant_sequence_check`). ``res``:
    the model's :func:`~exactmem.core.model.resources` if the caller has them (a pass over every
    weight). ``trace``: the evaluation of ``dataset``, whose columns entering the first
    column-mixing sub-layer Theorem 4.2's check then reads instead of evaluating them again.
    """
    from exactmem.checks.certificate import Check

    res = res or resources(model)
    if dataset.task == "points":
        labels, what = dataset.size, "N"
    else:
        n = len(dataset.sequences[0])
        labels, what = (
            (n * dataset.size, "nN") if dataset.task == "seq2seq" else (dataset.size, "N")
        )
    product = res.dense_parameters * res.max_bits
    ok = bit_count_holds(res.dense_parameters, res.max_bits, labels)
    checks = [
        Check(
            "lower_bound.bit_count",
            ok,
            f"parameters × max bits = {product} {'≥' if ok else '<'} {what} = {labels} "
            f"(ratio {product / labels:.3g}; Remarks 4.4/4.6)",
            {"parameters_times_bits": product, "labels": labels},
        )
    ]
    if dataset.task == "points" or sv is None:
        return checks
    n = len(dataset.sequences[0])
    if theorem_4_2:
        tokens = list(sv.tokens)[:50]
        entry = _entry_columns(model, trace, sv, tokens)
        checks.append(constant_sequence_check(model, dataset.vocab, tokens, n, run, entry))
    if dataset.task == "seq2seq" and _all_distinct(dataset, sv, labels):
        result = theorem_4_3_holds(res.dense_parameters, n, dataset.size)
        checks.append(
            Check(
                "lower_bound.theorem_4_3",
                result.holds is True,
                f"W = {res.dense_parameters} {'≥' if result.holds else '<'} "
                f"√(nN/(9·log₂(48e·nN))) = {result.bound}"
                + ("" if result.holds is not None else " (undecided)"),
                {"parameters": res.dense_parameters, "bound": result.bound},
            )
        )
        arch = architecture_of(model)
        cap = max_shatterable(arch, n)
        checks.append(
            Check(
                "lower_bound.sign_patterns",
                dataset.size <= cap,
                f"the block architecture (m={arch.m}, q={arch.q}, L={arch.L}, W={arch.parameters}) "
                f"can shatter at most N = {cap} sequences of n = {n} by the eq. (72) count; "
                f"N = {dataset.size}",
                {"max_shatterable_N": cap, "architecture_parameters": arch.parameters},
            )
        )
    return checks


def _entry_columns(model: Transformer, trace, sv, tokens) -> list | None:
    """The columns entering the first column-mixing sub-layer for each of ``tokens``
    (canonical), read from ``trace``, the evaluation of the dataset: the MLPs before that
    sub-layer act on each column alone, so a token's column there is the same in every
    sequence. None when the trace does not hold them."""
    first = next((i for i, s in enumerate(model.sublayers) if not isinstance(s, MLP)), 0)
    if trace is None or first == 0 or sv.canonical_sequences is None:
        return None
    stream = trace.streams[first - 1]
    flat = sv.canonical_sequences.reshape(-1)
    index = stream.index.reshape(-1)
    if index.shape != flat.shape:
        return None
    from exactmem.core.exact_arrays import unique_first

    values, at = unique_first(flat)  # (no sort of the N·n tokens)
    where = dict(zip(values.tolist(), at.tolist(), strict=True))
    wanted = [int(index[where[t]]) for t in tokens]  # only these rows become rationals
    return [tuple(mpq(int(lane[r]), stream.den) for lane in stream.columns) for r in wanted]


def _all_distinct(dataset, sv, labels: int) -> bool:
    """Theorem 4.3's hypothesis: the nN tokens of the dataset are pairwise distinct vectors."""
    canonical = sequence_tokens(dataset, sv)
    return len(np.unique(canonical)) == labels
