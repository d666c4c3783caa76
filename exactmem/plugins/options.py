"""The built-in constructions' descriptions and ``--set KEY=VALUE`` options (registered with
them, :mod:`exactmem.plugins`), and the upper bounds of the numeric options, checked against the
dataset before any work.

One table per construction serves ``build --set``, :func:`exactmem.build` and the claim files'
``[options]``, so the three parse and bound an option by the same code; a plugin's table is its
:attr:`~exactmem.checks.checklist.Construction.options`
(:func:`exactmem.checks.registry.options_of`).
"""

from __future__ import annotations

from exactmem.core.errors import InputError

CONSTRUCTIONS = {
    "vys": "Vardi, Yehudai & Shamir 2022, Theorem 3.1 / Kajitsuka & Sato 2025, Lemma C.1 "
    "(task points)",
    "ks25-next-token": "Kajitsuka & Sato 2025, Theorem 4.1: FFN + uniform attention + FFN, "
    "width 14 (task next-token)",
    "ks25-seq2seq": "Kajitsuka & Sato 2025, Corollary 4.1: labels at every position (task seq2seq)",
    "ks25-token-ids": "Kajitsuka & Sato 2025, Theorem E.1: an embedding table replaces F1 "
    "(task next-token; tokens are vocabulary indices)",
    "ks25-deep-sets": "Kajitsuka & Sato 2025, Theorem D.1: rho(sum phi) on multisets "
    "(task next-token, labels by multiset)",
    "ks25-bit-budget": "Kajitsuka & Sato 2025, Theorem F.1: memorizers split into sub-networks "
    "of B^2 points (needs --set bit_budget=B)",
}
CONSTRUCTIONS["mahdavi24"] = (
    "Mahdavi, Liao & Thrampoulidis 2024: one multi-head attention layer memorizes "
    "H(min(n, d_h) - 1) + 1 examples (task next-token: n context tokens, then the query)"
)
CONSTRUCTIONS["dana25"] = (
    "Dana, Pydi & Chevaleyre 2025: an attention-only Transformer memorizes H*d_h + d "
    "associations (task next-token over token ids)"
)
CONSTRUCTIONS["kim23"] = (
    "Kim, Kim & Mozafari 2023: token keys, a contextual mapping by 2n hardmax attention "
    "layers of head size 1, then the Lemma C.1 memorizer (task seq2seq or next-token)"
)
CONSTRUCTIONS["ks24"] = (
    "Kajitsuka & Sato 2024: one rank-one softmax attention head (the Boltzmann operator) as a "
    "contextual mapping, then one re-quantizing FFN (task seq2seq; tokens of a sequence distinct)"
)
CONSTRUCTIONS["madden24"] = (
    "Madden, Fox & Thrampoulidis 2024: a one-layer decoder (causal softmax head, GELU FNN of "
    "width m >= n - 1) interpolates n next-token distributions (task next-token over token ids)"
)


NUMBER_CHARS = 64  # --set numbers: 2⁶⁴ and p/q with p, q < 2⁶⁴ fit, 10⁷-digit strings do not


def _choice(*allowed: str):
    def parse(key: str, value: str):
        if value not in allowed:
            raise InputError(f"--set {key}={value}: expected one of {', '.join(allowed)}")
        return value

    return parse


def _positive(key: str, value: str) -> int:
    # ASCII only: str.isdigit also accepts "²" (which int() refuses) and "١٢" (which it reads)
    if not (value.isascii() and value.isdigit()) or len(value) > NUMBER_CHARS or int(value) < 1:
        raise InputError(
            f"--set {key}={value:.{NUMBER_CHARS}}: expected a positive integer in ASCII digits "
            f"(at most {NUMBER_CHARS} characters)"
        )
    return int(value)


def _budget(key: str, value: str) -> int:
    """A bit budget B ≥ 2 (the builder's K_B = ⌈B/√log₂ B⌉ needs log₂ B > 0): the same
    refusal for ``build``, ``verify --set`` and the claim files."""
    budget = _positive(key, value)
    if budget < 2:
        raise InputError(f"--set {key}={value}: a bit budget B must be ≥ 2")
    return budget


def _precision(key: str, value: str) -> int:
    """Bits of an Arb computation: at least 2 (Arb refuses less; 1 crashed three builders)."""
    bits = _positive(key, value)
    if bits < 2:
        raise InputError(f"--set {key}={value}: a precision must be at least 2 bits")
    return bits


