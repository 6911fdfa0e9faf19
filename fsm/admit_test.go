package fsm

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/baristahq/barista/internal/text"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// admitOne is the leader's check of one command: AdmitSubmits for a
// submit, Admit for any other.
func admitOne(f *FSM, c *clusterpb.Command) Result {
	if s := c.GetSubmit(); s != nil {
		out := []Result{{}}
		f.AdmitSubmits([]*clusterpb.SubmitJob{s}, out)
		return out[0]
	}
	return f.Admit(c)
}

// TestAdmitAgreesWithApply: for random states and random commands —
// submits with every option, admin commands, worker reports — the
// leader's check gives the verdict Apply gives (the same code and
// message; a keyed resend the same job), a refused command leaves the
// state hash as it was, and a command the check finds would change
// nothing changes nothing.
func TestAdmitAgreesWithApply(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		// At every feature level: a level gates what may be proposed, and
		// the check and Apply agree at each (frozen.go).
		level := rapid.Uint32Range(Level1, MaxFeatureLevel).Draw(rt, "level")
		h := &harness{t: t, f: newAt(level), now: 1_000}
		h.one(setConfigWith(func(p *pb.SchedulerConfig) {
			p.DefaultMaxQueued = uint32(rapid.IntRange(0, 6).Draw(rt, "default_max_queued"))
			p.MaxQueuedBytes = uint64(rapid.SampledFrom([]int{0, 40, 5000}).Draw(rt, "max_queued_bytes"))
			p.MaxPayloadBytes = uint32(rapid.SampledFrom([]int{16, 1 << 20}).Draw(rt, "max_payload"))
			if rapid.Bool().Draw(rt, "implicit") {
				p.ImplicitTenants = pb.Tier_BRONZE
			}
			if rapid.Bool().Draw(rt, "defaulttenant") {
				p.DefaultTenant = "a"
			}
			if rapid.Bool().Draw(rt, "auto") {
				p.Estimate = pb.Estimate_AUTO
			}
		}))
		n := rapid.IntRange(1, 40).Draw(rt, "steps")
		var jobs uint64
		for i := 0; i < n; i++ {
			if rapid.IntRange(0, 4).Draw(rt, "wait") == 0 {
				h.now += sfq.Time(rapid.IntRange(1, 40_000).Draw(rt, "ms"))
				h.apply() // the time passes in an entry of its own
			}
			c := admissionCommand(rt, jobs)
			if !prechecked(c) {
				// A command of the leader's own loops, to vary the state.
				if r := h.one(c); r.Job > sfq.JobID(jobs) {
					jobs = uint64(r.Job)
				}
				continue
			}
			before, _ := h.f.Hash()
			named := c.GetSubmit().GetTenant()
			if named == "" {
				named = h.f.Config().Pools.DefaultTenant // an admin's submit naming none
			}
			_, existed := h.f.sched.TenantIndex(named)
			v := admitOne(h.f, c)
			r := h.one(c)
			if r.Job > sfq.JobID(jobs) {
				jobs = uint64(r.Job)
			}
			after, _ := h.f.Hash()
			what := fmt.Sprintf("step %d: %v", i, c)
			if v.Code != r.Code || v.Msg != r.Msg {
				rt.Fatalf("%s: the check says %v %q, Apply %v %q", what, v.Code, v.Msg, r.Code, r.Msg)
			}
			if v.Reason != r.Reason || v.Field != r.Field {
				rt.Fatalf("%s: the check's reason %q field %q, Apply's %q %q", what, v.Reason, v.Field, r.Reason, r.Field)
			}
			if v.Job != 0 && (r.Job != v.Job || r.Created) {
				rt.Fatalf("%s: the check answers job %d, Apply %d (created %v)", what, v.Job, r.Job, r.Created)
			}
			_, exists := h.f.sched.TenantIndex(named)
			// Below 7 a refused submit could make its implicit tenant, and a
			// refused report mark its worker seen (frozen.go).
			report := c.GetStarted() != nil || c.GetFinished() != nil || c.GetHeartbeats() != nil
			legacy := level < Level7 && (c.GetSubmit() != nil && !existed && exists || report)
			if r.Refused() && after != before && !legacy {
				rt.Fatalf("%s: refused (%s), yet the state changed", what, r.Msg)
			}
			if v.Outcome == sfq.Duplicate && c.GetFinished() == nil && after != before {
				rt.Fatalf("%s: the check found nothing to change, yet Apply changed the state", what)
			}
		}
		if err := h.f.Verify(); err != nil {
			rt.Fatal(err)
		}
	})
}

