package snapshot_test

import (
	"flag"
	"math"
	"slices"
	"testing"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/sfq"
)

var estimateMinutes = flag.Int("estimate-minutes", 20, "cluster minutes of the steady workload TestPlaceEstimateError measures on")

// TestPlaceEstimateError measures the place in line's estimated start on
// a steady workload: the fairness report's five tenants kept backlogged
// (ten queued jobs each, topped up as they go) on two workers. Every 30 s
// of cluster time after a 10-minute warm-up it takes each tenant's
// newest and oldest queued job, its place and estimate, and compares them
// with when the job was dispatched: the error of the estimate (in ms and
// relative to the wait) and how many dispatches came before the job
// against the place's count (new submits come after it in this workload,
// but its tenant's share rules when it comes). It logs the figures
// (docs/fairness.md reports them) and holds the median relative error
// under 25 %.
func TestPlaceEstimateError(t *testing.T) {
	dur := sfq.Time(*estimateMinutes) * 60_000
	src := simulateFairness(t, 2, dur)
	f := src.New()
	type sample struct {
		job        sfq.JobID
		at, est    sfq.Time
		ahead, own uint64
		seq        uint64 // events before the sample
		oldest     bool
		estimated  bool
	}
	var samples []sample
	next := sfq.Time(10 * 60_000)
	for i, env := range src.Entries {
		if _, err := f.ApplyEnvelope(uint64(i+1), env); err != nil {
			t.Fatal(err)
		}
		clock, _ := f.Clock()
		if clock < next || clock > dur-5*60_000 {
			continue
		}
		next += 30_000
		var queued []sfq.Job
		f.Read(func(s *sfq.Scheduler) {
			s.Jobs(0, func(j *sfq.Job) bool {
				if j.State == sfq.Queued {
					queued = append(queued, *j)
				}
				return true
			})
		})
		_, seq := f.Events(0, func(*fsm.Event) bool { return false })
		byTenant := map[uint32][]sfq.JobID{}
		for _, j := range queued {
			byTenant[j.Tenant] = append(byTenant[j.Tenant], j.ID)
		}
		for _, ids := range byTenant {
			for k, id := range []sfq.JobID{slices.Min(ids), slices.Max(ids)} {
				pl, ok, err := f.Place(id, fsm.PlaceLimit)
				if err != nil || !ok {
					t.Fatalf("job %d: place %v %v", id, ok, err)
				}
				samples = append(samples, sample{job: id, at: clock, est: pl.EstimatedStart, ahead: pl.Ahead, own: pl.Own, seq: seq, oldest: k == 0, estimated: pl.Estimated})
			}
		}
	}
	// When each job was dispatched, and the dispatches before it.
	assigned := map[sfq.JobID]fsm.Event{}
	var order []uint64
	f.Events(0, func(ev *fsm.Event) bool {
		if ev.Kind == fsm.EvAssigned {
			if _, seen := assigned[ev.Job]; !seen {
				assigned[ev.Job] = *ev
			}
			order = append(order, ev.Seq)
		}
		return true
	})
	var absErr, relErr, waits []float64
	var bias float64
	var exactOldest, oldest int
	var before []float64
	for _, s := range samples {
		ev, ok := assigned[s.job]
		if !ok || !s.estimated {
			continue
		}
		wait := float64(ev.At - s.at)
		waits = append(waits, wait)
		e := float64(s.est - ev.At)
		absErr = append(absErr, math.Abs(e))
		bias += e
		if wait > 0 {
			relErr = append(relErr, math.Abs(e)/wait)
		}
		lo, _ := slices.BinarySearch(order, s.seq)
		hi, _ := slices.BinarySearch(order, ev.Seq)
		n := hi - lo // dispatches from the sample up to the job's
		before = append(before, float64(n)-float64(s.ahead))
		if s.oldest {
			oldest++
			if uint64(n) == s.ahead {
				exactOldest++
			}
		}
	}
	if len(relErr) < 50 {
		t.Fatalf("only %d samples", len(relErr))
	}
	q := func(v []float64, p float64) float64 {
		w := slices.Clone(v)
		slices.Sort(w)
		return w[max(int(math.Ceil(p*float64(len(w))))-1, 0)]
	}
	t.Logf("waits p50 %.1f s, p90 %.1f s", q(waits, 0.5)/1000, q(waits, 0.9)/1000)
	t.Logf("%d samples over %d cluster minutes: estimate error |est - actual| p50 %.1f s, p90 %.1f s, max %.1f s; relative to the wait p50 %.1f %%, p90 %.1f %%; mean bias %+.1f s",
		len(absErr), *estimateMinutes, q(absErr, 0.5)/1000, q(absErr, 0.9)/1000, q(absErr, 1)/1000, 100*q(relErr, 0.5), 100*q(relErr, 0.9), bias/float64(len(absErr))/1000)
	t.Logf("dispatches before the job minus its place's count: p50 %.0f, p90 %.0f (later submits of tenants ahead in the order); the place exact for %d of %d tenants' next jobs",
		q(before, 0.5), q(before, 0.9), exactOldest, oldest)
	if med := q(relErr, 0.5); med > 0.25 {
		t.Errorf("median relative error %.1f %%, want under 25 %%", 100*med)
	}
}
