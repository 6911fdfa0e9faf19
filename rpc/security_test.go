package rpc

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/auth"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// TestNothingRefusedOrUnchangedIsLogged: writes the leader's state shows
// to change nothing (30 pauses of a paused tenant, 30 sets of a group to
// what it is, 30 cancels of a cancelled job) and writes its check refuses
// (10 upserts with a bad multiplier, 20 batches of three jobs of a tenant
// at its max_queued_bytes) are all answered, and not one of them adds a
// command to the log.
func TestNothingRefusedOrUnchangedIsLogged(t *testing.T) {
	n := startTestNode(t, nil, func(c *fsm.Config) { c.MaxQueuedBytes = 2500 })
	cc := n.dial("")
	admin, cl := pb.NewAdminClient(cc), pb.NewClientClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "acme", Tier: pb.Tier_GOLD.Enum()})
	must(err)
	_, err = cl.Pause(ctx, &pb.PauseRequest{Tenant: "acme"})
	must(err)
	_, err = cl.SetGroup(ctx, &pb.SetGroupRequest{Tenant: "acme", Group: "g", Cap: "2"})
	must(err)
	queued, err := cl.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, Payload: []byte(strings.Repeat("x", 2000))})
	must(err)
	ended, err := cl.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000})
	must(err)
	_, err = cl.CancelJob(ctx, &pb.CancelJobRequest{Tenant: "acme", JobId: ended.JobId})
	must(err)
	sched := &pb.SetScheduleRequest{Tenant: "acme", Name: "nightly", Spec: "30 2 * * *", Job: &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000}}
	_, err = cl.SetSchedule(ctx, sched)
	must(err)
	_, err = cl.PauseSchedule(ctx, &pb.PauseScheduleRequest{Tenant: "acme", Name: "nightly"})
	must(err)
	sched.Paused = true // as it is now
	res := &pb.ResourceSetRequest{Name: "api", Capacity: proto.Uint32(4)}
	_, err = admin.ResourceSet(ctx, res)
	must(err)
	_, index := n.node.FSM.Clock()

	for range 10 {
		// Schedules and resources: set to what they are, paused when
		// paused, or refused (a bad spec, an unknown resource's delete).
		if _, err := cl.SetSchedule(ctx, sched); err != nil {
			t.Fatalf("a schedule set to what it is: %v", err)
		}
		if _, err := cl.PauseSchedule(ctx, &pb.PauseScheduleRequest{Tenant: "acme", Name: "nightly"}); err != nil {
			t.Fatalf("a pause of a paused schedule: %v", err)
		}
		bad := &pb.SetScheduleRequest{Tenant: "acme", Name: "bad", Spec: "61 * * * *", Job: sched.Job}
		if _, err := cl.SetSchedule(ctx, bad); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("a bad spec: %v", err)
		}
		if _, err := admin.ResourceSet(ctx, res); err != nil {
			t.Fatalf("a resource set to what it is: %v", err)
		}
		if _, err := admin.ResourceDelete(ctx, &pb.ResourceDeleteRequest{Name: "nothing"}); status.Code(err) != codes.NotFound {
			t.Fatalf("a delete of no resource: %v", err)
		}
	}
	for range 30 {
		p, err := cl.Pause(ctx, &pb.PauseRequest{Tenant: "acme"})
		if err != nil || p.Changed || p.Paused == "" {
			t.Fatalf("a pause of a paused tenant: %v %v", p, err)
		}
		if _, err := cl.SetGroup(ctx, &pb.SetGroupRequest{Tenant: "acme", Group: "g", Cap: "2"}); err != nil {
			t.Fatalf("a group set to what it is: %v", err)
		}
		c, err := cl.CancelJob(ctx, &pb.CancelJobRequest{Tenant: "acme", JobId: ended.JobId})
		if err != nil || c.State != "cancelled" {
			t.Fatalf("a cancel of a cancelled job: %v %v", c, err)
		}
	}
	for range 10 {
		_, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "acme", Tier: pb.Tier_GOLD.Enum(), Multiplier: proto.Uint32(1 << 30)})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("a bad multiplier: %v", err)
		}
	}
	big := &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, Payload: []byte(strings.Repeat("y", 900))}
	for range 20 {
		b, err := cl.SubmitBatch(ctx, &pb.SubmitBatchRequest{Jobs: []*pb.SubmitRequest{big, big, big}})
		must(err)
		for _, r := range b.Results {
			if !strings.HasPrefix(r.Error, "RESOURCE_EXHAUSTED: ") {
				t.Fatalf("a batch job at the quota: %v", r)
			}
		}
	}
	_ = queued
	if cmds := n.loggedAfter(index); len(cmds) != 0 {
		t.Fatalf("%d commands logged after the setup, want none: the first %v", len(cmds), cmds[0])
	}
}

