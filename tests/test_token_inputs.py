"""Token-id inputs (Kajitsuka & Sato 2025, Theorem E.1): the embedding table reads the one-hot
inputs column by column, so a table over a huge vocabulary costs what its rows hold, not ω
arrays (found by the loader fuzz: ω = 10⁸ hung both evaluators)."""

from gmpy2 import mpq

from exactmem.core.model import Affine, Transformer
from exactmem.evaluate import fast, reference
from exactmem.evaluate.softmax import run_balls

OMEGA = 10**8


def _model() -> Transformer:
    # embedding e_t ↦ ((t = 3) + 2·(t = 99 999 999) + 1)/2: two columns of a 10⁸-token table
    embed = Affine(OMEGA, (((3, 1), (OMEGA - 1, 2)),), (1,), 2)
    return Transformer(OMEGA, (), embed, None, {}, token_inputs=True)


def test_a_huge_vocabulary_costs_its_rows():
    model = _model()
    want = [mpq(1), mpq(1, 2), mpq(3, 2)]
    for run in (reference.run, fast.run):
        trace = run(model, None, [[3], [7], [OMEGA - 1]])
        assert [out[-1][0] for out in trace.outputs] == want
    balls = run_balls(model, None, [[3], [7], [OMEGA - 1]], precision=64)
    assert [out[-1][0].mid() for out in balls.outputs] == [1.0, 0.5, 1.5]
