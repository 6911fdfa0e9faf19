"""The certificate verifier against the vectors the Go verifier is held
to (internal/evidence/testdata/vectors): the same verdicts, the same
failing lines, the same digests."""

from __future__ import annotations

import json
from pathlib import Path

import barista
from barista import evidence

VECTORS = Path(__file__).resolve().parents[3] / "internal" / "evidence" / "testdata" / "vectors"


def test_vectors():
    expected = json.loads((VECTORS / "expected.json").read_text())
    assert set(expected) == {"valid", "unfair", "swapped", "edited", "reserve"}
    for name, want in expected.items():
        doc = (VECTORS / f"{name}.json").read_text()
        rep = barista.verify_certificate(doc)
        assert (rep.ok, [f.line for f in rep.failures]) == (want["ok"], want["failure_lines"]), (name, rep.failures)
        cert = json.loads(doc)
        if name in ("valid", "unfair", "reserve"):
            assert evidence.certificate_digest(cert) == cert["digest"]


def test_reasons_are_the_first_that_holds():
    cert = json.loads((VECTORS / "valid.json").read_text())
    for line in cert["lines"]:
        for m in line["mine"]:
            assert evidence.reason_for(cert, line["worker_size"], line["chosen"], m) == m["reason"]


def test_not_a_certificate():
    try:
        barista.verify_certificate('{"version": 2}')
    except ValueError as e:
        assert "version 1" in str(e)
    else:
        raise AssertionError("no error")
