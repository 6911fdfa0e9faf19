//go:build unfairpick

package snapshot_test

import (
	"strings"
	"testing"

	"github.com/baristahq/barista/internal/evidence"
	"github.com/baristahq/barista/snapshot"
)

// These tests run in the unfairpick build (make test-unfair), whose fair
// pick takes the last candidate instead of the first: the dispatches of
// the fairness workload break the order, and the evidence must show it.

// TestForcedUnfairCertificateFails: a certificate issued from a log whose
// dispatches broke the order fails verification, naming the dispatches.
func TestForcedUnfairCertificateFails(t *testing.T) {
	src := simulateFairness(t, 2, 5*60_000)
	for _, name := range []string{"gold", "diamond"} {
		cert, err := snapshot.Certificate(src, name, snapshot.WindowSpec{})
		if err != nil {
			t.Fatal(err)
		}
		rep := evidence.Verify(cert)
		if rep.OK() {
			t.Fatalf("%s: a certificate of unfair dispatches verifies (%d lines)", name, rep.Lines)
		}
		for _, f := range rep.Failures {
			if f.Line < 0 || !strings.Contains(f.Why, "no rule of the order lets it") {
				t.Errorf("%s: failure %+v", name, f)
			}
		}
		t.Logf("%s: %d of %d lines fail, e.g. %s", name, len(rep.Failures), rep.Lines, rep.Failures[0].Why)
	}
}

// TestForcedUnfairFairnessError: the live fairness error rises above 20 %.
func TestForcedUnfairFairnessError(t *testing.T) {
	worst, last := fairnessErrorOver(t, fairnessWorkload(t), 60_000)
	t.Logf("unfair order: fairness error at the end %.4f (%s, share %.4f, entitled %.4f), worst %.4f", last.Value, last.TenantName, last.Share, last.Entitled, worst.Value)
	if !last.OK || last.Value <= 0.20 {
		t.Errorf("fairness error %+v, want above 0.20", last)
	}
}
