"""Tight certified margins (issue 29 point 6): each certified margin's enclosure is narrowed by
raising that example's precision until m̄ ≤ 1.01·m̲ (the certified margin within 1 % of the
true one) or the cap is reached, which the certificate says; per-example margins and the
float64 column for next-token and seq2seq alike."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gmpy2 import mpq
from safetensors.numpy import save_file

from exactmem.checkpoints.architectures import import_checkpoint
from exactmem.checks.certify import certify
from exactmem.checks.margins import argmax_margins
from exactmem.datasets.dataset import Dataset

DATA = Path(__file__).parent / "data" / "checkpoints"
EPS = mpq(1, 2**60)


def _tiny_lead(path: Path) -> Dataset:
    """One head whose logit 1 leads logit 2 by exactly 2⁻⁶⁰ (tests/test_trained_verify.py):
    at 64 bits the lead is certified, its lower bound about half the true one."""
    save_file(
        {
            "attn.0.query.weight": np.array([[0.0, 1.0], [0.0, 0.0]]),
            "attn.0.key.weight": np.array([[0.0, 0.5], [0.0, 0.0]]),
            "attn.0.value.weight": np.array([[1.0, 0.0], [1.0, 0.0]]),
            "attn.0.output.weight": np.array([[1.0, 2.0**-60], [1.0, 0.0]]),
        },
        str(path),
    )
    return Dataset.from_tokens([[0, 1, 2, 3]], [1], vocab=[[1, k] for k in range(4)], num_classes=2)


def test_a_loosely_certified_margin_is_raised_to_within_one_percent(tmp_path):
    data = _tiny_lead(tmp_path / "t.safetensors")
    model = import_checkpoint(tmp_path / "t.safetensors", "mahdavi24")
    check = certify(model, data).checks[0]
    low = mpq(check.figures["min_margin_lower_bound"])
    assert EPS / mpq(101, 100) <= low <= EPS  # was 4.31e-19 (≈ EPS/2) at 64 bits
    assert check.figures["precision"] > 64
    assert check.figures["margins"]["tight"] == "1/1 within 1 %"
    assert check.figures["margins"]["loose"] == []
    assert "every margin within 1 % of the true one" in check.detail


def test_a_margin_still_loose_at_the_cap_is_said_so(tmp_path):
    data = _tiny_lead(tmp_path / "t.safetensors")
    model = import_checkpoint(tmp_path / "t.safetensors", "mahdavi24")
    check = certify(model, data, max_precision=64).checks[0]
    assert check.passed  # still certified: the bound is a bound
    assert mpq(check.figures["min_margin_lower_bound"]) < EPS / mpq(101, 100)
    assert check.figures["margins"]["tight"] == "0/1 within 1 %"
    assert check.figures["margins"]["loose"][0].startswith("sequences[0]: ≥ ")
    assert "1 margin(s) not within 1 % at the cap of 64 bits (raise --max-precision)" in (
        check.detail
    )


def _gpt2():
    model = import_checkpoint(DATA / "hf_gpt2_lm", None)
    tokens = np.load(DATA / "hf_gpt2_lm" / "tokens.npy").tolist()
    logits = np.load(DATA / "hf_gpt2_lm" / "logits.npy")  # the framework's, float64
    return model, tokens, logits


def test_every_margin_lies_within_one_percent_of_the_frameworks(tmp_path):
    """From 8 bits (every enclosure wide), each example's precision is raised until its margin
    is tight: the certified lower bound is then within 1 % below the true margin."""
    model, tokens, logits = _gpt2()
    labels = [int(np.argmax(row)) + 1 for row in logits[:, -1]]
    results = argmax_margins(model, None, tokens, labels, start=8)
    for r, row, y in zip(results, logits[:, -1], labels, strict=True):
        true = mpq(float(row[y - 1] - np.delete(row, y - 1).max()))
        assert r.status == "certified" and r.tight and r.precision > 8
        assert true / mpq(101, 100) - mpq(1, 10**9) <= r.margin <= true + mpq(1, 10**9)
        assert r.upper <= r.margin * mpq(101, 100)
    capped = argmax_margins(model, None, tokens, labels, start=8, limit=8)
    assert not all(r.tight for r in capped)


def test_seq2seq_certificates_have_per_example_margins_and_the_float_column():
    model, tokens, logits = _gpt2()
    labels = [[int(np.argmax(col)) + 1 for col in row] for row in logits]
    data = Dataset.from_tokens(
        tokens, labels, vocab=[[t] for t in range(11)], task="seq2seq", num_classes=11
    )
    check = certify(model, data).checks[0]
    fig = check.figures
    assert check.passed and "at every position of 4 sequences" in check.detail
    assert len(fig["per_example"]) == 4 and fig["margins"]["tight"] == "4/4 within 1 %"
    assert fig["float"]["accuracy"] == "4/4" and len(fig["float"]["per_example"]) == 4
    # each sequence's margin is its least lead over every position
    leads = [
        min(col[y - 1] - np.delete(col, y - 1).max() for col, y in zip(row, ys, strict=True))
        for row, ys in zip(logits, labels, strict=True)
    ]
    worst = int(np.argmin(leads))
    assert fig["margins"]["smallest_at"] == f"sequences[{worst}]"
    assert abs(float(mpq(fig["min_margin_lower_bound"])) - leads[worst]) <= leads[worst] / 100
    wrong = [list(ys) for ys in labels]
    wrong[2][3] = wrong[2][3] % 11 + 1
    bad = certify(
        model,
        Dataset.from_tokens(
            tokens, wrong, vocab=[[t] for t in range(11)], task="seq2seq", num_classes=11
        ),
    ).checks[0]
    assert not bad.passed and bad.detail.startswith("sequences[2]: another logit")
    assert bad.figures["per_example"][2].startswith("-")
    assert bad.figures["float"]["accuracy"] == "3/4"