// prechecked reports whether the leader checks a command before it
// proposes it (the others are its own: dispatches, releases).
func prechecked(c *clusterpb.Command) bool {
	switch c.GetCmd().(type) {
	case *clusterpb.Command_Dispatch, *clusterpb.Command_Release:
		return false
	}
	return true
}

// admissionCommand draws a command of the kinds the edge pre-checks,
// with values on both sides of every rule.
func admissionCommand(t *rapid.T, jobs uint64) *clusterpb.Command {
	tenants := []string{"a", "b", "newco", "bad name", ""}
	tenant := rapid.SampledFrom(tenants).Draw(t, "tenant")
	job := rapid.Uint64Range(1, jobs+1).Draw(t, "job")
	attempt := uint32(rapid.IntRange(1, 2).Draw(t, "attempt"))
	worker := rapid.SampledFrom([]string{"w1", "w2"}).Draw(t, "worker")
	switch rapid.IntRange(0, 22).Draw(t, "kind") {
	case 21, 22:
		return scheduleCommand(t, tenant)
	case 0, 1, 2, 3, 4, 5:
		s := &clusterpb.SubmitJob{Tenant: tenant, Size: pb.Size(rapid.IntRange(0, 4).Draw(t, "size")),
			EstCostMs:      rapid.SampledFrom([]int64{-1, 0, 1, 500, 4000}).Draw(t, "cost"),
			IdempotencyKey: rapid.SampledFrom([]string{"", "", "k1", "k2"}).Draw(t, "key"),
			JobClass:       pb.Class(rapid.IntRange(0, 5).Draw(t, "class")),
			Group:          rapid.SampledFrom([]string{"", "", "g1", "g2", "g3", "bad/g"}).Draw(t, "group"),
			Pool:           rapid.SampledFrom([]string{"", "", "gpu", "cpu", "GPU", "default"}).Draw(t, "pool"),
			Payload:        make([]byte, rapid.SampledFrom([]int{0, 8, 20, 30}).Draw(t, "payload")),
			JobType:        rapid.SampledFrom([]string{"", "render"}).Draw(t, "type"),
		}
		if rapid.IntRange(0, 3).Draw(t, "hasdeadline") == 0 {
			s.DeadlineMs = rapid.SampledFrom([]int64{999, 5000, 60_000}).Draw(t, "deadline")
		}
		if rapid.IntRange(0, 3).Draw(t, "hasdelay") == 0 {
			s.DelayMs = rapid.SampledFrom([]int64{1000, 90_000}).Draw(t, "delay")
			if rapid.Bool().Draw(t, "hasexpire") {
				s.ExpireMs = s.DelayMs + rapid.SampledFrom([]int64{-1, 1000}).Draw(t, "expire")
			}
		}
		s.MaxAttempts = uint32(rapid.SampledFrom([]int{0, 0, 2, 1000}).Draw(t, "maxattempts"))
		s.Form = pb.JobForm(rapid.IntRange(0, 3).Draw(t, "form"))
		return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: s}}
	case 6, 7:
		u := &clusterpb.TenantUpsert{Name: tenant, Tier: pb.Tier(rapid.IntRange(0, 6).Draw(t, "tier")),
			Multiplier: uint32(rapid.SampledFrom([]int{0, 1, 2, 100_000}).Draw(t, "multiplier")),
			Caps: &pb.Caps{MaxRunning: uint32(rapid.IntRange(0, 2).Draw(t, "cap")), MaxQueued: uint32(rapid.IntRange(0, 3).Draw(t, "maxqueued")),
				MaxInflightCpuMs: rapid.SampledFrom([]int64{0, -1, 3000}).Draw(t, "inflight")},
			MaxClass:       pb.Class(rapid.IntRange(0, 5).Draw(t, "maxclass")),
			AllowDeadlines: rapid.Bool().Draw(t, "deadlines"),
			MaxGroups:      uint32(rapid.SampledFrom([]int{0, 1, 2}).Draw(t, "maxgroups")),
			GroupCap:       uint32(rapid.IntRange(0, 2).Draw(t, "groupcap")),
			GroupOrder:     pb.GroupOrder(rapid.IntRange(0, 3).Draw(t, "grouporder")),
		}
		if rapid.Bool().Draw(t, "partial") {
			// An upsert that keeps some fields (level 7), now and then one
			// that names something that is no field.
			fields := append(TenantFields(), "color")
			u.Keep = rapid.SliceOfNDistinct(rapid.SampledFrom(fields), 0, 4, rapid.ID[string]).Draw(t, "keep")
		}
		return upsert(u)
	case 8:
		return deleteTenant(tenant)
	case 9:
		c := &clusterpb.SetGroup{Tenant: tenant, Group: rapid.SampledFrom([]string{"g1", "g2", "g3", "bad/g"}).Draw(t, "group"),
			CapKind: clusterpb.GroupCapKind(rapid.IntRange(0, 4).Draw(t, "capkind")), Limit: uint32(rapid.IntRange(0, 2).Draw(t, "limit")),
			AsTenant: rapid.Bool().Draw(t, "astenant")}
		if rapid.IntRange(0, 3).Draw(t, "setrate") == 0 {
			c.SetRate, c.RateN, c.RatePeriodMs = true, uint32(rapid.IntRange(0, 2).Draw(t, "raten")), rapid.SampledFrom([]int64{0, 1000}).Draw(t, "period")
		}
		return &clusterpb.Command{Cmd: &clusterpb.Command_SetGroup{SetGroup: c}}
	case 10:
		p := &clusterpb.Pause{Resume: rapid.Bool().Draw(t, "resume"), AsTenant: rapid.Bool().Draw(t, "astenant")}
		switch rapid.IntRange(0, 3).Draw(t, "vertex") {
		case 0:
			p.All = true
		case 1:
			p.Pool = rapid.SampledFrom([]string{"gpu", "cpu"}).Draw(t, "pool")
		case 2:
			p.Tenant, p.Group = tenant, rapid.SampledFrom([]string{"g1", "g9", "bad/g"}).Draw(t, "group")
		default:
			p.Tenant = tenant
		}
		return &clusterpb.Command{Cmd: &clusterpb.Command_Pause{Pause: p}}
	case 11:
		return cancelJob(tenant, job)
	case 12:
		name := rapid.SampledFrom([]string{"gpu", "cpu", "Bad", "default"}).Draw(t, "poolname")
		switch rapid.IntRange(0, 2).Draw(t, "poolop") {
		case 0:
			c := &clusterpb.PoolSet{Name: name, Weights: new(rapid.SampledFrom([]string{"default", "equal", "a:3", "a:0"}).Draw(t, "weights"))}
			if rapid.Bool().Draw(t, "setrequired") {
				c.SubscriptionsRequired = new(rapid.Bool().Draw(t, "required"))
			}
			return &clusterpb.Command{Cmd: &clusterpb.Command_PoolSet{PoolSet: c}}
		case 1:
			return &clusterpb.Command{Cmd: &clusterpb.Command_PoolDelete{PoolDelete: &clusterpb.PoolDelete{Name: name}}}
		}
		var burst *uint32
		if rapid.Bool().Draw(t, "burst") {
			burst = new(uint32(rapid.IntRange(0, 1).Draw(t, "burstn")))
		}
		return &clusterpb.Command{Cmd: &clusterpb.Command_SubscriptionSet{SubscriptionSet: &clusterpb.SubscriptionSet{Tenant: tenant, Pool: name, Burst: burst}}}
	case 13:
		return webhookSet(tenant, rapid.SampledFrom([]string{"https://x.example/", "ftp://x"}).Draw(t, "url"), rapid.Bool().Draw(t, "rotate"),
			rapid.SampledFrom([]int64{0, -1, 1000}).Draw(t, "grace"), uint64(rapid.IntRange(0, 2).Draw(t, "keyid")))
	case 14, 15:
		return &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: worker, Size: pb.Size(rapid.IntRange(1, 3).Draw(t, "wsize")),
			Credit: rapid.Uint64Range(1, 1000).Draw(t, "credit"), Pool: rapid.SampledFrom([]string{"", "gpu"}).Draw(t, "wpool")}}}
	case 16:
		return started(job, attempt, worker)
	case 17:
		return &clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: job, Attempt: attempt, WorkerId: worker,
			Outcome: pb.Outcome(rapid.IntRange(0, 6).Draw(t, "outcome")), CpuMs: rapid.SampledFrom([]int64{0, 700, -1}).Draw(t, "cpu"),
			ExitCode: rapid.SampledFrom([]int32{0, 1, -1, 256, -2}).Draw(t, "exit"), Permanent: rapid.Bool().Draw(t, "permanent")}}}
	case 18:
		return randomBulk(t, []string{"a", "b", "newco"}, job)
	case 19:
		// Kinds (level 8): a worker's Hello, a retry policy of a kind.
		if rapid.Bool().Draw(t, "hello") {
			c := &clusterpb.WorkerHello{WorkerId: worker, Size: pb.Size(rapid.IntRange(0, 3).Draw(t, "hsize")),
				Pool: rapid.SampledFrom([]string{"", "gpu", "default"}).Draw(t, "hpool"), Says: rapid.Bool().Draw(t, "says"),
				Commands: rapid.Bool().Draw(t, "commands"), Kinds: rapid.SliceOfN(rapid.SampledFrom([]string{"render", "thumb", ""}), 0, 3).Draw(t, "kinds")}
			if rapid.Bool().Draw(t, "holds") {
				c.Holds = []*clusterpb.HeldJob{{Job: job, Attempt: attempt}}
			}
			return &clusterpb.Command{Cmd: &clusterpb.Command_WorkerHello{WorkerHello: c}}
		}
		c := &clusterpb.KindPolicySet{Tenant: rapid.SampledFrom([]string{"", "a", "nobody"}).Draw(t, "ptenant"),
			Kind: rapid.SampledFrom([]string{"render", "thumb", ""}).Draw(t, "pkind"), Remove: rapid.IntRange(0, 3).Draw(t, "premove") == 0,
			MaxAttempts: uint32(rapid.SampledFrom([]int{0, 2, 5000}).Draw(t, "pattempts")), TimeoutMs: rapid.SampledFrom([]int64{0, 60_000, -1}).Draw(t, "ptimeout")}
		return &clusterpb.Command{Cmd: &clusterpb.Command_KindPolicySet{KindPolicySet: c}}
	}
	return &clusterpb.Command{Cmd: &clusterpb.Command_Release{Release: &clusterpb.Release{Jobs: []uint64{job}}}}
}

