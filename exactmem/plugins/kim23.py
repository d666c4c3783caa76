"""The built-in construction ``kim23`` (Kim, Kim & Mozafari 2023), registered as a plugin: its
checklist (:func:`exactmem.verify_kim23.check_kim23`) reads the core's exact evaluation of the
model's hardmax limit, and certifies a softmax model equal to that limit."""

from __future__ import annotations

from exactmem.checklist import Evidence
from exactmem.mechanisms import kim23 as mechanisms
from exactmem.plugins import builtin
from exactmem.verify import Check

PAPER = "Kim, Kim & Mozafari 2023"
NAME = "kim23"

# proofs/kim23.toml's [tight] width;
# its fitted depth, parameters and bits grow with the sizes at constants fitted on the claims'
# instances and options: they are judged there, per instance (`exactmem check`)
BOUNDS = {
    "width": "12",
}


def run(evidence: Evidence) -> list[Check]:
    from exactmem.verify_kim23 import check_kim23

    assert evidence.trace is not None  # evaluates the hardmax limit exactly
    return check_kim23(evidence.trace, evidence.model, evidence.dataset, evidence.view)


construction = builtin(
    NAME,
    PAPER,
    mechanisms,
    tasks=("seq2seq", "next-token"),
    summary="Kim et al. 2023: 2n attention layers of head size 1, context values equal on "
    "equivalent sequences, (context, token) ids distinct where labels differ, attention "
    "ties and margins, the memorizer's Lemma C.1 stages",
    run=run,
    evaluates="hardmax-limit",
    bounds=BOUNDS,
    source="proofs/kim23.toml, [tight]",
    limit_check="kim23.softmax",
)
