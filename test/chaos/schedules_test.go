package chaos

import (
	"testing"

	"github.com/baristahq/barista/snapshot"
)

// scheduleHistory is a valid history of one schedule of every second
// (catch-up 60 s): set at 0, slots 1..5 s fired on time, then no leader
// fired until 100 s: slots 6..39 s missed (39 + 60 < 100), 40..100 s
// fired; then paused, resumed at 200 s, and 201 s fired.
func scheduleHistory() *History {
	fact := func(index uint64, at int64, x snapshot.ScheduleFact) snapshot.AuditFact {
		x.Name = "tick"
		if x.Op != "delete" {
			x.Spec, x.Version, x.CatchupMs = "@every 1s", 1, 60_000
		}
		return snapshot.AuditFact{Kind: "schedule", Index: index, Tenant: "acme", At: at, Schedule: &x}
	}
	h := &History{Nodes: []NodeFinal{{ID: "n1", Index: 100, Hash: "h"}}, AuditIndex: 100, AuditHash: "h"}
	h.Audit = append(h.Audit, fact(1, 0, snapshot.ScheduleFact{Op: "set"}))
	i := uint64(2)
	for s := int64(1000); s <= 5000; s += 1000 {
		h.Audit = append(h.Audit, fact(i, s+10, snapshot.ScheduleFact{Op: "fire", Slot: s, Outcome: "fired"}))
		i++
	}
	h.Audit = append(h.Audit, fact(i, 100_000, snapshot.ScheduleFact{Op: "miss", Slot: 39_000, Count: 34}))
	i++
	for s := int64(40_000); s <= 100_000; s += 1000 {
		h.Audit = append(h.Audit, fact(i, 100_000, snapshot.ScheduleFact{Op: "fire", Slot: s, Outcome: "skipped"}))
		i++
	}
	h.Audit = append(h.Audit, fact(i, 100_500, snapshot.ScheduleFact{Op: "pause", Paused: true}))
	h.Audit = append(h.Audit, fact(i+1, 200_000, snapshot.ScheduleFact{Op: "resume", Since: 200_000}))
	h.Audit = append(h.Audit, fact(i+2, 201_005, snapshot.ScheduleFact{Op: "fire", Slot: 201_000, Outcome: "fired"}))
	return h
}

// TestCheckerAcceptsSchedules: fires on time, a miss beyond catch-up, a
// pause and a resume break no rule.
func TestCheckerAcceptsSchedules(t *testing.T) {
	if vs := Check(scheduleHistory()); len(vs) != 0 {
		t.Fatal(Report(vs))
	}
}

// TestCheckerCatchesBrokenSchedules: each way of breaking SPEC §8 rule 14
// is a violation of rule 14 naming it.
func TestCheckerCatchesBrokenSchedules(t *testing.T) {
	at := func(h *History, index uint64) *snapshot.AuditFact {
		for i := range h.Audit {
			if h.Audit[i].Index == index {
				return &h.Audit[i]
			}
		}
		t.Fatalf("no fact at index %d", index)
		return nil
	}
	expectBroken(t, 14, scheduleHistory, []brokenCase{
		{"a slot fired twice", "index 4: schedule acme/tick spent slot 2000 again (first at index 3)", func(h *History) {
			// A second leader's fire of a spent slot that Apply accepted.
			f := at(h, 4)
			f.Schedule.Slot = 2000
		}},
		{"a slot fired before its time", "index 3: schedule acme/tick fired slot 2000 at cluster time 1999, before its time 2000", func(h *History) {
			at(h, 3).At = 1999
		}},
		{"a slot within catch-up missed", "index 7: schedule acme/tick missed slot 39000 at cluster time 99000, within its catch-up window", func(h *History) {
			at(h, 7).At = 99_000
		}},
		{"a slot left out", "index 5: schedule acme/tick spent slot 4000 after 2000: its next slot is 3000", func(h *History) {
			h.Audit = append(h.Audit[:3], h.Audit[4:]...) // the fire of 4 s
		}},
		{"misses miscounted", "counted 30 slots missed through 39000", func(h *History) {
			at(h, 7).Schedule.Count = 30
		}},
		{"a slot never spent", "slot 202000 was never spent", func(h *History) {
			h.Audit = append(h.Audit, snapshot.AuditFact{Kind: "dispatch", Index: 100, At: 300_000})
		}},
		{"a slot left behind at a pause", "index 69: schedule acme/tick: slot 40000 was never spent, and is 60500 ms behind the pause", func(h *History) {
			var kept []snapshot.AuditFact
			for _, f := range h.Audit {
				if f.Schedule == nil || f.Schedule.Op != "fire" || f.Schedule.Slot < 40_000 || f.Schedule.Slot > 100_000 {
					kept = append(kept, f)
				}
			}
			h.Audit = kept
		}},
	}, 1)
}
