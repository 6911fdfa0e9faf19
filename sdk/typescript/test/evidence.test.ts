/**
 * The certificate verifier against the vectors the Go verifier is held
 * to (internal/evidence/testdata/vectors): the same verdicts, the same
 * failing lines, the same digests.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { certificateDigest, reasonFor, verifyCertificate, type Certificate } from "../src/evidence.js";
import { ROOT } from "./cluster.js";

const VECTORS = join(ROOT, "internal", "evidence", "testdata", "vectors");

test("the verifier gives the Go verifier's verdicts on its vectors", () => {
  const expected = JSON.parse(readFileSync(join(VECTORS, "expected.json"), "utf8")) as Record<string, { ok: boolean; failure_lines: number[] }>;
  assert.deepEqual(Object.keys(expected).sort(), ["edited", "reserve", "swapped", "unfair", "valid"]);
  for (const [name, want] of Object.entries(expected)) {
    const doc = readFileSync(join(VECTORS, `${name}.json`), "utf8");
    const rep = verifyCertificate(doc);
    assert.deepEqual([rep.ok, rep.failures.map((f) => f.line)], [want.ok, want.failure_lines], name);
    const cert = JSON.parse(doc) as Certificate;
    if (["valid", "unfair", "reserve"].includes(name)) assert.equal(certificateDigest(cert), cert.digest, name);
  }
});

test("each candidate's reason is the first that holds", () => {
  const cert = JSON.parse(readFileSync(join(VECTORS, "valid.json"), "utf8")) as Certificate;
  for (const line of cert.lines) for (const m of line.mine) assert.equal(reasonFor(cert, line.worker_size, line.chosen, m), m.reason);
});

test("a document of another version is refused", () => {
  assert.throws(() => verifyCertificate('{"version": 2}'), /version 1/);
});
