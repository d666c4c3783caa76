"""The fast MLP step and the fast run: the reference evaluator's driver with the engine's
layers, runs and probes in place of its own (same values, lanes and statistics)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from gmpy2 import mpq

from exactmem.core.errors import InconclusiveError
from exactmem.core.model import MLP
from exactmem.evaluate import reference
from exactmem.evaluate.arithmetic import Batch
from exactmem.evaluate.fast import limits
from exactmem.evaluate.fast.engine import _Engine
from exactmem.evaluate.fast.lanes import _Fallback, _obj
from exactmem.evaluate.fast.mixing import mix
from exactmem.evaluate.records import LayerStat
from exactmem.runtime.progress import tell


def mlp(
    mlp: MLP,
    X: Batch,
    den: int,
    size: int,
    sub: int,
    on_probe: Callable,
    stats: list,
    progress: Callable[[str], None] | None = None,
    jobs: int = 1,
) -> tuple[Batch, int]:
    """Drop-in for the reference's MLP step: same values, lanes and statistics. Falls back to
    the reference evaluator (whole sub-layer) where int64 safety cannot be proved."""
    if mlp.activation != "relu":  # (run refuses such models first; a step never reads GELU as ReLU)
        raise InconclusiveError(f"MLP {mlp.label!r}: {mlp.activation} is transcendental")
    threads(jobs)
    if size == 1 and _long_values(mlp, X, den):
        return reference._mlp(mlp, X, den, size, sub, on_probe, stats, progress)
    spent = getattr(stats, "spent", 0)
    try:
        return _mlp_fast(mlp, X, den, size, sub, on_probe, stats, progress)
    except _Fallback as why:
        if isinstance(stats, reference.KeptStats):  # its statistics are dropped, not kept
            stats.rewind(spent)
        if progress:
            progress(f"{mlp.label or 'mlp'}: reference evaluator ({why})")
        if jobs > 1 and size >= 2 * reference.MIN_ROWS_PER_JOB:
            return reference._mlp_parallel(mlp, X, den, size, sub, on_probe, stats, jobs, progress)
        return reference._mlp(mlp, X, den, size, sub, on_probe, stats, progress)


def _long_values(mlp: MLP, X: Batch, den: int) -> bool:
    """Whether the sub-layer's values may pass :data:`~.limits.ONE_ROW_BITS` bits
    (:mod:`exactmem.evaluate.value_bits`, on its inputs' magnitudes)."""
    from exactmem.core.exact_arrays import top
    from exactmem.core.model import Transformer
    from exactmem.evaluate.value_bits import value_bits

    inputs = [top(np.asarray(col)) for col in X]
    bound = value_bits(Transformer(len(X), (mlp,)), inputs, den, 1, limit=limits.ONE_ROW_BITS)
    return bound.bits > limits.ONE_ROW_BITS


def threads(jobs: int) -> None:
    """Run the parallel kernels on ``jobs`` threads (at most numba's pool; results do not
    depend on it: chunk statistics are merged in chunk order and values are exact)."""
    from exactmem.runtime import jit

    jit.set_threads(jobs)


def _mlp_fast(mlp, X, den, size, sub, on_probe, stats, progress):
    probes_at: dict[int, list] = {}
    for p in mlp.probes:
        probes_at.setdefault(p.layer, []).append(p)
    fold_of = getattr(on_probe, "fold_of", lambda name: None)

    def name_of(p) -> str:
        return f"{mlp.label}.{p.name}" if mlp.label else p.name

    def claim_of(p):  # a probe's fold and its name, if a fold takes it in the layer's pass
        name = name_of(p)
        fold = fold_of(name)
        return None if fold is None else (fold, name)

    def hand_at(li: int, lanes: list) -> None:
        """The probes of layer li inside a shared run, over that layer's output ``lanes``."""
        now, eng.lanes = eng.lanes, lanes
        eng._fused, eng._folded = {}, {}
        try:
            hand_on(li)
        finally:
            eng.lanes = now

    def hand_on(li: int) -> None:
        """The probes of layer li, the layer just done, to their folds or ``on_probe``."""
        for i, p in enumerate(probes_at.get(li, ())):
            values = eng.take_probe(i, p.terms)
            if eng.den != 1 and values.dtype != object:
                values = _obj(values)
            # handed on at once (a fold reads step lanes as they come; a fallback re-runs
            # the sub-layer and hands every probe on again); folded in the layer's pass: the
            # fold only keeps the first offending values
            folded = eng._folded.get(i)
            if folded is not None:
                fold, j, fresh = folded
                fold.finish(j, fresh, values, eng.den)
            else:
                on_probe(name_of(p), values, eng.den)

    eng = _Engine(X, den, size)
    my_stats = reference.kept_like(stats)  # (within the run's budget as they come)
    last = len(mlp.layers) - 1
    li, report = 0, 0
    while li <= last:
        layer = mlp.layers[li]
        if progress and li >= report:
            tell(
                progress,
                f"{mlp.label or 'mlp'}: layer {li}/{len(mlp.layers)} on {size} inputs",
                phase=f"evaluating {mlp.label or 'mlp'}",
                done=li,
                total=len(mlp.layers),
            )
            step = reference._report_every(progress, len(mlp.layers), 1000)
            report = (li // step + 1) * step
        if li == last:
            eng.layer(layer, relu=False)
            break
        run = eng.step_run(mlp.layers, li, last, probes_at, claim_of)  # (folds its probes)
        if run is None:
            run = eng.shared_run(mlp.layers, li, last, probes_at, hand_at)
        if run is not None:  # layers li.. in one pass: their statistics, as one by one
            for zeros, best in run:
                my_stats.append(
                    LayerStat(
                        sub,
                        li,
                        len(mlp.layers[li].rows),
                        size,
                        zeros,
                        None if best is None else mpq(best, eng.den),
                    )
                )
                li += 1
            continue
        here = probes_at.get(li, ())
        names = [name_of(p) for p in here]
        folds = [(f, name) if (f := fold_of(name)) is not None else None for name in names]
        zeros, best = eng.layer(
            layer, probes=[p.terms for p in here], nxt=mlp.layers[li + 1], folds=folds
        )
        my_stats.append(
            LayerStat(
                sub, li, len(layer.rows), size, zeros, None if best is None else mpq(best, eng.den)
            )
        )
        eng.reduce()
        hand_on(li)
        li += 1
    H, hden = eng.batch(), eng.den
    stats.extend(my_stats)
    return reference._residual(mlp, X, den, H, hden)


# --------------------------------------------------------------------------- token mixing


def run(model, vocab, sequences, **kw):
    """:func:`exactmem.evaluate.reference.run` with the fast MLP and mixing steps."""
    return reference.run(model, vocab, sequences, mlp_step=mlp, mix_step=mix, **kw)


def run_points(model, points, **kw):
    return run(model, points, [[i] for i in range(len(points))], **kw)
