package snapshot

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"google.golang.org/protobuf/proto"
)

// writeLog stores cmds in db as entries 1, 2, ..., one a second of
// cluster time, and closes it.
func writeLog(t *testing.T, db *raftboltdb.BoltStore, cmds []*clusterpb.Command) {
	t.Helper()
	for i, c := range cmds {
		data, err := fsm.Encode(&clusterpb.Envelope{Version: fsm.Version, StampMs: int64(i) * 1000, Commands: []*clusterpb.Command{c}})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.StoreLog(&raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
}

// TestAuditClassesAndDeadlines: an audited dispatch says its job's class,
// deadline and start, and which classes had an eligible job the worker
// fit just before it (what SPEC §8 rule 7 is checked against).
func TestAuditClassesAndDeadlines(t *testing.T) {
	dir := t.TempDir()
	db, err := raftboltdb.NewBoltStore(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	cmds := []*clusterpb.Command{
		// As a new cluster's first leader raises it.
		{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: fsm.Level2}}},
		{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_GOLD, MaxClass: pb.Class_HIGH, AllowDeadlines: true}}},
		{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_MD, EstCostMs: 1000}}},
		{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_SM, EstCostMs: 1000, DeadlineMs: 1000}}},
		{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_SM, EstCostMs: 1000, JobClass: pb.Class_HIGH}}},
		{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "w1", Size: pb.Size_MD, Credit: 1}}},
		{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "w2", Size: pb.Size_MD, Credit: 1}}},
	}
	writeLog(t, db, cmds)
	var got []AuditFact
	if _, err := Audit(dir, 0, func(f AuditFact) {
		if f.Kind == "dispatch" {
			got = append(got, f)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d dispatch facts", len(got))
	}
	// The high sm job goes first while normal has a deadline job and one
	// without; then the deadline job, dispatched at 6 s, 3 s after its
	// deadline (submitted at 3 s, due in 1 s), charged at the tag the high
	// job did not touch (normal's is still 0).
	if f := got[0]; f.Job != 3 || f.Class != "high" || f.Deadline || !reflect.DeepEqual(f.Eligible, []string{"high", "normal", "normal:deadline"}) ||
		!reflect.DeepEqual(f.BackloggedIn, []string{"a:high", "a:normal"}) {
		t.Fatalf("first dispatch %+v", f)
	}
	if f := got[1]; f.Job != 2 || f.Class != "normal" || !f.Deadline || !f.DeadlineMissed || f.Start != 0 || !reflect.DeepEqual(f.Eligible, []string{"normal", "normal:deadline"}) ||
		!reflect.DeepEqual(f.BackloggedIn, []string{"a:normal"}) {
		t.Fatalf("second dispatch %+v", f)
	}
}

// TestAuditRedrive: a job that failed, was redriven and ran again shows
// "terminal" (failed), "redrive" with its attempt (1), then a dispatch of
// attempt 2; a bulk cancel reports each job it ended as "terminal".
func TestAuditRedrive(t *testing.T) {
	dir := t.TempDir()
	db, err := raftboltdb.NewBoltStore(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	cmds := []*clusterpb.Command{
		{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: fsm.Level5}}},
		{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_GOLD}}},
		{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_SM, EstCostMs: 1000, MaxAttempts: 1}}},
		{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_SM, EstCostMs: 1000}}},
		{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "w1", Size: pb.Size_SM, Credit: 1}}},
		{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: 1, Attempt: 1, WorkerId: "w1", Outcome: pb.Outcome_FAILED, CpuMs: 10, ExitCode: 3}}},
		{Cmd: &clusterpb.Command_Redrive{Redrive: &clusterpb.BulkJobs{Tenant: "a", Filter: &pb.JobFilter{}}}},
		{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "w1", Size: pb.Size_SM, Credit: 2}}},
		{Cmd: &clusterpb.Command_CancelJobs{CancelJobs: &clusterpb.BulkJobs{Tenant: "a", Filter: &pb.JobFilter{States: []string{"queued"}}}}},
	}
	writeLog(t, db, cmds)
	var got []string
	if _, err := Audit(dir, 0, func(f AuditFact) {
		switch f.Kind {
		case "dispatch", "redrive", "terminal":
			got = append(got, fmt.Sprintf("%d:%s job=%d attempt=%d state=%s", f.Index, f.Kind, f.Job, f.Attempt, f.State))
		}
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"5:dispatch job=1 attempt=1 state=", "6:terminal job=1 attempt=0 state=failed", "7:redrive job=1 attempt=1 state=queued",
		"8:dispatch job=1 attempt=2 state=", "9:terminal job=2 attempt=0 state=cancelled"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("facts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAuditPools: a dispatch says its job's pool and its worker's, the
// tenant's running jobs in every pool and in the job's, its subscription
// there, and what the worker's pool alone held just before it; a pause of
// a pool names it.
func TestAuditPools(t *testing.T) {
	dir := t.TempDir()
	db, err := raftboltdb.NewBoltStore(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	burst := uint32(2)
	submit := func(tenant, pool string, class pb.Class) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant, Size: pb.Size_SM, EstCostMs: 1000, Pool: pool, JobClass: class}}}
	}
	dispatch := func(worker, pool string) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: worker, Size: pb.Size_SM, Credit: 1, Pool: pool}}}
	}
	cmds := []*clusterpb.Command{
		{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: fsm.Level6}}},
		{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_GOLD, MaxClass: pb.Class_HIGH}}},
		{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "b", Tier: pb.Tier_GOLD}}},
		{Cmd: &clusterpb.Command_PoolSet{PoolSet: &clusterpb.PoolSet{Name: "gpu"}}},
		{Cmd: &clusterpb.Command_SubscriptionSet{SubscriptionSet: &clusterpb.SubscriptionSet{Tenant: "a", Pool: "gpu", Burst: &burst}}},
		submit("a", "", pb.Class_HIGH), // 1: default, high
		submit("a", "gpu", 0),          // 2: gpu
		submit("b", "gpu", 0),          // 3: gpu
		dispatch("w1", "default"),      // job 1
		dispatch("g1", "gpu"),          // job 2: a and b tie, the older job goes
		{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{Pool: "gpu"}}},
	}
	writeLog(t, db, cmds)
	var got []AuditFact
	if _, err := Audit(dir, 0, func(f AuditFact) {
		if f.Kind == "dispatch" || f.Kind == "pause" {
			got = append(got, f)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d facts: %+v", len(got), got)
	}
	if f := got[0]; f.Job != 1 || f.Pool != "" || f.WorkerPool != "" || f.Running != 1 || f.PoolRunning != 1 || f.Subscribed ||
		!reflect.DeepEqual(f.Backlogged, []string{"a"}) || !reflect.DeepEqual(f.BackloggedIn, []string{"a:high"}) || !reflect.DeepEqual(f.Eligible, []string{"high"}) {
		t.Fatalf("the dispatch in the pool default: %+v", f)
	}
	if f := got[1]; f.Job != 2 || f.Pool != "gpu" || f.WorkerPool != "gpu" || f.Running != 2 || f.PoolRunning != 1 || !f.Subscribed || f.Burst != 2 ||
		!reflect.DeepEqual(f.Backlogged, []string{"a", "b"}) || !reflect.DeepEqual(f.BackloggedIn, []string{"a:normal", "b:normal"}) || !reflect.DeepEqual(f.Eligible, []string{"normal"}) {
		t.Fatalf("the dispatch in pool gpu: %+v", f)
	}
	if f := got[2]; f.Kind != "pause" || f.Pool != "gpu" || !f.Paused || f.Tenant != "" || f.All {
		t.Fatalf("the pause of pool gpu: %+v", f)
	}
}

// TestAuditClockTicks: the audited replay of a log with clock ticks
// (entries without a command) ends at the state and hash the plain
// replay does: a tick moves the clock there too.
func TestAuditClockTicks(t *testing.T) {
	dir := t.TempDir()
	db, err := raftboltdb.NewBoltStore(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	for i, cmds := range [][]*clusterpb.Command{
		{{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: fsm.MaxFeatureLevel}}}},
		{{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_GOLD}}}},
		nil, nil, // ticks
		{{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_MD, EstCostMs: 1000}}}},
		nil,
	} {
		data, err := fsm.Encode(&clusterpb.Envelope{Version: fsm.Version, StampMs: int64(i) * 1000, WallMs: 1_700_000_000_000 + int64(i)*1000, Commands: cmds})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.StoreLog(&raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	audited, err := Audit(dir, 6, func(AuditFact) {})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Replay(dir, 6, nil)
	if err != nil {
		t.Fatal(err)
	}
	if audited.Index != 6 || audited.Hash != plain.Hash {
		t.Fatalf("audited replay: index %d hash %x; plain: index %d hash %x", audited.Index, audited.Hash, plain.Index, plain.Hash)
	}
}

// TestAuditKinds: a submit and a dispatch say the job's form and kind, a
// dispatch its worker and what the worker's record ran just before it; a
// finish of unknown_kind the job's failures before and after and its
// state; a Hello the run its worker held, whether it listed it, and what
// became of it (SPEC §8 rule 12).
func TestAuditKinds(t *testing.T) {
	dir := t.TempDir()
	db, err := raftboltdb.NewBoltStore(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	submit := func(form pb.JobForm, typ string) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_SM, EstCostMs: 1000, Form: form, JobType: typ}}}
	}
	hello := func(worker string, commands bool, kinds []string, holds ...*clusterpb.HeldJob) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_WorkerHello{WorkerHello: &clusterpb.WorkerHello{WorkerId: worker, Size: pb.Size_SM, Says: commands || len(kinds) > 0,
			Commands: commands, Kinds: kinds, Holds: holds}}}
	}
	dispatch := func(worker string, credit uint64) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: worker, Size: pb.Size_SM, Credit: credit}}}
	}
	cmds := []*clusterpb.Command{
		{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: fsm.Level8}}},
		{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_GOLD}}},
		submit(pb.JobForm_FUNCTION, "digest"), // 1
		submit(pb.JobForm_COMMAND, "build"),   // 2
		submit(pb.JobForm_FUNCTION, "resize"), // 3
		hello("cmd", true, nil),
		hello("py", false, []string{"digest", "resize"}),
		dispatch("cmd", 1), // job 2
		dispatch("py", 1),  // job 1
		{Cmd: &clusterpb.Command_Started{Started: &clusterpb.Started{Job: 1, Attempt: 1, WorkerId: "py"}}},
		{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: 2, Attempt: 1, WorkerId: "cmd", Outcome: pb.Outcome_UNKNOWN_KIND}}},
		hello("py", false, []string{"digest", "resize"}, &clusterpb.HeldJob{Job: 1, Attempt: 1}), // keeps job 1
		hello("py", false, []string{"digest", "resize"}),                                         // loses it: a failure
		dispatch("cmd", 2),      // nothing: cmd runs no command job this session
		hello("cmd", true, nil), // a new session runs commands again
		dispatch("cmd", 3),      // job 2 again
		hello("cmd", true, nil), // loses it, never started: no failure
	}
	writeLog(t, db, cmds)
	var got []string
	if _, err := Audit(dir, 0, func(f AuditFact) {
		switch f.Kind {
		case "submit":
			got = append(got, fmt.Sprintf("%d:submit job=%d form=%s kind=%s", f.Index, f.Job, f.Form, f.JobKind))
		case "dispatch":
			got = append(got, fmt.Sprintf("%d:dispatch job=%d form=%s kind=%s worker=%s runs=%+v", f.Index, f.Job, f.Form, f.JobKind, f.Worker, *f.Runs))
		case "finish":
			got = append(got, fmt.Sprintf("%d:finish job=%d outcome=%s failures=%d->%d state=%s", f.Index, f.Job, f.Outcome, f.FailuresBefore, f.Failures, f.State))
		case "hello":
			got = append(got, fmt.Sprintf("%d:hello %s runs=%+v job=%d/%d failures=%d->%d hello=%+v", f.Index, f.Worker, *f.Runs, f.Job, f.Attempt, f.FailuresBefore, f.Failures, *f.Hello))
		}
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"3:submit job=1 form=function kind=digest",
		"4:submit job=2 form=command kind=",
		"5:submit job=3 form=function kind=resize",
		"6:hello cmd runs={Commands:true AllKinds:false Kinds:[]} job=0/0 failures=0->0 hello={Holds:[] Before: Cancel: Listed:false State: Held:false}",
		"7:hello py runs={Commands:false AllKinds:false Kinds:[digest resize]} job=0/0 failures=0->0 hello={Holds:[] Before: Cancel: Listed:false State: Held:false}",
		"8:dispatch job=2 form=command kind= worker=cmd runs={Commands:true AllKinds:false Kinds:[]}",
		"9:dispatch job=1 form=function kind=digest worker=py runs={Commands:false AllKinds:false Kinds:[digest resize]}",
		"11:finish job=2 outcome=unknown_kind failures=0->0 state=queued",
		"12:hello py runs={Commands:false AllKinds:false Kinds:[digest resize]} job=1/1 failures=0->0 hello={Holds:[1/1] Before:running Cancel:none Listed:true State:running Held:true}",
		"13:hello py runs={Commands:false AllKinds:false Kinds:[digest resize]} job=1/1 failures=0->1 hello={Holds:[] Before:running Cancel:none Listed:false State:queued Held:false}",
		"15:hello cmd runs={Commands:true AllKinds:false Kinds:[]} job=0/0 failures=0->0 hello={Holds:[] Before: Cancel: Listed:false State: Held:false}",
		"16:dispatch job=2 form=command kind= worker=cmd runs={Commands:true AllKinds:false Kinds:[]}",
		"17:hello cmd runs={Commands:true AllKinds:false Kinds:[]} job=2/2 failures=0->0 hello={Holds:[] Before:assigned Cancel:none Listed:false State:queued Held:false}",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("facts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAuditResources: a dispatch of a job that uses resources says each
// one's units held after it beside its capacity, and its tenant's beside
// the limit in force; a "resources" fact follows each command that
// changed a resource's units or settings, with the live jobs that hold
// its units (SPEC §8 rule 13).
func TestAuditResources(t *testing.T) {
	dir := t.TempDir()
	db, err := raftboltdb.NewBoltStore(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	submit := func(uses ...*pb.ResourceUse) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_SM, EstCostMs: 1000, Uses: uses}}}
	}
	dispatch := func(worker string) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: worker, Size: pb.Size_SM, Credit: 1}}}
	}
	two, one := uint32(2), uint32(1)
	cmds := []*clusterpb.Command{
		{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: fsm.Level8}}},
		{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_GOLD}}},
		{Cmd: &clusterpb.Command_ResourceSet{ResourceSet: &clusterpb.ResourceSet{Name: "api", Capacity: &two, TenantMax: &one}}}, // 3
		submit(&pb.ResourceUse{Resource: "api", Units: 1}),                                                                       // job 1
		submit(),       // job 2
		dispatch("w1"), // 6: job 1
		dispatch("w2"), // 7: job 2
		{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: 1, Attempt: 1, WorkerId: "w1", Outcome: pb.Outcome_OK}}}, // 8
	}
	writeLog(t, db, cmds)
	var got []string
	if _, err := Audit(dir, 0, func(f AuditFact) {
		switch f.Kind {
		case "dispatch":
			s := fmt.Sprintf("%d:dispatch job=%d", f.Index, f.Job)
			for _, u := range f.Uses {
				s += fmt.Sprintf(" %s:%d held=%d/%d tenant=%d/%d", u.Resource, u.Units, u.Held, u.Capacity, u.TenantHeld, *u.TenantMax)
			}
			got = append(got, s)
		case "resources":
			s := fmt.Sprintf("%d:resources", f.Index)
			for _, r := range f.Resources {
				s += fmt.Sprintf(" %s capacity=%d tenant_max=%d held=%d holders=%v", r.Name, r.Capacity, *r.TenantMax, r.Held, r.Holders)
			}
			got = append(got, s)
		}
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"3:resources api capacity=2 tenant_max=1 held=0 holders=[]",
		"6:dispatch job=1 api:1 held=1/2 tenant=1/1",
		"6:resources api capacity=2 tenant_max=1 held=1 holders=[1/1/1]",
		"7:dispatch job=2",
		"8:resources api capacity=2 tenant_max=1 held=0 holders=[]",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("facts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAuditReservations: a dispatch says which reservations stood at its
// pick (what SPEC §8 rule 13's "while a reservation stands no other job
// takes units of it" is checked against). api has 2 units and
// resource_reserve_after is 2 s (entry i is at i-1 s of cluster time).
// Job 2 needs both units and is blocked from its submit at 6 s; at 11 s
// it takes the reservation, so job 4 gets none of the unit job 1 freed,
// and the dispatch at 13 s gives job 2 both units while its reservation
// stands.
func TestAuditReservations(t *testing.T) {
	dir := t.TempDir()
	db, err := raftboltdb.NewBoltStore(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	submit := func(units uint32) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_SM, EstCostMs: 1000, Uses: []*pb.ResourceUse{{Resource: "api", Units: units}}}}}
	}
	dispatch := func(worker string) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: worker, Size: pb.Size_SM, Credit: 1}}}
	}
	cfg := fsm.ConfigToPB(fsm.DefaultConfig())
	cfg.ResourceReserveAfterMs = proto.Int64(2000)
	two := uint32(2)
	cmds := []*clusterpb.Command{
		{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: fsm.Level8}}},
		{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: cfg}}},
		{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_GOLD}}},
		{Cmd: &clusterpb.Command_ResourceSet{ResourceSet: &clusterpb.ResourceSet{Name: "api", Capacity: &two}}},
		submit(1),      // 5 (4 s): job 1
		dispatch("w1"), // 6 (5 s): job 1 takes a unit
		submit(2),      // 7 (6 s): job 2, blocked since 6 s
		submit(1),      // 8 (7 s): job 3
		dispatch("w2"), // 9 (8 s): blocked 2 s, not longer: job 3 takes the last unit
		{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: 1, Attempt: 1, WorkerId: "w1", Outcome: pb.Outcome_OK}}}, // 10 (9 s)
		submit(1),      // 11 (10 s): job 4
		dispatch("w3"), // 12 (11 s): job 2 blocked 5 s takes the reservation; job 4 gets nothing
		{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: 3, Attempt: 1, WorkerId: "w2", Outcome: pb.Outcome_OK}}}, // 13 (12 s)
		dispatch("w3"), // 14 (13 s): job 2, with the reservation it holds
		dispatch("w1"), // 15 (14 s): nothing has room
	}
	writeLog(t, db, cmds)
	var got []string
	if _, err := Audit(dir, 0, func(f AuditFact) {
		if f.Kind == "dispatch" {
			got = append(got, fmt.Sprintf("%d:dispatch job=%d reservations=%v", f.Index, f.Job, f.Reservations))
		}
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"6:dispatch job=1 reservations=[]",
		"9:dispatch job=3 reservations=[]",
		"14:dispatch job=2 reservations=[api/2/6000]",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("facts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
