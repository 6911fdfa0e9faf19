package snapshot_test

import (
	"testing"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/fsm/fairness"
	"github.com/baristahq/barista/sfq"
)

// fairnessErrorOver applies src entry by entry and returns the largest
// live fairness error of the pool default (10 minute window) seen at any
// entry from warm on, and the last.
func fairnessErrorOver(t *testing.T, entries func() (*fsm.FSM, int, func(int) error), warm sfq.Time) (worst, last fsm.PoolFairness) {
	t.Helper()
	f, n, apply := entries()
	for i := range n {
		if err := apply(i); err != nil {
			t.Fatal(err)
		}
		if clock, _ := f.Clock(); clock < warm {
			continue
		}
		errs := f.FairnessErrors(fsm.DefaultErrorWindow)
		if len(errs) != 1 || errs[0].Pool != "default" || errs[0].Window != fairness.Windows[1].Name {
			t.Fatalf("errors %+v", errs)
		}
		if e := errs[0]; e.OK && (!worst.OK || e.Value > worst.Value) {
			worst = e
		}
		last = errs[0]
	}
	return worst, last
}

// fairnessWorkload is the fairness report's workload run for 15 minutes
// on two workers, entry by entry.
func fairnessWorkload(t *testing.T) func() (*fsm.FSM, int, func(int) error) {
	src := simulateFairness(t, 2, 15*60_000)
	return func() (*fsm.FSM, int, func(int) error) {
		f := src.New()
		return f, len(src.Entries), func(i int) error {
			_, err := f.ApplyEnvelope(uint64(i+1), src.Entries[i])
			return err
		}
	}
}

// TestFairnessErrorOfTheFairnessWorkload: over the fairness report's
// workload (five tiers, wrong estimates, two workers, 15 minutes), the
// live fairness error stays below 2 % from its first minute on.
func TestFairnessErrorOfTheFairnessWorkload(t *testing.T) {
	worst, last := fairnessErrorOver(t, fairnessWorkload(t), 60_000)
	t.Logf("fairness error from 60 s on: worst %.4f (%s, share %.4f, entitled %.4f), at the end %.4f (%s)",
		worst.Value, worst.TenantName, worst.Share, worst.Entitled, last.Value, last.TenantName)
	if !worst.OK || worst.Value >= 0.02 || !last.OK {
		t.Errorf("fairness error %+v (at the end %+v), want below 0.02", worst, last)
	}
}
