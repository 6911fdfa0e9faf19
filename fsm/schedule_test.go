package fsm

import (
	"bytes"
	"slices"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

func setSchedule(tenant, name, spec string, overlap pb.Overlap, job *clusterpb.SubmitJob) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleSet{ScheduleSet: &clusterpb.ScheduleSet{Tenant: tenant, Name: name, Spec: spec,
		Overlap: overlap, Job: job}}}
}

func fire(tenant, name string, version uint64, slot sfq.Time) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleFire{ScheduleFire: &clusterpb.ScheduleFire{Tenant: tenant, Name: name, Version: version, SlotMs: int64(slot)}}}
}

func miss(tenant, name string, version uint64, through sfq.Time, count uint64) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleMiss{ScheduleMiss: &clusterpb.ScheduleMiss{Tenant: tenant, Name: name, Version: version,
		ThroughMs: int64(through), Count: count}}}
}

func runNowCmd(tenant, name, key string) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleRunNow{ScheduleRunNow: &clusterpb.ScheduleRunNow{Tenant: tenant, Name: name, Key: key}}}
}

func schedulePause(tenant, name string, resume bool) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_SchedulePause{SchedulePause: &clusterpb.SchedulePause{Tenant: tenant, Name: name, Resume: resume}}}
}

func reportJob() *clusterpb.SubmitJob {
	return &clusterpb.SubmitJob{JobType: "report", Size: pb.Size_MD, EstCostMs: 1000, Payload: []byte(`{"argv":["report"]}`)}
}

// scheduleEvents lists the schedule events of the log as "kind name job
// slot slots reason".
func scheduleEvents(f *FSM) []Event {
	var out []Event
	f.Events(0, func(ev *Event) bool {
		if ev.Kind.ScheduleEvent() {
			out = append(out, *ev)
		}
		return true
	})
	return out
}

