"""The mechanisms the kim23 checklist tests (:mod:`exactmem.checks.measures.kim23` and the Lemma C.1
memorizer checks it runs), each check with its breakers, and the small seeded dataset
``exactmem selftest kim23`` builds on.

Kim, Kim & Mozafari 2023 (ICLR, arXiv 2210.12339): token keys (d), a contextual mapping by 2n
attention layers of head size 1 (n), the memorizer of Vardi, Yehudai & Shamir's Lemma C.1 on
the (context, token) ids (√(nN)). Only the abstract was at hand: the contextual mapping is our
reconstruction (docs/kim23.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from exactmem.checks.checklist import Breaker, CheckSpec
from exactmem.core.model import MLP, Affine, Attention, Transformer
from exactmem.datasets.dataset import Dataset
from exactmem.datasets.sequences import random_sequences

PAPER = "Kim, Kim & Mozafari, ICLR 2023 (arXiv 2210.12339)"
LEMMA_C1 = "Vardi, Yehudai & Shamir, ICLR 2022, Lemma C.1 (inside Kim et al.'s memorizer)"


def example() -> Dataset:
    """20 seq-to-seq pairs of 4 tokens from a vocabulary of 5 in Z² (repeats allowed), labels
    in 1..3 a function of (token, multiset)."""
    return random_sequences(20, 4, 2, 5, 3, seed=1, task="seq2seq", labels_by="key")


def _embed(model: Transformer) -> Affine:
    if model.embed is None:
        raise ValueError("not a kim23 model: no token projection E_in")
    return model.embed


def _memorizer(model: Transformer) -> MLP:
    mem = model.sublayers[-1]
    if not isinstance(mem, MLP):
        raise ValueError("not a kim23 model: the last sub-layer is not the memorizer")
    return mem


def _sub(model: Transformer, i: int, sub) -> Transformer:
    subs = list(model.sublayers)
    subs[i] = sub
    return replace(model, sublayers=tuple(subs))


def _second_head(model: Transformer, ds: Dataset) -> Transformer:
    """A count layer given a second (idle) head: no longer one head of size 1."""
    i, att = next(
        (j, s)
        for j, s in enumerate(model.sublayers)
        if isinstance(s, Attention) and s.label == "count0"
    )
    return _sub(model, i, replace(att, heads=att.heads * 2))


def _renamed(old: str, new: str) -> Callable[[Transformer, Dataset], Transformer]:
    def rename(model: Transformer, ds: Dataset) -> Transformer:
        embed = _embed(model)
        names = tuple({old: new, new: old}.get(x, x) for x in embed.names)
        return replace(model, embed=replace(embed, names=names))

    rename.__doc__ = f"the embedding's lanes {old!r} and {new!r} swapped by name"
    return rename


def _uniform_max_read(model: Transformer, ds: Dataset) -> Transformer:
    """The first max-read's scores kept, its score kind made uniform: a plain mean where the
    mapping needs the maximum."""
    i, att = next((j, s) for j, s in enumerate(model.sublayers) if isinstance(s, Attention))
    return _sub(model, i, replace(att, score="uniform"))


def _weak_multiplier(model: Transformer, ds: Dataset) -> Transformer:
    """The memorizer's id z = A(S − S_min) + t read with A = 0 on S: ids of one token in two
    contexts coincide."""
    mem = _memorizer(model)
    first = mem.layers[0]
    S = _embed(model).names.index("S")
    rows = list(first.rows)
    rows[0] = tuple((c, x) for c, x in rows[0] if c != S)
    first = replace(first, rows=tuple(rows))
    return _sub(model, len(model.sublayers) - 1, replace(mem, layers=(first, *mem.layers[1:])))


def _moved_bias(model: Transformer, ds: Dataset) -> Transformer:
    """A memorizer stage's bias moved: the key projection (Stage I) shifted by one step."""
    mem = _memorizer(model)
    first = mem.layers[0]
    bias = list(first.bias)
    bias[0] += first.denominator
    first = replace(first, bias=tuple(bias))
    return _sub(model, len(model.sublayers) - 1, replace(mem, layers=(first, *mem.layers[1:])))


def _no_lane_s(model: Transformer, ds: Dataset) -> Transformer:
    embed = _embed(model)
    names = tuple("T" if x == "S" else x for x in embed.names)
    return replace(model, embed=replace(embed, names=names))


def _bypassed_memorizer(model: Transformer, ds: Dataset) -> Transformer:
    """The memorizer's read-out zeroed and a bypass added: one more unit per layer carries
    ReLU(S) from the first layer to the last, which reads only it — the checked stages stay,
    as dead code beside the carrier."""
    mem = _memorizer(model)
    S = _embed(model).names.index("S")
    first, *middle, last = mem.layers
    layers = [
        replace(
            first,
            rows=(*first.rows, ((S, first.denominator),)),
            bias=(*first.bias, 0),
            names=(*first.names, "bypass") if first.names else (),
        )
    ]
    for layer in middle:
        layers.append(
            replace(
                layer,
                in_dim=layer.in_dim + 1,
                rows=(*layer.rows, ((layer.in_dim, layer.denominator),)),
                bias=(*layer.bias, 0),
                names=(*layer.names, "bypass") if layer.names else (),
            )
        )
    read = ((last.in_dim, last.denominator),)
    layers.append(
        replace(
            last,
            in_dim=last.in_dim + 1,
            rows=(read, *(() for _ in last.rows[1:])),
            bias=(0,) * last.out_dim,
        )
    )
    return _sub(model, len(model.sublayers) - 1, replace(mem, layers=tuple(layers)))