// scheduleCommand draws a schedule command (level 8) with values on both
// sides of every rule.
func scheduleCommand(t *rapid.T, tenant string) *clusterpb.Command {
	name := rapid.SampledFrom([]string{"s1", "s2", "bad/n"}).Draw(t, "sname")
	version := rapid.Uint64Range(1, 3).Draw(t, "sversion")
	slot := rapid.SampledFrom([]int64{1, 2_000, 50_000, 120_000, 400_000}).Draw(t, "slot")
	switch rapid.IntRange(0, 5).Draw(t, "sop") {
	case 0:
		job := &clusterpb.SubmitJob{Size: pb.Size(rapid.IntRange(0, 4).Draw(t, "jsize")), EstCostMs: rapid.SampledFrom([]int64{-1, 0, 1000}).Draw(t, "jcost"),
			JobType:        rapid.SampledFrom([]string{"", "render"}).Draw(t, "jtype"),
			IdempotencyKey: rapid.SampledFrom([]string{"", "", "k"}).Draw(t, "jkey"),
			Payload:        make([]byte, rapid.SampledFrom([]int{0, 30}).Draw(t, "jpayload")),
			JobClass:       pb.Class(rapid.IntRange(0, 4).Draw(t, "jclass"))}
		if rapid.IntRange(0, 5).Draw(t, "nojob") == 0 {
			job = nil
		}
		return &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleSet{ScheduleSet: &clusterpb.ScheduleSet{Tenant: tenant, Name: name,
			Spec: rapid.SampledFrom([]string{"@every 1s", "*/5 * * * *", ""}).Draw(t, "spec"), Zone: rapid.SampledFrom([]string{"", "Europe/Berlin", "a b"}).Draw(t, "zone"),
			Overlap: pb.Overlap(rapid.IntRange(0, 4).Draw(t, "overlap")), CatchupMs: rapid.SampledFrom([]int64{0, 500, 10_000}).Draw(t, "catchup"),
			JitterMs: rapid.SampledFrom([]int64{0, 0, 3_000, -1}).Draw(t, "jitter"), Paused: rapid.IntRange(0, 3).Draw(t, "paused") == 0, Job: job}}}
	case 1:
		return &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleDelete{ScheduleDelete: &clusterpb.ScheduleDelete{Tenant: tenant, Name: name}}}
	case 2:
		return &clusterpb.Command{Cmd: &clusterpb.Command_SchedulePause{SchedulePause: &clusterpb.SchedulePause{Tenant: tenant, Name: name, Resume: rapid.Bool().Draw(t, "sresume")}}}
	case 3:
		return &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleMiss{ScheduleMiss: &clusterpb.ScheduleMiss{Tenant: tenant, Name: name, Version: version,
			ThroughMs: slot, Count: rapid.Uint64Range(0, 3).Draw(t, "count")}}}
	case 4:
		return &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleRunNow{ScheduleRunNow: &clusterpb.ScheduleRunNow{Tenant: tenant, Name: name,
			Key: rapid.SampledFrom([]string{"r1", "r2", "", "bad/k"}).Draw(t, "runkey")}}}
	}
	return &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleFire{ScheduleFire: &clusterpb.ScheduleFire{Tenant: tenant, Name: name, Version: version, SlotMs: slot}}}
}