// TestScheduleFiresOncePerSlot: a slot fires once, at or after its time,
// at the schedule's version, after the version began; the job carries the
// key schedule/NAME/SLOT and the slot is spent; a second Fire of it (a
// new leader's) changes nothing.
func TestScheduleFiresOncePerSlot(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	if r := h.one(setSchedule("acme", "nightly", "@every 1m", pb.Overlap_OVERLAP_ALLOW, reportJob())); r.Refused() || !r.Created {
		t.Fatalf("set: %+v", r)
	}
	for _, c := range []struct {
		cmd  *clusterpb.Command
		code Code
		msg  string
	}{
		{fire("acme", "nightly", 2, 60_000), FailedPrecondition, `version: schedule "nightly" of tenant "acme" is at version 1, not 2`},
		{fire("acme", "nightly", 1, 1_000), Invalid, "slot_ms: slot 1000 is not after 1000, when the schedule's version began (or it was resumed)"},
		{fire("acme", "nightly", 1, 60_000), FailedPrecondition, "slot_ms: slot 60000 is due at 60000 (with its jitter), after cluster time 1000"},
		{fire("acme", "daily", 1, 60_000), NotFound, `name: tenant "acme" has no schedule "daily"`},
		{fire("nobody", "nightly", 1, 60_000), NotFound, `tenant: unknown tenant "nobody"`},
	} {
		if r := h.one(c.cmd); r.Code != c.code || r.Msg != c.msg {
			t.Errorf("%v: got %v %q, want %v %q", c.cmd, r.Code, r.Msg, c.code, c.msg)
		}
	}
	h.now = 60_500
	r := h.one(fire("acme", "nightly", 1, 60_000))
	if r.Refused() || r.Fire != FireFired || !r.Created || r.Job == 0 {
		t.Fatalf("fire: %+v", r)
	}
	j, _ := h.job(r.Job)
	if j.Key() != "schedule/nightly/60000" || j.Type() != "report" || j.State != sfq.Queued {
		t.Fatalf("the job: key %q type %q state %s", j.Key(), j.Type(), j.State)
	}
	before, _ := h.f.Hash()
	for _, slot := range []sfq.Time{60_000, 30_000} {
		if r := h.one(fire("acme", "nightly", 1, slot)); r.Refused() || r.Outcome != sfq.Duplicate {
			t.Fatalf("fire %d again: %+v", slot, r)
		}
	}
	if after, _ := h.f.Hash(); after != before {
		t.Fatal("a second fire of a spent slot changed the state")
	}
	s, _ := h.f.GetSchedule("acme", "nightly")
	if s.LastSlot != 60_000 || s.Fired != 1 || s.LastJob != r.Job || s.Live != nil || s.Version != 1 || s.Since != 1_000 {
		t.Fatalf("the schedule: %+v", s.Schedule)
	}
	evs := scheduleEvents(h.f)
	if len(evs) != 1 || evs[0].Kind != EvScheduleFired || evs[0].Job != r.Job || evs[0].Worker != "nightly" || evs[0].CPUMs != 60_000 {
		t.Fatalf("events: %+v", evs)
	}
	// A change of the definition moves the version on: fires of the old
	// one are refused, and slots count from the change.
	h.now = 70_000
	if r := h.one(setSchedule("acme", "nightly", "@every 2m", pb.Overlap_OVERLAP_ALLOW, reportJob())); r.Refused() || r.Created {
		t.Fatalf("change: %+v", r)
	}
	if r := h.one(setSchedule("acme", "nightly", "@every 2m", pb.Overlap_OVERLAP_ALLOW, reportJob())); r.Outcome != sfq.Duplicate {
		t.Fatalf("the same set again: %+v", r)
	}
	h.now = 120_000
	if r := h.one(fire("acme", "nightly", 1, 120_000)); r.Code != FailedPrecondition {
		t.Fatalf("a fire of version 1 after the change: %+v", r)
	}
	if r := h.one(fire("acme", "nightly", 2, 120_000)); r.Fire != FireFired {
		t.Fatalf("a fire of version 2: %+v", r)
	}
	if s, _ := h.f.GetSchedule("acme", "nightly"); s.Version != 2 || s.Since != 70_000 || s.Fired != 2 || s.Created != 1_000 {
		t.Fatalf("after the change: %+v", s.Schedule)
	}
	if err := h.f.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestScheduleOverlap: skip fires nothing while the previous job lives
// (scheduled, queued, assigned or running); buffer_one nothing while one
// waits to start (queued), but a fire while it runs; allow every slot.
func TestScheduleOverlap(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	for _, o := range []pb.Overlap{pb.Overlap_OVERLAP_SKIP, pb.Overlap_OVERLAP_BUFFER_ONE, pb.Overlap_OVERLAP_ALLOW} {
		h.one(setSchedule("acme", fsmOverlapName(o), "@every 1s", o, reportJob()))
	}
	type want struct{ fired, skipped uint64 }
	step := func(slot sfq.Time) {
		h.now = slot
		for _, o := range []pb.Overlap{pb.Overlap_OVERLAP_SKIP, pb.Overlap_OVERLAP_BUFFER_ONE, pb.Overlap_OVERLAP_ALLOW} {
			if r := h.one(fire("acme", fsmOverlapName(o), 1, slot)); r.Refused() {
				t.Fatalf("fire %s at %d: %+v", fsmOverlapName(o), slot, r)
			}
		}
	}
	check := func(at string, w map[string]want) {
		t.Helper()
		for name, w := range w {
			s, _ := h.f.GetSchedule("acme", name)
			if s.Fired != w.fired || s.Skipped != w.skipped {
				t.Errorf("%s: %s fired %d skipped %d, want %d and %d", at, name, s.Fired, s.Skipped, w.fired, w.skipped)
			}
		}
	}
	step(2_000) // each fires: jobs 1 (skip), 2 (buffer_one), 3 (allow)
	step(3_000) // all queued: skip and buffer_one skip
	check("two slots, all queued", map[string]want{"skip": {1, 1}, "buffer_one": {1, 1}, "allow": {2, 0}})
	// The skip and buffer_one jobs start running.
	for i, id := range []uint64{1, 2} {
		w := []string{"w1", "w2"}[i]
		if r := h.one(dispatch(w, 1)); r.Job != sfq.JobID(id) {
			t.Fatalf("dispatch %s: job %d, want %d", w, r.Job, id)
		}
		h.one(started(id, 1, w))
	}
	step(4_000) // running: skip skips, buffer_one fires (nothing waits)
	check("running", map[string]want{"skip": {1, 2}, "buffer_one": {2, 1}, "allow": {3, 0}})
	step(5_000) // buffer_one's second job waits: skipped
	check("one waiting", map[string]want{"skip": {1, 3}, "buffer_one": {2, 2}, "allow": {4, 0}})
	h.one(finished(1, 1, "w1", 500))
	step(6_000) // skip's job ended: it fires again
	check("ended", map[string]want{"skip": {2, 3}, "buffer_one": {2, 3}, "allow": {5, 0}})
	if s, _ := h.f.GetSchedule("acme", "buffer_one"); !slices.Equal(s.Live, []sfq.JobID{2, 5}) {
		t.Fatalf("buffer_one keeps %v, want jobs 2 and 5", s.Live)
	}
	if s, _ := h.f.GetSchedule("acme", "allow"); s.Live != nil {
		t.Fatalf("allow keeps %v", s.Live)
	}
}

func fsmOverlapName(o pb.Overlap) string {
	ov, _ := OverlapFromPB(o)
	return ov.String()
}

// TestScheduleRefusedFire: a fire whose submit the tenant's quota
// refuses is counted refused with an event that says why, and its slot
// is spent: the command itself is not refused.
func TestScheduleRefusedFire(t *testing.T) {
	h := newHarness(t)
	h.one(upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, Caps: &pb.Caps{MaxQueued: 1}}))
	h.one(setSchedule("acme", "s", "@every 1s", pb.Overlap_OVERLAP_ALLOW, reportJob()))
	h.now = 2_000
	if r := h.one(fire("acme", "s", 1, 2_000)); r.Fire != FireFired {
		t.Fatalf("first fire: %+v", r)
	}
	h.now = 3_000
	r := h.one(fire("acme", "s", 1, 3_000))
	if r.Refused() || r.Fire != FireRefused || r.Outcome != sfq.Changed || r.Job != 0 {
		t.Fatalf("second fire: %+v", r)
	}
	s, _ := h.f.GetSchedule("acme", "s")
	if s.LastSlot != 3_000 || s.Fired != 1 || s.Refused != 1 {
		t.Fatalf("the schedule: %+v", s.Schedule)
	}
	evs := scheduleEvents(h.f)
	if len(evs) != 2 || evs[1].Kind != EvScheduleRefused || evs[1].Reason != ReasonQuotaExceeded || evs[1].CPUMs != 3_000 || evs[1].Job != 0 {
		t.Fatalf("events: %+v", evs)
	}
	if r := h.one(fire("acme", "s", 1, 3_000)); r.Outcome != sfq.Duplicate {
		t.Fatalf("the refused slot fired again: %+v", r)
	}
}