def _memorizer_reads_m(model: Transformer, ds: Dataset) -> Transformer:
    """The memorizer's first layer also reads the lane m (0 before the memorizer on the data,
    so no value changes): its read-out no longer depends on S and t alone."""
    mem = _memorizer(model)
    first = mem.layers[0]
    m = _embed(model).names.index("m")
    rows = list(first.rows)
    rows[0] = tuple(sorted({**dict(rows[0]), m: first.denominator}.items()))
    first = replace(first, rows=tuple(rows))
    return _sub(model, len(model.sublayers) - 1, replace(mem, layers=(first, *mem.layers[1:])))


CHECKS: dict[str, tuple[CheckSpec, ...]] = {
    "kim23": (
        CheckSpec(
            "kim23.architecture",
            PAPER,
            "the n term of Õ(d + n + √(nN)): 2n attention layers of head size 1",
            "every attention layer has one head whose query and value are of size 1, and "
            "there are 2n of them",
            (Breaker("second head", "head size 1", "kim23.architecture", model=_second_head),),
        ),
        CheckSpec(
            "kim23.context",
            PAPER,
            "the contextual mapping (our reconstruction)",
            "the context value S is one value per sequence, equal on equivalent sequences, and "
            "apart wherever the data needs it ((S, token) determines the label)",
            (
                Breaker(
                    "lane S renamed",
                    "the lane the context value lives in",
                    "kim23.context",
                    model=_renamed("S", "one"),
                ),
            ),
        ),
        CheckSpec(
            "kim23.token_ids",
            PAPER,
            "the (context, token) ids the memorizer reads",
            "the ids z = A(S − S_min) + t are equal only where the labels are",
            (
                Breaker(
                    "id multiplier dropped",
                    "the multiplier that keeps ids of different contexts apart",
                    "kim23.token_ids",
                    model=_weak_multiplier,
                ),
            ),
        ),
        CheckSpec(
            "kim23.attention",
            PAPER,
            "the hardmax max-read",
            "every attention layer with unequal scores is a hardmax (or softmax) whose "
            "maximisers carry equal values; others are exactly uniform",
            (
                Breaker(
                    "max-read made uniform",
                    "the maximum the max-read returns",
                    "kim23.attention",
                    model=_uniform_max_read,
                ),
            ),
        ),
        CheckSpec(
            "kim23.softmax",
            PAPER,
            "the softmax regime (our reconstruction)",
            "each softmax layer's error, bounded over the visible keys, is erased by the next "
            "FFN (affine and equal to the hardmax limit's output on the error segment)",
            (
                Breaker(
                    "temperature 4",
                    "the margin between the max-read's error and the re-quantizer's step",
                    "kim23.softmax",
                    options={"attention": "softmax", "temperature": 4},
                ),
            ),
        ),
        CheckSpec(
            "memorizer.",
            LEMMA_C1,
            "the memorizer's stages on the ids",
            "Stage I keys ≥ 2 apart, Stage II groups, Stage III segments and matches",
            (
                Breaker(
                    "stage I bias moved",
                    "the keys of Stage I",
                    "memorizer.",
                    model=_moved_bias,
                ),
            ),
        ),
        CheckSpec(
            "kim23.dataflow.memorizer",
            PAPER,
            "the √(nN) term: the memorizer on the ids produces the labels",
            "every path from the input to the output crosses the memorizer's checked read-out "
            "(Lemma C.1 Stage III's matches and labels), over the non-zero weights",
            (
                Breaker(
                    "mechanism read-out zeroed, bypass added",
                    "the memorizer as the producer of the output",
                    "kim23.dataflow.memorizer",
                    model=_bypassed_memorizer,
                ),
            ),
        ),
        CheckSpec(
            "kim23.dataflow.lanes",
            PAPER,
            "the memorizer reads the (context, token) ids",
            "every path into the memorizer's read-out crosses the lanes S and t the ids "
            "z = A(S − S_min) + t are made of",
            (
                Breaker(
                    "memorizer reads lane m",
                    "the ids as the memorizer's only input",
                    "kim23.dataflow.lanes",
                    model=_memorizer_reads_m,
                ),
            ),
        ),
        CheckSpec(
            "kim23.structure",
            PAPER,
            "the architecture the checklist reads",
            "E_in, the 2n attention layers with their FFNs, a lane S before the memorizer",
            (Breaker("no lane S", "the context lane", "kim23.structure", model=_no_lane_s),),
        ),
    ),
}

# the small seeded dataset selftest builds the honest model on, per construction
EXAMPLES: dict[str, Callable[[], Dataset]] = {"kim23": example}