// TestRefusedSubmitMakesNoTenant: under implicit_tenants a submit of an
// unknown tenant that its would-be settings refuse (a deadline, a class
// above normal, a payload over max_queued_bytes) makes no tenant and
// leaves the state hash as it was (feature level 7). Below it, Apply
// still made the tenant first, as the builds before level 7 do.
func TestRefusedSubmitMakesNoTenant(t *testing.T) {
	for _, level := range []uint32{Level7, Level6} {
		h := &harness{t: t, f: NewAtLevel(level), now: 1_000}
		h.one(setConfigWith(func(p *pb.SchedulerConfig) {
			p.ImplicitTenants = pb.Tier_SILVER
			p.MaxQueuedBytes = 100
		}))
		for i, c := range []struct {
			job  *clusterpb.SubmitJob
			code Code
			msg  string
		}{
			{&clusterpb.SubmitJob{Tenant: "newco", Size: pb.Size_SM, EstCostMs: 1000, DeadlineMs: 60_000}, PermissionDenied,
				"tenant newco may not submit a job with a deadline (allow_deadlines is off)"},
			{&clusterpb.SubmitJob{Tenant: "newco", Size: pb.Size_SM, EstCostMs: 1000, JobClass: pb.Class_CRITICAL}, PermissionDenied,
				"class critical is above tenant newco's max_class normal"},
			{&clusterpb.SubmitJob{Tenant: "newco", Size: pb.Size_SM, EstCostMs: 1000, Payload: make([]byte, 101)}, ResourceExhausted,
				`tenant "newco" holds 0 bytes of payloads in its unfinished jobs; with this job's 101 it would pass the cluster's max_queued_bytes of 100`},
		} {
			before, _ := h.f.Hash()
			v := admitOne(h.f, &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: c.job}})
			r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: c.job}})
			if v.Code != c.code || v.Msg != c.msg || r.Code != c.code || r.Msg != c.msg {
				t.Fatalf("level %d, submit %d: check %v %q, Apply %v %q", level, i, v.Code, v.Msg, r.Code, r.Msg)
			}
			after, _ := h.f.Hash()
			_, made := h.f.sched.Tenant("newco")
			switch {
			case level >= Level7 && (made || after != before):
				t.Fatalf("level 7, submit %d: refused, yet the tenant was made (%v) or the state changed", i, made)
			case level < Level7 && !made:
				t.Fatalf("level 6, submit %d: the tenant was not made as builds before level 7 make it", i)
			}
		}
		// The same tenant's submit the rules allow makes it.
		if r := h.one(submit("newco", "", 1000, "")); r.Code != OK || !r.Created {
			t.Fatalf("level %d: %+v", level, r)
		}
	}
}