// TestScheduleMiss: slots within the catch-up window are never counted
// missed; older ones are spent and counted, with one event.
func TestScheduleMiss(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	h.one(setSchedule("acme", "s", "@every 1s", pb.Overlap_OVERLAP_ALLOW, reportJob()))
	h.now = 100_000
	// The default window is 60 s: a slot at 40,000 is exactly 60 s behind.
	if r := h.one(miss("acme", "s", 1, 40_000, 39)); r.Code != FailedPrecondition {
		t.Fatalf("a miss within the window: %+v", r)
	}
	if r := h.one(miss("acme", "s", 1, 39_999, 0)); r.Code != Invalid {
		t.Fatalf("a miss of no slot: %+v", r)
	}
	if r := h.one(miss("acme", "s", 1, 39_000, 38)); r.Refused() || r.Fire != FireMissed {
		t.Fatalf("miss: %+v", r)
	}
	if r := h.one(fire("acme", "s", 1, 39_000)); r.Outcome != sfq.Duplicate {
		t.Fatalf("a missed slot fired: %+v", r)
	}
	if r := h.one(fire("acme", "s", 1, 40_000)); r.Fire != FireFired {
		t.Fatalf("the first slot in the window: %+v", r)
	}
	s, _ := h.f.GetSchedule("acme", "s")
	if s.Missed != 38 || s.Fired != 1 || s.LastSlot != 40_000 {
		t.Fatalf("the schedule: %+v", s.Schedule)
	}
	evs := scheduleEvents(h.f)
	if len(evs) != 2 || evs[0].Kind != EvScheduleMissed || evs[0].Attempt != 38 || evs[0].CPUMs != 39_000 {
		t.Fatalf("events: %+v", evs)
	}
}

