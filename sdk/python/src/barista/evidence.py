"""The evidence of fairness (docs/fairness.md): a certificate's verifier,
the port of the Go client's (internal/evidence), held to the same answers
by the vectors both read (internal/evidence/testdata/vectors).

    report = barista.verify_certificate(open("cert.json").read())
    if not report.ok:
        for f in report.failures:
            print(f.line, f.index, f.why)

It needs no cluster: anyone holding a certificate can check it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Mapping, Optional, Union

#: The certificate format this verifier reads.
CERTIFICATE_VERSION = 1

#: The reasons a candidate was not chosen, in the order a certificate
#: gives the first that holds.
REASONS = ("size", "class", "deadline", "key", "fit", "reserve")

_SIZE = {"sm": 0, "md": 1, "lg": 2}
_CLASS = {"critical": 3, "high": 2, "normal": 1, "low": 0}  # higher goes first


@dataclass(frozen=True)
class Failure:
    """A check a certificate failed: ``line`` (its position in the lines,
    -1 for the whole certificate), its log ``index`` and ``job`` (0: none),
    and ``why``."""

    line: int
    index: int
    job: int
    why: str


@dataclass(frozen=True)
class CertificateReport:
    """What ``verify_certificate`` found: the lines and candidates it
    checked, and every failure (none: the certificate holds)."""

    lines: int
    candidates: int
    failures: List[Failure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


class _Bad(Exception):
    pass


def _holds(cert: Mapping[str, Any], reason: str, ws: str, c: Mapping[str, Any], m: Mapping[str, Any]) -> bool:
    """Whether ``reason`` lets job ``c`` go before candidate ``m`` on a
    worker of size ``ws``."""
    try:
        w, cs, ms = _SIZE[ws], _SIZE[c["size"]], _SIZE[m["size"]]
        cc, mc = _CLASS[c["class"]], _CLASS[m["class"]]
        c_start, m_start = int(c["start"]), int(m["start"])
    except (KeyError, ValueError, TypeError) as e:
        raise _Bad(f"size, class or start of job {c.get('job')} or {m.get('job')}: {e}") from None
    margin = int(cert.get("margin_us", 0))
    cdl, mdl = c.get("deadline_at_ms", 0) != 0, m.get("deadline_at_ms", 0) != 0
    same = cc == mc
    if reason == "size":
        return ms > w
    if reason == "class":
        return cc > mc
    if reason == "deadline":
        return same and cdl and not mdl
    if reason == "key":
        if not same:
            return False
        if cdl and mdl:
            return (c["deadline_at_ms"], c["job"]) < (m["deadline_at_ms"], m["job"])
        if cdl or mdl or (cs == w) != (ms == w):
            return False
        # (start, higher tier, larger size, lower job)
        return (c_start, -c["tier"], -cs, c["job"]) < (m_start, -m["tier"], -ms, m["job"])
    if reason == "fit":
        if not same or cdl or mdl or cs != w or ms >= w:
            return False
        if cert.get("policy") == "prefer-fit":
            return True
        if cert.get("policy") == "reserve":
            return c_start - m_start <= margin
        raise _Bad(f"policy {cert.get('policy')!r}")
    if reason == "reserve":
        if not same or cdl or mdl or cs >= w or ms != w or cert.get("policy") != "reserve":
            return False
        return m_start - c_start > margin
    raise _Bad(f"unknown reason {reason!r}")


def reason_for(cert: Mapping[str, Any], ws: str, c: Mapping[str, Any], m: Mapping[str, Any]) -> str:
    """The first reason that lets ``c`` go before ``m`` on a worker of
    size ``ws``, or "" when none does."""
    for r in REASONS:
        try:
            if _holds(cert, r, ws, c, m):
                return r
        except _Bad:
            return ""
    return ""


def _canon(parts: Iterable[Any]) -> bytes:
    return "".join(f"{p}\n" for p in parts).encode()


def _key_parts(k: Mapping[str, Any]) -> List[Any]:
    return [k.get("tenant", ""), k["job"], k["class"], k["size"], k.get("deadline_at_ms", 0), k["start"], k["tier"], k.get("reason", "")]


def certificate_digest(cert: Mapping[str, Any]) -> str:
    """The digest a certificate carries (see the Go client's
    CertificateDigest): SHA-256 over the header's canonical text, then
    over each line's, chained."""
    w = cert["window"]
    h = hashlib.sha256(_canon(["barista-certificate", cert["version"], cert["tenant"], w["from_index"], w["to_index"], w["from_ms"],
                               w["to_ms"], "true" if w["open"] else "false", w["start_hash"], w["end_hash"], cert["policy"],
                               cert["margin_us"], cert["clamp"]])).digest()
    for line in cert["lines"]:
        parts = [line["index"], line["at_ms"], line["pool"], line["worker_size"]] + _key_parts(line["chosen"]) + [len(line["mine"])]
        for m in line["mine"]:
            parts += _key_parts(m)
        h = hashlib.sha256(h + _canon(parts)).digest()
    return h.hex()


