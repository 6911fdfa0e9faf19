package apiview

import (
	"testing"

	"github.com/baristahq/barista/fsm/fairness"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// TestPausedAndRate: who paused, and a rate without its burst, as the
// API shows them.
func TestPausedAndRate(t *testing.T) {
	for p, want := range map[sfq.PausedBy]string{sfq.NotPaused: "", sfq.PausedByTenant: "tenant", sfq.PausedByAdmin: "admin"} {
		if got := Paused(p); got != want {
			t.Errorf("Paused(%d) = %q, want %q", p, got, want)
		}
	}
	if got, want := Rate(sfq.RateLimit{N: 100, PeriodMs: 60000, Burst: 7}), (sfq.RateLimit{N: 100, PeriodMs: 60000}).String(); got != want {
		t.Errorf("Rate = %q, want %q (no burst)", got, want)
	}
}

// TestMarkDeadlineMissed: only a queued job at or past its deadline is
// marked.
func TestMarkDeadlineMissed(t *testing.T) {
	q, r := sfq.Queued.String(), sfq.Running.String()
	jobs := []*pb.Job{
		{JobId: 1, State: q, DeadlineAtMs: 100},
		{JobId: 2, State: q, DeadlineAtMs: 101},
		{JobId: 3, State: r, DeadlineAtMs: 50},
		{JobId: 4, State: q},
	}
	MarkDeadlineMissed(100, jobs...)
	for i, want := range []bool{true, false, false, false} {
		if jobs[i].DeadlineMissed != want {
			t.Errorf("job %d: deadline_missed %v, want %v", jobs[i].JobId, jobs[i].DeadlineMissed, want)
		}
	}
}

// TestFairWindow: a window's figures, its ratios left out where they are
// undefined.
func TestFairWindow(t *testing.T) {
	w := FairWindow("1m", fairness.Figures{SpanMs: 60000, ChargedMs: 300, ClassChargedMs: 1200, EntitledQ24: 500 * fairness.EntitledOne / 2, BusyMs: 500})
	if w.Window != "1m" || w.SpanMs != 60000 || w.ChargedMs != 300 || w.ClassChargedMs != 1200 || w.BusyMs != 500 {
		t.Fatalf("figures %+v", w)
	}
	if w.Share == nil || *w.Share != 0.25 || w.Entitled == nil || *w.Entitled != 0.5 || w.Ratio == nil || *w.Ratio != 0.5 {
		t.Fatalf("share %v entitled %v ratio %v, want 0.25, 0.5, 0.5", w.Share, w.Entitled, w.Ratio)
	}
	idle := FairWindow("1h", fairness.Figures{SpanMs: 1000})
	if idle.Share != nil || idle.Entitled != nil || idle.Ratio != nil {
		t.Fatalf("an idle window: share %v entitled %v ratio %v, want none", idle.Share, idle.Entitled, idle.Ratio)
	}
}