// TestSchedulePauseAndJitter: a paused schedule fires nothing, and slots
// count from its resume; with jitter a slot is due at slot + jitter.
func TestSchedulePauseAndJitter(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	c := setSchedule("acme", "s", "@every 10s", pb.Overlap_OVERLAP_ALLOW, reportJob())
	c.GetScheduleSet().JitterMs = 5_000
	h.one(c)
	j := ScheduleJitter("acme", "s", 10_000, 5_000)
	if j != ScheduleJitter("acme", "s", 10_000, 5_000) || j < 0 || j >= 5_000 {
		t.Fatalf("jitter %d", j)
	}
	if got := []int64{ScheduleJitter("acme", "s", 10_000, 5_000), ScheduleJitter("acme", "s", 20_000, 5_000), ScheduleJitter("a", "b", 1, 1000)}; !slices.Equal(got, []int64{4985, 136, 761}) {
		t.Fatalf("jitters %v", got)
	}
	h.now = 10_000 + sfq.Time(j) - 1
	if r := h.one(fire("acme", "s", 1, 10_000)); r.Code != FailedPrecondition {
		t.Fatalf("a fire before its jitter: %+v", r)
	}
	h.now++
	if r := h.one(fire("acme", "s", 1, 10_000)); r.Fire != FireFired {
		t.Fatalf("a fire at its jitter: %+v", r)
	}
	if r := h.one(schedulePause("acme", "s", false)); r.Outcome != sfq.Changed {
		t.Fatalf("pause: %+v", r)
	}
	if r := h.one(schedulePause("acme", "s", false)); r.Outcome != sfq.Duplicate {
		t.Fatalf("pause again: %+v", r)
	}
	h.now = 40_000
	if r := h.one(fire("acme", "s", 1, 20_000)); r.Code != FailedPrecondition {
		t.Fatalf("a fire while paused: %+v", r)
	}
	h.one(schedulePause("acme", "s", true))
	if r := h.one(fire("acme", "s", 1, 30_000)); r.Code != Invalid {
		t.Fatalf("a slot from before the resume: %+v", r)
	}
	if s, _ := h.f.GetSchedule("acme", "s"); s.Since != 40_000 || s.Paused {
		t.Fatalf("resumed: %+v", s.Schedule)
	}
}

// TestScheduleRunNow: a run-now fires at once with its own key, whatever
// the pause and overlap; a resend with the key answers the same job; a
// run-now whose submit is refused is refused and changes nothing.
func TestScheduleRunNow(t *testing.T) {
	h := newHarness(t)
	h.one(upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, Caps: &pb.Caps{MaxQueued: 1}}))
	h.one(setSchedule("acme", "s", "@daily", pb.Overlap_OVERLAP_SKIP, reportJob()))
	h.one(schedulePause("acme", "s", false))
	r := h.one(runNowCmd("acme", "s", "r1"))
	if r.Refused() || !r.Created || r.Fire != FireFired {
		t.Fatalf("run-now: %+v", r)
	}
	if j, _ := h.job(r.Job); j.Key() != "schedule/s/run/r1" {
		t.Fatalf("key %q", j.Key())
	}
	if again := h.one(runNowCmd("acme", "s", "r1")); again.Job != r.Job || again.Created || again.Outcome != sfq.Duplicate {
		t.Fatalf("resend: %+v", again)
	}
	before, _ := h.f.Hash()
	if r := h.one(runNowCmd("acme", "s", "r2")); r.Code != ResourceExhausted {
		t.Fatalf("over the quota: %+v", r)
	}
	if r := h.one(runNowCmd("acme", "s", "bad/key")); r.Code != Invalid {
		t.Fatalf("a bad key: %+v", r)
	}
	if after, _ := h.f.Hash(); after != before {
		t.Fatal("a refused run-now changed the state")
	}
	s, _ := h.f.GetSchedule("acme", "s")
	if s.Fired != 1 || s.Refused != 0 || s.LastSlot != 0 || !slices.Equal(s.Live, []sfq.JobID{r.Job}) {
		t.Fatalf("the schedule: %+v", s.Schedule)
	}
	if evs := scheduleEvents(h.f); len(evs) != 1 || evs[0].Reason != ReasonRunNow || evs[0].CPUMs != 0 {
		t.Fatalf("events %+v", evs)
	}
}

