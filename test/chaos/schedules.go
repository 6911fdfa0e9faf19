package chaos

import (
	"fmt"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/schedule"
	"github.com/baristahq/barista/sfq"
)

// checkSchedules (14): each (schedule, slot) is spent at most once, by a
// fire or a miss; no slot fires before its time (the entry's cluster time
// is at least the slot plus its jitter); no slot within the catch-up
// window is missed (a miss's newest slot, with its jitter, is further
// behind the entry's time than the window); and no slot is lost: each
// fire and miss takes up the spec's slots right after the last one spent
// (or the version's start, or the resume), as package schedule computes
// them, and no slot is left unspent further back than its window, at a
// change, a pause or a delete of its schedule or at the end (the newest
// cluster time of the history).
func checkSchedules(h *History) []Violation {
	type sched struct {
		spec            *schedule.Spec
		since, last     int64
		catchup, jitter int64
		paused          bool
	}
	var out []Violation
	bad := func(format string, args ...any) { out = append(out, Violation{14, fmt.Sprintf(format, args...)}) }
	live := map[string]*sched{}
	spent := map[string]int{} // "tenant/name/slot" -> index that spent it
	var end int64
	for _, f := range h.Audit {
		end = max(end, f.At)
		if f.Kind != "schedule" || f.Schedule == nil {
			continue
		}
		x := f.Schedule
		id := f.Tenant + "/" + x.Name
		s := live[id]
		j := func(slot int64) int64 { return fsm.ScheduleJitter(f.Tenant, x.Name, sfq.Time(slot), s.jitter) }
		if s != nil && !s.paused && s.spec != nil && (x.Op == "pause" || x.Op == "set" || x.Op == "delete") {
			// Up to a change, a pause or a delete, no slot may be left
			// behind its window.
			if next := s.spec.Next(max(s.last, s.since)); next != 0 && next+j(next)+s.catchup < f.At {
				bad("index %d: schedule %s: slot %d was never spent, and is %d ms behind the %s at cluster time %d (its catch-up window is %d ms)",
					f.Index, id, next, f.At-next, x.Op, f.At, s.catchup)
			}
		}
		switch x.Op {
		case "set", "resume", "pause":
			if s == nil {
				s = &sched{}
				live[id] = s
			}
			if x.Op == "set" {
				sp, err := schedule.Parse(x.Spec, x.Zone)
				if err != nil {
					bad("index %d: schedule %s has a spec the checker cannot read: %v", f.Index, id, err)
					delete(live, id)
					continue
				}
				s.spec = sp
			}
			s.since, s.catchup, s.jitter, s.paused = x.Since, x.CatchupMs, x.JitterMs, x.Paused
		case "delete":
			delete(live, id)
		case "fire", "miss":
			if s == nil {
				bad("index %d: a %s of schedule %s, which does not exist", f.Index, x.Op, id)
				continue
			}
			from := max(s.last, s.since)
			var slots []int64
			if x.Op == "fire" {
				slots = []int64{x.Slot}
				if f.At < x.Slot+j(x.Slot) {
					bad("index %d: schedule %s fired slot %d at cluster time %d, before its time %d", f.Index, id, x.Slot, f.At, x.Slot+j(x.Slot))
				}
			} else {
				if x.Slot+j(x.Slot)+s.catchup >= f.At {
					bad("index %d: schedule %s missed slot %d at cluster time %d, within its catch-up window of %d ms", f.Index, id, x.Slot, f.At, s.catchup)
				}
				for t := s.spec.Next(from); t != 0 && t <= x.Slot && uint64(len(slots)) <= x.Count; t = s.spec.Next(t) {
					slots = append(slots, t)
				}
				if uint64(len(slots)) != x.Count || len(slots) == 0 || slots[len(slots)-1] != x.Slot {
					bad("index %d: schedule %s counted %d slots missed through %d; its slots after %d through it are %d", f.Index, id, x.Count, x.Slot, from, len(slots))
				}
			}
			if next := s.spec.Next(from); len(slots) > 0 && slots[0] != next {
				bad("index %d: schedule %s spent slot %d after %d: its next slot is %d (a slot was left out, or is not the spec's)", f.Index, id, slots[0], from, next)
			}
			for _, t := range slots {
				k := fmt.Sprintf("%s/%d", id, t)
				if i, dup := spent[k]; dup {
					bad("index %d: schedule %s spent slot %d again (first at index %d)", f.Index, id, t, i)
				}
				spent[k] = int(f.Index)
			}
			s.last = x.Slot
		}
	}
	for id, s := range live {
		if s.paused || s.spec == nil {
			continue
		}
		if next := s.spec.Next(max(s.last, s.since)); next != 0 && next+s.catchup < end {
			bad("schedule %s: slot %d was never spent, %d ms behind the history's end (its catch-up window is %d ms)", id, next, end-next, s.catchup)
		}
	}
	return out
}
