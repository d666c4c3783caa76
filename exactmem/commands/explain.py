"""``exactmem explain CERT_OR_RUN``: take a REFUTED or INCONCLUSIVE verdict from its failed
check to the sub-layer, lane and example where the values leave what the proof needs
(:mod:`exactmem.reports.explain` states the rule). The input is a certificate file — with
``--model``
and ``--data`` (their SHA-256 checked against it) to walk the examples through the exact trace
— or a run: ``--model M --data D [--construction NAME]``, certified here first."""

from __future__ import annotations

import argparse
from typing import cast

from exactmem.core.errors import (
    EXIT_INCONCLUSIVE,
    EXIT_REFUTED,
    EXIT_VERIFIED,
    InconclusiveError,
    InputError,
)


def _load(args: argparse.Namespace):
    from exactmem.files.dataset_files import load_dataset
    from exactmem.files.model_files import load_model

    model, _ = load_model(args.model)
    dataset = load_dataset(args.data, allow_floats=args.allow_floats)
    return model, dataset


def _same_subject(cert: dict, path: str, model, dataset) -> None:
    """The model and dataset must be the ones the certificate was made from."""
    from exactmem.datasets.dataset import dataset_hash
    from exactmem.files.model_json import model_hash
    from exactmem.reports.tracing import feed

    subject = cert["subject"]
    if model_hash(model) != subject["model_sha256"]:
        raise InputError(f"--model: its sha256 is not the one certificate {path} records")
    fed = feed(model, dataset)[1] if dataset.task != "points" else dataset
    if subject["dataset_sha256"] not in (dataset_hash(dataset), dataset_hash(fed)):
        raise InputError(f"--data: its sha256 is not the one certificate {path} records")


def run(args: argparse.Namespace) -> int:
    from exactmem.reports.explain import explain, render

    if (args.model is None) != (args.data is None):
        raise InputError("--model and --data go together")
    if args.certificate is None and args.model is None:
        raise InputError("give a certificate file, or --model and --data (a run to certify)")
    options: dict = {}
    if args.construction is not None:  # a plugin's name too (the registry)
        from exactmem.checks.build_options import options_of

        options_of(args.construction)  # unknown: exit 2 naming the known ones
    if args.set:  # stated build options: criteria of the run certified here, as `verify --set`
        if args.certificate is not None:
            raise InputError("--set: a certificate records its own criteria")
        if args.construction is None:
            raise InputError(
                "--set: build options are criteria of a construction; give --construction"
            )
        from exactmem.checks.build_options import parse_options

        options = parse_options(args.construction, args.set)
    model = dataset = None
    inconclusive = None
    if args.certificate is not None:
        if args.construction is not None:
            raise InputError("--construction: a certificate records its own criteria")
        from exactmem.checks.recheck import printable, read

        # its texts are printed: non-printable characters escaped, as show prints them
        cert = cast(dict, printable(read(args.certificate)))
        if args.model is not None:
            model, dataset = _load(args)
            _same_subject(cert, args.certificate, model, dataset)
        checks, verdict = cert["checks"], cert["verdict"]
        construction = cert["subject"].get("construction")
    else:
        from exactmem.checks.certify import certify

        model, dataset = _load(args)
        construction = args.construction
        try:
            certificate = certify(model, dataset, construction=construction, options=options)
            checks = [c.as_dict() for c in certificate.checks]
            verdict = certificate.verdict
        except InconclusiveError as exc:
            checks, verdict, inconclusive = [], "inconclusive", str(exc)
    expl = explain(
        checks,
        verdict=verdict,
        construction=construction,
        model=model,
        dataset=dataset,
        inconclusive=inconclusive,
    )
    if args.json:
        from exactmem.commands import emit_json

        emit_json({"verdict": expl.verdict, "findings": expl.findings, "note": expl.note})
    else:
        for line in render(expl):
            print(line)
    if verdict == "inconclusive":
        return EXIT_INCONCLUSIVE
    return EXIT_VERIFIED if verdict == "verified" else EXIT_REFUTED