// TestScheduleSetRefusals: every rule of a set, with its field.
func TestScheduleSetRefusals(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	set := func(mod func(c *clusterpb.ScheduleSet)) *clusterpb.Command {
		c := setSchedule("acme", "s", "@hourly", 0, reportJob())
		mod(c.GetScheduleSet())
		return c
	}
	for _, c := range []struct {
		cmd   *clusterpb.Command
		code  Code
		field string
	}{
		{set(func(c *clusterpb.ScheduleSet) { c.Tenant = "nobody" }), NotFound, "tenant"},
		{set(func(c *clusterpb.ScheduleSet) { c.Name = "a/b" }), Invalid, "name"},
		{set(func(c *clusterpb.ScheduleSet) { c.Name = "" }), Invalid, "name"},
		{set(func(c *clusterpb.ScheduleSet) { c.Spec = "" }), Invalid, "spec"},
		{set(func(c *clusterpb.ScheduleSet) { c.Spec = "* * *\n* *" }), Invalid, "spec"},
		{set(func(c *clusterpb.ScheduleSet) { c.Zone = "Europe/Berlin Time" }), Invalid, "zone"},
		{set(func(c *clusterpb.ScheduleSet) { c.Overlap = 9 }), Invalid, "overlap"},
		{set(func(c *clusterpb.ScheduleSet) { c.CatchupMs = 999 }), Invalid, "catchup_ms"},
		{set(func(c *clusterpb.ScheduleSet) { c.JitterMs = -1 }), Invalid, "jitter_ms"},
		{set(func(c *clusterpb.ScheduleSet) { c.Job = nil }), Invalid, "job"},
		{set(func(c *clusterpb.ScheduleSet) { c.Job.IdempotencyKey = "k" }), Invalid, "job.idempotency_key"},
		{set(func(c *clusterpb.ScheduleSet) { c.Job.Tenant = "other" }), Invalid, "job.tenant"},
		{set(func(c *clusterpb.ScheduleSet) { c.Job.EstCostMs = -5 }), Invalid, "job.est_cost_ms"},
		{set(func(c *clusterpb.ScheduleSet) { c.Job.Form = pb.JobForm_FUNCTION; c.Job.JobType = "" }), Invalid, "job.job_type"},
	} {
		if r := h.one(c.cmd); r.Code != c.code || r.Field != c.field {
			t.Errorf("%v: got %v %q (%s), want %v %q", c.cmd, r.Code, r.Field, r.Msg, c.code, c.field)
		}
	}
	h.one(setConfigWith(func(p *pb.SchedulerConfig) { p.MaxSchedules = 2 }))
	for _, n := range []string{"a", "b"} {
		if r := h.one(set(func(c *clusterpb.ScheduleSet) { c.Name = n })); r.Refused() {
			t.Fatal(r.Msg)
		}
	}
	if r := h.one(set(func(c *clusterpb.ScheduleSet) { c.Name = "c" })); r.Code != ResourceExhausted || r.Msg != `name: tenant "acme" has 2 schedules, its max_schedules` {
		t.Fatalf("a third schedule: %+v", r)
	}
	// A change of one it has is no new schedule.
	if r := h.one(set(func(c *clusterpb.ScheduleSet) { c.Name = "a"; c.Spec = "@daily" })); r.Refused() {
		t.Fatal(r.Msg)
	}
	if r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_ScheduleDelete{ScheduleDelete: &clusterpb.ScheduleDelete{Tenant: "acme", Name: "a"}}}); r.Refused() {
		t.Fatal(r.Msg)
	}
	if r := h.one(set(func(c *clusterpb.ScheduleSet) { c.Name = "c" })); r.Refused() {
		t.Fatalf("after a delete: %s", r.Msg)
	}
}

// TestScheduleKeys: the keys a schedule gives its jobs read back, and
// nothing else reads as one.
func TestScheduleKeys(t *testing.T) {
	if name, slot, run, ok := ParseScheduleKey(ScheduleSlotKey("night.ly", 1_700_000_000_000)); !ok || name != "night.ly" || slot != 1_700_000_000_000 || run != "" {
		t.Fatalf("slot key: %q %d %q %v", name, slot, run, ok)
	}
	if name, slot, run, ok := ParseScheduleKey(ScheduleRunKey("s", "k1")); !ok || name != "s" || slot != 0 || run != "k1" {
		t.Fatalf("run key: %q %d %q %v", name, slot, run, ok)
	}
	for _, k := range []string{"", "schedule/", "schedule/s", "schedule/s/", "schedule/s/01", "schedule/s/-5", "schedule/s/x", "schedule/a b/5", "sched/s/5", "schedule/s/run/"} {
		if _, _, _, ok := ParseScheduleKey(k); ok {
			t.Errorf("%q reads as a schedule's key", k)
		}
	}
}