// TestWriteRate: the write calls of one caller are held to the write
// rate (limits.write_rate, 5 a minute in bursts of 5 here): the sixth
// within the minute is RESOURCE_EXHAUSTED with the reason RATE_LIMITED
// and when to retry, and adds nothing to the log; another caller's
// writes go on.
func TestWriteRate(t *testing.T) {
	opt := Options{Limits: Limits{WriteRate: sfq.RateLimit{N: 5, PeriodMs: 60_000, Burst: 5}}}
	n := startTestNodeWith(t, []auth.Token{{Secret: testAdmin, Role: auth.RoleAdmin}, {Secret: "client-secret-acme-00", Role: auth.RoleClient, Tenant: "acme"}}, nil, opt)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := pb.NewAdminClient(n.dial(testAdmin))
	acme := pb.NewClientClient(n.dial("client-secret-acme-00"))
	if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "acme", Tier: pb.Tier_GOLD.Enum()}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := acme.Pause(ctx, &pb.PauseRequest{Resume: i%2 == 1}); err != nil {
			t.Fatalf("write %d: %v", i+1, err)
		}
	}
	_, index := n.node.FSM.Clock()
	_, err := acme.Pause(ctx, &pb.PauseRequest{Resume: true})
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || !strings.HasPrefix(st.Message(), "write_rate: a caller may make 5/1m0s write calls (bursts of 5; limits.write_rate); retry in ") {
		t.Fatalf("the sixth write: %v", err)
	}
	var reason string
	var retry time.Duration
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			reason = d.Reason
		case *errdetails.RetryInfo:
			retry = d.RetryDelay.AsDuration()
		}
	}
	if reason != "RATE_LIMITED" || retry <= 0 || retry > 12*time.Second {
		t.Fatalf("the sixth write's details: reason %q, retry in %s", reason, retry)
	}
	if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "beta", Tier: pb.Tier_FREE.Enum()}); err != nil {
		t.Fatalf("another caller's write: %v", err)
	}
	if cmds := n.loggedAfter(index); len(cmds) != 1 || cmds[0].GetTenantUpsert().GetName() != "beta" {
		t.Fatalf("logged after the fifth write: %v, want beta's upsert alone", cmds)
	}
}

// TestRequestBudgetBurst: a burst of small calls from one caller, more
// at once than its request budget has room for (one request here), is
// served whole: each call waits the moment the ones before it take to be
// read, rather than being refused.
func TestRequestBudgetBurst(t *testing.T) {
	opt := Options{Limits: Limits{RequestBytesPerIdentity: fsm.MaxMessageBytes}}
	n := startTestNodeWith(t, []auth.Token{{Secret: testAdmin, Role: auth.RoleAdmin}, {Secret: "client-secret-acme-00", Role: auth.RoleClient, Tenant: "acme"}}, nil, opt)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := pb.NewAdminClient(n.dial(testAdmin)).UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "acme", Tier: pb.Tier_GOLD.Enum()}); err != nil {
		t.Fatal(err)
	}
	acme := pb.NewClientClient(n.dial("client-secret-acme-00"))
	const calls = 200
	errs := make(chan error, calls)
	var wg sync.WaitGroup
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := acme.TenantUsage(ctx, &pb.TenantUsageRequest{})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	refused := 0
	for err := range errs {
		if err != nil {
			refused++
			t.Log(err)
		}
	}
	if refused > 0 {
		t.Fatalf("%d of %d calls refused", refused, calls)
	}
}