def _boolean(key: str, value: str) -> bool:
    if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
        raise InputError(f"--set {key}={value}: expected true or false")
    return value.lower() in ("true", "1", "yes")


FIXED_POINT = {  # the solved weights' fixed point (exactmem.constructions.fixed_point)
    "frac_bits": lambda default: (
        f"F: every solved weight is rounded to a multiple of 2^-F (default {default})",
        _positive,
    ),
    "int_bits": lambda default: (
        f"E: the build is refused when a solved weight reaches 2^E in magnitude (default "
        f"{default})",
        _positive,
    ),
}
MEMORIZER_OPTIONS = {
    "gadget": (
        "keyed (integer bit-peel with assembled keys, default; fast-evaluable) | peel "
        "(bit-peel matched on the packed integer) | tent (paper-style tent map)",
        _choice("keyed", "peel", "tent"),
    ),
    "group_size": ("slots per group K (default: the K of least depth)", _positive),
}
KS25_OPTIONS = {
    "gadget": MEMORIZER_OPTIONS["gadget"],
    "sequence_weights": (
        "random (default) | union (Lemma B.2's statement by a union bound) | paper (the "
        "printed construction, which fails)",
        _choice("random", "union", "paper"),
    ),
    "paper_direction": (
        "unit direction for sequence_weights=paper, e.g. 4/5,-3/5 (default: random, checked "
        "against Park's inequality)",
        lambda k, v: v,
    ),
    "attention": (
        "softmax (default) | hardmax | uniform: all scores are 0 either way",
        _choice("softmax", "hardmax", "uniform"),
    ),
    "position_aware": ("true: append the position k to every token (real text)", _boolean),
    "bit_budget": (
        "B: split each memorizer into sub-networks of B² points whose groups hold at most "
        "⌈B/√log₂B⌉ slots (Theorem F.1)",
        _budget,
    ),
    "token_ids": (
        "lemma (default) | weakened: ids one unit apart (Lemma C.2 asks two), or counted from "
        "0 (Theorem E.1 asks [1, ω]) — refuted by the id checks",
        _choice("lemma", "weakened"),
    ),
}
OPTIONS = {
    "vys": {
        **MEMORIZER_OPTIONS,
        "direction_bound": ("|w_i| bound of the Stage I direction (default N²)", _positive),
        "bit_widths": (
            "corrected (default) | paper (ρ and c swapped as printed in Lemma C.1)",
            _choice("corrected", "paper"),
        ),
    },
    "ks25-next-token": KS25_OPTIONS,
    "ks25-seq2seq": KS25_OPTIONS,
    "ks25-deep-sets": KS25_OPTIONS,
    "ks25-bit-budget": KS25_OPTIONS,
    "ks25-token-ids": {k: v for k, v in KS25_OPTIONS.items() if k != "position_aware"},
    "dana25": {
        "d": ("embedding dimension (default 2)", _positive),
        "head_dim": ("d_h ≤ d (default d)", _positive),
        "heads": (
            "H (default: the fewest with H·d_h + min(d, k) ≥ T₀, k distinct last tokens)",
            _positive,
        ),
        "scale": ("λ_U: the target residual is λ_U·w_g (default 100)", _positive),
        "precision": (
            "bits of the Arb readout solve (default 256, doubled on failure)",
            _precision,
        ),
        "over_capacity": (
            "true: build even when T₀ > H·d_h + d, fitting the first H·d_h + d (the verifier "
            "refutes)",
            _boolean,
        ),
        "frac_bits": FIXED_POINT["frac_bits"]("64"),
        "int_bits": FIXED_POINT["int_bits"]("128"),
    },
    "kim23": {
        **MEMORIZER_OPTIONS,
        "position_aware": (
            "true: a positional encoding adds k·T to the key at position k (no permutation "
            "equivariance; labels per (sequence, position))",
            _boolean,
        ),
        "functional_bound": (
            "K': α_r, β_r drawn from [−K', K'] (default N'², N' distinct contexts)",
            _positive,
        ),
        "resample": (
            "true (default): redraw the functional until the context values are distinct | "
            "false: keep the first draw (a collision is left to the verifier)",
            _boolean,
        ),
        "id_multiplier": (
            "A in the ids z = A(S − S_min) + t (default T + 1, T the largest token key; "
            "A < T lets ids of two contexts collide — left to the verifier)",
            _positive,
        ),
        "attention": (
            "hardmax (default) | softmax (max-read at temperature λ, re-quantized; certified "
            "on Arb balls)",
            _choice("hardmax", "softmax"),
        ),
        "temperature": (
            "softmax λ, a positive integer (default bitlen(4(n − 1)·nL): error < 1/4)",
            _positive,
        ),
    },
    "mahdavi24": {
        "heads": ("H (default: the fewest with H(min(n, d_h) − 1) + 1 ≥ T)", _positive),
        "score": (
            "hardmax (default: the exact limit model) | softmax (finite temperature)",
            _choice("hardmax", "softmax"),
        ),
        "readout": (
            "regression (default: labels as real targets) | classification (C "
            "logits, certified argmax)",
            _choice("regression", "classification"),
        ),
        "temperature": (
            "softmax temperature λ (default: the least power of two that certifies)",
            lambda k, v: _rational_option(k, v),
        ),
        "readout_solve": (
            "limit (default: the exact hardmax readout) | resolve (re-solved on "
            "Arb balls at the temperature)",
            _choice("limit", "resolve"),
        ),
        "tolerance": (
            "allowed |output − label| for softmax regression (default 1/1000)",
            lambda k, v: str(_rational_option(k, v)),
        ),
        "over_capacity": (
            "true: build even when T > H(min(n, d_h) − 1) + 1 (the verifier refutes)",
            _boolean,
        ),
        "head_dim": ("d_h, 2 ≤ d_h ≤ d (default d): capacity H(min(n, d_h) − 1) + 1", _positive),
        "frac_bits": (
            "F: a readout re-solved on balls (readout_solve=resolve) is rounded to multiples "
            "of 2^-F (default 64)",
            _positive,
        ),
        "int_bits": (
            "E: the build is refused when a readout weight re-solved on balls reaches 2^E in "
            "magnitude (default 64)",
            _positive,
        ),
    },
    "ks24": {
        "temperature": (
            "λ of the softmax head, kept as given (0: plain averaging, the verifier refutes; "
            "default: a power of two λ₀ from the token projections, then λ₀/4 and 4λ₀)",
            lambda k, v: _rational_option(k, v, zero=True),
        ),
        "ffn": (
            "requantized (default: ramps, a label lane and exact 0/1 steps) or residual (one "
            "hidden layer, F(z) = z + W₂ReLU(W₁z + b₁) + b₂, labels on lane 0)",
            _choice("requantized", "residual"),
        ),
        "precision": (
            "the most bits the build may use to certify the gap (default 4096)",
            _precision,
        ),
        "allow_repeats": (
            "true: build although a sequence repeats a token (the verifier refutes)",
            _boolean,
        ),
        "r_min": ("require ‖z‖ ≥ r_min for every token", lambda k, v: _rational_option(k, v)),
        "r_max": ("require ‖z‖ ≤ r_max for every token", lambda k, v: _rational_option(k, v)),
        "epsilon": (
            "require distinct tokens ≥ ε apart (tokenwise separatedness)",
            lambda k, v: _rational_option(k, v),
        ),
    },
}
OPTIONS["madden24"] = {
    "d": ("embedding dimension (default 8)", _positive),
    "width": (
        "m: the FNN's width (default n, the distinct contexts; below n − 1 the verifier refutes)",
        _positive,
    ),
    "precision": ("bits of the Arb output solve (default 256, doubled on failure)", _precision),
    "frac_bits": FIXED_POINT["frac_bits"]("128"),
    "int_bits": FIXED_POINT["int_bits"]("128"),
    "tolerance": (
        "allowed |softmax − target| a claim file certifies (the build ignores it; verify takes "
        "--tolerance)",
        lambda k, v: str(_rational_option(k, v)),
    ),
}


def _rational_option(key: str, value: str, zero: bool = False):
    from exactmem.core.exact import parse_rational

    if len(value) > NUMBER_CHARS:
        raise InputError(f"--set {key}: more than {NUMBER_CHARS} characters")
    q = parse_rational(value, f"--set {key}")
    if q < 0 or (q == 0 and not zero):
        what = "a non-negative" if zero else "a positive"
        raise InputError(f"--set {key}={value}: expected {what} rational")
    return str(q)