// TestSchedulesInTheState: schedules survive a snapshot (the state of
// version 12 reads back to the same hash), a tenant's delete drops its
// schedules, and a level-8 state that never held one is written as
// version 11.
func TestSchedulesInTheState(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	v, _ := h.f.Freeze()
	if v.StateVersion() != stateVersionLevel8 {
		t.Fatalf("no schedule: version %d", v.StateVersion())
	}
	h.one(setSchedule("acme", "s", "@every 1s", pb.Overlap_OVERLAP_SKIP, reportJob()))
	h.now = 5_000
	h.one(fire("acme", "s", 1, 5_000))
	h.one(setSchedule("acme", "t", "0 3 * * *", pb.Overlap_OVERLAP_ALLOW, reportJob()))
	h.one(runNowCmd("acme", "t", "x"))
	v, _ = h.f.Freeze()
	if v.StateVersion() != stateVersionSchedules {
		t.Fatalf("with schedules: version %d", v.StateVersion())
	}
	back, err := DecodeState(sfq.NewDecoder(bytes.NewReader(encodeFSM(v))), h.index)
	if err != nil {
		t.Fatal(err)
	}
	h1, _ := h.f.Hash()
	h2, _ := back.Hash()
	if h1 != h2 {
		t.Fatal("the restored state hashes otherwise")
	}
	if s, ok := back.GetSchedule("acme", "s"); !ok || s.LastSlot != 5_000 || !slices.Equal(s.Live, []sfq.JobID{1}) || back.ScheduleCount() != 2 {
		t.Fatalf("read back: %+v", s)
	}
	if evs := scheduleEvents(back); len(evs) != 2 {
		t.Fatalf("events read back: %+v", evs)
	}
	// The schedules' changes: a node whose state is replaced has none to
	// give (its leader's loop reads every schedule again).
	replaced := New()
	if err := replaced.Restore(sfq.NewDecoder(bytes.NewReader(encodeFSM(v))), h.index); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := replaced.ScheduleChanges(0); ok {
		t.Fatal("a replaced state gives changes")
	}
	serials, last, ok := h.f.ScheduleChanges(1)
	if !ok || last != 4 || !slices.Equal(serials, []uint64{0, 1, 1}) {
		t.Fatalf("changes after 1: %v %d %v", serials, last, ok)
	}
	h.one(cancelJob("acme", 1))
	h.one(cancelJob("acme", 2))
	if r := h.one(deleteTenant("acme")); r.Refused() {
		t.Fatal(r.Msg)
	}
	if h.f.ScheduleCount() != 0 {
		t.Fatal("a deleted tenant's schedules stay")
	}
	h.one(tenant("acme", pb.Tier_GOLD))
	if _, ok := h.f.GetSchedule("acme", "s"); ok {
		t.Fatal("a tenant made again has its old schedule")
	}
	if err := h.f.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestSchedulesGatedBelowLevel8: below level 8 every schedule command and
// the setting max_schedules is refused, and a webhook cannot name the
// schedule events.
func TestSchedulesGatedBelowLevel8(t *testing.T) {
	h := &harness{t: t, f: newAt(Level7), now: 1000}
	h.one(tenant("acme", pb.Tier_GOLD))
	for _, c := range []*clusterpb.Command{
		setSchedule("acme", "s", "@hourly", 0, reportJob()),
		fire("acme", "s", 1, 500), miss("acme", "s", 1, 500, 1), runNowCmd("acme", "s", "k"), schedulePause("acme", "s", false),
		{Cmd: &clusterpb.Command_ScheduleDelete{ScheduleDelete: &clusterpb.ScheduleDelete{Tenant: "acme", Name: "s"}}},
		setConfigWith(func(p *pb.SchedulerConfig) { p.MaxSchedules = 5 }),
		webhookSet("acme", "https://x.example/", false, 0, 1, "schedule_fired"),
	} {
		if r := h.one(c); r.Code != FailedPrecondition {
			t.Errorf("%v at level 7: %+v", c, r)
		}
	}
}