def _opaque(name: str) -> bool:
    n = name[1:] if name.startswith("t") else ""
    return n.isdigit() and str(int(n)) == n and int(n) > 0


def _key_text(k: Mapping[str, Any]) -> str:
    s = f"{k['class']} {k['size']} start {k['start']} tier {k['tier']}"
    if k.get("deadline_at_ms", 0):
        s += f" deadline {k['deadline_at_ms']}"
    return s


def verify_certificate(doc: Union[str, bytes, Mapping[str, Any]]) -> CertificateReport:
    """Checks a certificate (its JSON document, or the parsed object): its
    digest, that its lines are in log and time order inside its window,
    and that every dispatch went to a job with a lower key or a rule of
    the order that outranks each of the tenant's candidates (a higher
    class, a deadline, a worker that could not take it). Raises
    ValueError for a document that is not a certificate of this
    version."""
    cert = json.loads(doc) if isinstance(doc, (str, bytes, bytearray)) else doc
    if not isinstance(cert, Mapping) or cert.get("version") != CERTIFICATE_VERSION:
        raise ValueError(f"not a certificate of version {CERTIFICATE_VERSION}")
    failures: List[Failure] = []

    def fail(line: int, index: int, job: int, why: str) -> None:
        failures.append(Failure(line, index, job, why))

    got = certificate_digest(cert)
    if got != cert.get("digest"):
        fail(-1, 0, 0, f"the digest is {cert.get('digest')} but the certificate's content hashes to {got}: it was changed after it was issued")
    if cert.get("policy") not in ("prefer-fit", "reserve"):
        fail(-1, 0, 0, f"unknown policy {cert.get('policy')!r}")
    w = cert["window"]
    candidates = 0
    prev: Optional[Mapping[str, Any]] = None
    for i, line in enumerate(cert["lines"]):
        idx, at = line["index"], line["at_ms"]
        if not w["from_index"] <= idx <= w["to_index"]:
            fail(i, idx, 0, f"index {idx} is outside the window {w['from_index']}..{w['to_index']}")
        if not w["from_ms"] <= at <= w["to_ms"]:
            fail(i, idx, 0, f"time {at} is outside the window {w['from_ms']}..{w['to_ms']}")
        if prev is not None and (idx < prev["index"] or at < prev["at_ms"]):
            fail(i, idx, 0, f"out of order: index {idx} at {at} ms after index {prev['index']} at {prev['at_ms']} ms")
        prev = line
        c, ws = line["chosen"], line["worker_size"]
        if c.get("tenant") != "self" and not _opaque(c.get("tenant", "")):
            fail(i, idx, c["job"], f"the chosen job's tenant {c.get('tenant')!r} is neither 'self' nor an opaque name")
        if _SIZE.get(c["size"], 0) > _SIZE.get(ws, 0):
            fail(i, idx, c["job"], f"a {ws} worker was given the {c['size']} job {c['job']}")
        if not line["mine"] and c.get("tenant") != "self":
            fail(i, idx, c["job"], "a line without a candidate of the tenant's")
        for m in line["mine"]:
            candidates += 1
            if m["job"] == c["job"]:
                fail(i, idx, m["job"], f"job {m['job']} is both chosen and a candidate not chosen")
                continue
            reason = m.get("reason", "")
            try:
                ok = reason != "" and _holds(cert, reason, ws, c, m)
            except _Bad as e:
                fail(i, idx, m["job"], f"candidate job {m['job']}: {e}")
                continue
            if ok:
                continue
            if reason == "":
                fail(i, idx, m["job"], f"job {c['job']} ({_key_text(c)}) went before candidate job {m['job']} ({_key_text(m)}) and no rule of the order lets it")
            else:
                r = reason_for(cert, ws, c, m)
                why = f"the rule that does is {r}" if r else "no rule of the order lets it"
                fail(i, idx, m["job"], f"job {c['job']} ({_key_text(c)}) went before candidate job {m['job']} ({_key_text(m)}) "
                                       f"for reason {reason!r}, which does not hold: {why}")
    return CertificateReport(lines=len(cert["lines"]), candidates=candidates, failures=failures)


