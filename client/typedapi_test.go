package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/baristahq/barista/proto"
)

// TestInsertTakesTheJobFromTheAnswer: Insert asks the submit's answer for
// the job (return_job) and makes no other call when it comes; from a
// server that answers none (a build before return_job) it reads the job
// back, one GetJob.
func TestInsertTakesTheJobFromTheAnswer(t *testing.T) {
	withJob := true
	f := serve(t, &fakeNode{
		submit: func(n int, req *pb.SubmitRequest) (*pb.SubmitResponse, error) {
			resp := &pb.SubmitResponse{JobId: uint64(40 + n), Created: n == 1}
			if withJob {
				resp.Job = &pb.Job{JobId: resp.JobId, Tenant: "acme", JobType: req.JobType, State: "queued", Attempt: 0, MaxAttempts: 3,
					Size: pb.Size_MD, Form: pb.JobForm_FUNCTION, SubmittedWallMs: 1_700_000_000_000}
			}
			return resp, nil
		},
		get: func(n int, req *pb.GetJobRequest) (*pb.Job, error) {
			return &pb.Job{JobId: req.JobId, Tenant: "acme", JobType: "resize", State: "running", Attempt: 1, Payload: []byte(`{"image":"a.png"}`)}, nil
		},
	})
	c := newClient(t, Options{}, f.addr)
	ctx := context.Background()
	r, err := c.Insert(ctx, resizeArgs{Image: "a.png"}, &InsertOpts{Tenant: "acme", Size: SizeMD})
	if err != nil {
		t.Fatal(err)
	}
	j := r.Job
	if j.ID != 41 || r.Duplicate || j.State != JobQueued || j.Kind != "resize" || j.Size != SizeMD || j.Form != FormFunction || j.MaxAttempts != 3 ||
		string(j.Payload) != `{"image":"a.png"}` || !j.SubmittedAt.Equal(time.UnixMilli(1_700_000_000_000)) {
		t.Errorf("job %+v", j)
	}
	if !f.submits[0].ReturnJob {
		t.Error("Insert did not ask for the job (return_job)")
	}
	if n := count(f, &f.gets); n != 0 {
		t.Errorf("Insert made %d GetJob calls with the job in its answer, want 0", n)
	}

	withJob = false
	r, err = c.Insert(ctx, resizeArgs{Image: "a.png"}, &InsertOpts{Tenant: "acme", Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Job.ID != 42 || !r.Duplicate || r.Job.State != JobRunning || count(f, &f.gets) != 1 || f.gets[0].JobId != 42 || f.gets[0].Tenant != "acme" {
		t.Errorf("without the job in the answer: %+v, duplicate %v, gets %v", r.Job, r.Duplicate, f.gets)
	}
}

// TestEventWatchIsAnIterator: EventWatch yields the events in Go types in
// order and ends with the job's last; a loop that stops ends the stream;
// a refusal no retry clears is yielded once, with a nil event.
func TestEventWatchIsAnIterator(t *testing.T) {
	f := serve(t, &fakeNode{
		watch: func(n int, req *pb.WatchEventsRequest, s grpc.ServerStreamingServer[pb.Event]) error {
			if req.Tenant == "beta" {
				return status.Error(codes.PermissionDenied, "a client token of tenant acme may not watch tenant beta")
			}
			for i, kind := range []string{"queued", "assigned", "started", "completed"} {
				ev := &pb.Event{Seq: uint64(10 + i), JobId: req.JobId, Tenant: "acme", Attempt: 1, Kind: kind, WorkerId: "w-1", WallMs: int64(1_700_000_000_000 + i), Pool: "default"}
				if kind == "completed" {
					ev.CpuMs, ev.Reason = 1500, ""
				}
				if err := s.Send(ev); err != nil {
					return err
				}
			}
			return nil
		},
	})
	c := newClient(t, Options{}, f.addr)
	ctx := context.Background()
	var got []string
	for ev, err := range c.EventWatch(ctx, WatchOpts{JobID: 7, FromOldest: true}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d %s %s %s %s", ev.Seq, ev.Kind, ev.Worker, ev.CPU, ev.At.UTC().Format("05.000")))
		if ev.Kind.Ends() && ev.Kind != EventCompleted {
			t.Errorf("%s ends", ev.Kind)
		}
	}
	want := "[10 queued w-1 0s 20.000 11 assigned w-1 0s 20.001 12 started w-1 0s 20.002 13 completed w-1 1.5s 20.003]"
	if fmt.Sprint(got) != want {
		t.Errorf("events %v, want %s", got, want)
	}
	if !f.watches[0].FromOldest || f.watches[0].JobId != 7 {
		t.Errorf("watch request %v", f.watches[0])
	}

	n := 0
	for range c.EventWatch(ctx, WatchOpts{JobID: 8}) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("a loop that stops after one event saw %d", n)
	}

	var errs []error
	for ev, err := range c.EventWatch(ctx, WatchOpts{Tenant: "beta"}) {
		if ev != nil {
			t.Errorf("event %+v from a refused watch", ev)
		}
		errs = append(errs, err)
	}
	if len(errs) != 1 || !errors.Is(errs[0], ErrPermissionDenied) {
		t.Errorf("a refused watch yielded %v, want one ErrPermissionDenied", errs)
	}
}

// TestJobListTyped: JobList walks the pages in Go types and sends the
// filters it was given.
func TestJobListTyped(t *testing.T) {
	f := serve(t, &fakeNode{
		list: func(n int, req *pb.ListJobsRequest) (*pb.ListJobsResponse, error) {
			if n == 1 {
				return &pb.ListJobsResponse{Jobs: []*pb.Job{{JobId: 1, State: "queued"}, {JobId: 2, State: "queued"}}, NextPageToken: "p2"}, nil
			}
			return &pb.ListJobsResponse{Jobs: []*pb.Job{{JobId: 3, State: "queued", Class: pb.Class_HIGH}}}, nil
		},
	})
	c := newClient(t, Options{}, f.addr)
	var ids []uint64
	for j, err := range c.JobList(context.Background(), JobListOpts{Tenant: "acme", State: JobQueued, Pool: "gpu", OldestFirst: true, PageSize: 2, Stale: true}) {
		if err != nil {
			t.Fatal(err)
		}
		if j.State != JobQueued {
			t.Errorf("job %d state %q", j.ID, j.State)
		}
		ids = append(ids, j.ID)
	}
	if fmt.Sprint(ids) != "[1 2 3]" || len(f.lists) != 2 {
		t.Fatalf("ids %v in %d calls", ids, len(f.lists))
	}
	first, second := f.lists[0], f.lists[1]
	if first.Tenant != "acme" || first.State != "queued" || first.Pool != "gpu" || !first.OldestFirst || first.PageSize != 2 || !first.GetRead().GetStale() || second.PageToken != "p2" {
		t.Errorf("requests %v, %v", first, second)
	}
}

// TestTenantUpdateRequest: a TenantUpdate sends exactly the fields it
// gives, zero values included, and leaves the others out; enums are
// checked before anything is sent.
func TestTenantUpdateRequest(t *testing.T) {
	u := TenantUpdate{Tier: Some(TierSilver), MaxQueued: Some(0), MaxInflightCPU: Some(90 * time.Second), AllowDeadlines: Some(false),
		GroupOrder: Some(GroupFair), MaxClass: Some(ClassHigh), Rate: Some(Rate{N: 100, Per: time.Minute, Burst: 20})}
	req, err := u.request("customer-4411")
	if err != nil {
		t.Fatal(err)
	}
	want := &pb.UpsertTenantRequest{Name: "customer-4411", Tier: pb.Tier_SILVER.Enum(), AllowDeadlines: proto.Bool(false),
		GroupOrder: pb.GroupOrder_GROUP_FAIR.Enum(), MaxClass: pb.Class_HIGH.Enum(), Rate: proto.String("100/1m0s"), RateBurst: proto.Uint32(20),
		Caps: &pb.CapsUpdate{MaxQueued: proto.Uint32(0), MaxInflightCpuMs: proto.Int64(90_000)}}
	if !proto.Equal(req, want) {
		t.Errorf("request %v\nwant    %v", req, want)
	}
	req, err = (&TenantUpdate{}).request("x")
	if err != nil || !proto.Equal(req, &pb.UpsertTenantRequest{Name: "x"}) {
		t.Errorf("an empty update: %v, %v", req, err)
	}
	req, err = (&TenantUpdate{Rate: Some(Rate{})}).request("x")
	if err != nil || req.GetRate() != "none" || req.RateBurst == nil || *req.RateBurst != 0 {
		t.Errorf("no rate: %v, %v", req, err)
	}
	for _, bad := range []TenantUpdate{{Tier: Some(Tier("platinum"))}, {GroupOrder: Some(GroupOrder("lifo"))}, {Rate: Some(Rate{N: 5})}, {MaxClass: Some(Class("urgent"))}} {
		if _, err := bad.request("x"); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
}

// TestTenantOf: a tenant read back in Go types.
func TestTenantOf(t *testing.T) {
	now := &pb.ClockNow{ClusterMs: 10_000, WallMs: 1_700_000_000_000}
	got := tenantOf(&pb.Tenant{Name: "acme", Tier: pb.Tier_GOLD, Caps: &pb.Caps{MaxRunning: 4, MaxInflightCpuMs: 2500, MaxQueued: 100},
		MaxClass: pb.Class_CLASS_UNSPECIFIED, GroupOrder: pb.GroupOrder_GROUP_ORDER_UNSPECIFIED, Rate: "60/1m0s", RateBurst: 5, RateEligibleAtMs: 12_000, Now: now})
	want := Tenant{Name: "acme", Tier: TierGold, Multiplier: 1, Caps: Caps{MaxRunning: 4, MaxInflightCPU: 2500 * time.Millisecond, MaxQueued: 100},
		MaxClass: ClassNormal, GroupOrder: GroupFIFO, Rate: Rate{N: 60, Per: time.Minute, Burst: 5}, RateEligibleAt: time.UnixMilli(1_700_000_002_000)}
	if !got.RateEligibleAt.Equal(want.RateEligibleAt) {
		t.Errorf("rate eligible at %v, want %v", got.RateEligibleAt, want.RateEligibleAt)
	}
	got.RateEligibleAt = want.RateEligibleAt
	if *got != want {
		t.Errorf("tenant %+v\nwant   %+v", *got, want)
	}
	if r := (Rate{N: 60, Per: time.Minute}); r.String() != "60/1m0s" || parseRate(r.String(), 0) != r || !parseRate("none", 0).IsZero() {
		t.Errorf("rate %s", r)
	}
}