// TestKeyedResendAtQuota: a keyed resend of a tenant at its max_queued
// answers the job the key names — on the leader's check and in Apply
// alike — where a new submit is refused by the quota.
func TestKeyedResendAtQuota(t *testing.T) {
	h := newHarness(t)
	h.one(upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, Caps: &pb.Caps{MaxQueued: 1}}))
	if r := h.one(submit("acme", "k1", 1000, "x")); r.Job != 1 || !r.Created {
		t.Fatal(r)
	}
	again := submit("acme", "k1", 1000, "x")
	if v := admitOne(h.f, again); v.Refused() || v.Job != 1 {
		t.Fatalf("the check of the resend: %+v", v)
	}
	if r := h.one(again); r.Refused() || r.Job != 1 || r.Created {
		t.Fatalf("the resend: %+v", r)
	}
	other := submit("acme", "k2", 1000, "x")
	v, r := admitOne(h.f, other), h.one(other)
	const want = `tenant "acme" has 1 queued jobs, its max_queued quota`
	if v.Code != ResourceExhausted || v.Msg != want || v.Reason != text.ReasonQuotaExceeded || r.Msg != want {
		t.Fatalf("a new key: check %+v, Apply %+v", v, r)
	}
}

// TestAdmitSubmitsCountsTheBatch: the leader's check of a batch counts
// the jobs it admits as if applied, so that only those the quotas hold
// are proposed, and the verdicts are Apply's for the batch applied
// together.
func TestAdmitSubmitsCountsTheBatch(t *testing.T) {
	h := newHarness(t)
	h.one(setConfigWith(func(p *pb.SchedulerConfig) { p.MaxQueuedBytes = 25 }))
	h.one(upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, Caps: &pb.Caps{MaxQueued: 3}}))
	h.one(tenant("beta", pb.Tier_FREE))
	var cmds []*clusterpb.Command
	var jobs []*clusterpb.SubmitJob
	for _, t := range []struct {
		tenant  string
		payload int
	}{{"acme", 10}, {"beta", 10}, {"acme", 10}, {"acme", 10}, {"beta", 10}, {"acme", 1}, {"beta", 10}} {
		c := submit(t.tenant, "", 1000, string(make([]byte, t.payload)))
		cmds, jobs = append(cmds, c), append(jobs, c.GetSubmit())
	}
	verdicts := make([]Result, len(jobs))
	h.f.AdmitSubmits(jobs, verdicts)
	applied := h.apply(cmds...)
	var got, want []string
	for i := range verdicts {
		got = append(got, verdicts[i].Code.String())
		want = append(want, applied[i].Code.String())
		if verdicts[i].Msg != applied[i].Msg {
			t.Errorf("job %d: check %q, Apply %q", i, verdicts[i].Msg, applied[i].Msg)
		}
	}
	const exp = "[OK OK OK RESOURCE_EXHAUSTED OK OK RESOURCE_EXHAUSTED]"
	if fmt.Sprint(got) != exp || fmt.Sprint(want) != exp {
		t.Fatalf("check %v, Apply %v, want %s", got, want, exp)
	}
}

// TestDrainedWorkersPruned: from level 7 the record of a drained worker
// is pruned, like any other, once the worker has not been seen within
// the job retention (a worker token cannot fill the state with drained
// records); below it, drained records were kept.
func TestDrainedWorkersPruned(t *testing.T) {
	for _, level := range []uint32{Level7, Level6} {
		h := &harness{t: t, f: NewAtLevel(level), now: 1_000}
		for _, id := range []string{"w1", "w2"} {
			h.one(&clusterpb.Command{Cmd: &clusterpb.Command_WorkerDrain{WorkerDrain: &clusterpb.WorkerDrain{WorkerId: id, Drain: id == "w1"}}})
		}
		h.now += sfq.Time(DefaultConfig().JobRetentionMs) + 1
		h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}})
		var left []string
		for _, w := range h.f.Workers() {
			left = append(left, w.ID)
		}
		want := "[]"
		if level < Level7 {
			want = "[w1]"
		}
		if fmt.Sprint(left) != want {
			t.Errorf("level %d: workers left %v, want %s", level, left, want)
		}
	}
}
