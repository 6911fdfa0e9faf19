package rpc

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/worker"
)

// TestClientMessageLimit: the client package accepts the messages a node
// sends.
func TestClientMessageLimit(t *testing.T) {
	if client.MaxMessageBytes != fsm.MaxMessageBytes {
		t.Fatalf("client.MaxMessageBytes %d, fsm.MaxMessageBytes %d", client.MaxMessageBytes, fsm.MaxMessageBytes)
	}
}

// TestWatchHeaderGivesTheCursor: an accepted watch's header says the seq
// it starts at: the next new event for from_seq 0, the oldest retained
// one for from_oldest, from_seq itself otherwise.
func TestWatchHeaderGivesTheCursor(t *testing.T) {
	n := startTestNode(t, nil, nil)
	n.submit()
	n.submit()
	first, next := n.node.FSM.Events(^uint64(0), func(*fsm.Event) bool { return false })
	if first != 1 || next < 3 {
		t.Fatalf("events %d..%d", first, next)
	}
	cc := n.dial("")
	for _, tc := range []struct {
		req  *pb.WatchEventsRequest
		want uint64
	}{
		{&pb.WatchEventsRequest{Tenant: "acme"}, next},
		{&pb.WatchEventsRequest{Tenant: "acme", FromOldest: true, FromSeq: 2}, first},
		{&pb.WatchEventsRequest{Tenant: "acme", FromSeq: 2}, 2},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := pb.NewClientClient(cc).WatchEvents(ctx, tc.req)
		if err != nil {
			t.Fatal(err)
		}
		md, err := s.Header()
		cancel()
		if err != nil || !slices.Equal(md.Get(wire.HeaderWatchCursor), []string{strconv.FormatUint(tc.want, 10)}) {
			t.Errorf("%v: header %v (%v), want cursor %d", tc.req, md, err, tc.want)
		}
	}
}

// TestClientPackageOnANode: the client package against a real node with
// tokens: a keyed submit twice makes one job, reads and usage answer,
// refusals are typed, and a job's watch ends when a worker completes it.
func TestClientPackageOnANode(t *testing.T) {
	const acme = "acme-secret-000001"
	n := startTestNode(t, []auth.Token{{Secret: testAdmin, Role: auth.RoleAdmin}, {Secret: testWorker, Role: auth.RoleWorker},
		{Secret: acme, Role: auth.RoleClient, Tenant: "acme"}}, nil)
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD}}})
	c, err := client.New([]string{n.addr}, client.Options{Token: acme})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k := "order-1"
	req := &pb.SubmitRequest{IdempotencyKey: &k, JobType: "thumb", Size: pb.Size_MD, EstCostMs: 1000, Payload: []byte(`{"argv":["true"]}`)}
	a, err := c.Submit(ctx, req)
	if err != nil || !a.Created {
		t.Fatalf("submit: %v %v", a, err)
	}
	b, err := c.Submit(ctx, req)
	if err != nil || b.Created || b.JobId != a.JobId {
		t.Fatalf("same key again: %v %v, want job %d not created", b, err, a.JobId)
	}
	j, err := c.GetJob(ctx, &pb.GetJobRequest{JobId: a.JobId})
	if err != nil || j.State != "queued" || j.Tenant != "acme" || j.IdempotencyKey != k {
		t.Fatalf("get: %v %v", j, err)
	}
	u, err := c.TenantUsage(ctx, &pb.TenantUsageRequest{})
	if err != nil || u.Queued != 1 || u.Submitted != 1 {
		t.Fatalf("usage: %v %v", u, err)
	}
	_, err = c.GetJob(ctx, &pb.GetJobRequest{JobId: a.JobId + 100})
	if !errors.Is(err, client.ErrNotFound) {
		t.Errorf("missing job: %v", err)
	}
	_, err = c.GetJob(ctx, &pb.GetJobRequest{Tenant: "beta", JobId: a.JobId})
	if !errors.Is(err, client.ErrPermissionDenied) {
		t.Errorf("other tenant: %v", err)
	}
	other, err := client.New([]string{n.addr}, client.Options{Token: "not-a-token-at-all"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.GetJob(ctx, &pb.GetJobRequest{JobId: a.JobId}); !errors.Is(err, client.ErrUnauthenticated) || err.Error() != "UNAUTHENTICATED: unknown token" {
		t.Errorf("unknown token: %v", err)
	}

	n.startAgent("w1", testWorker, fixedRunner{worker.Result{CPU: 40 * time.Millisecond}}, nil)
	var kinds []string
	err = c.Watch(ctx, &pb.WatchEventsRequest{JobId: a.JobId, FromOldest: true}, func(ev *pb.Event) error {
		kinds = append(kinds, ev.Kind)
		return nil
	})
	if err != nil || !slices.Equal(kinds, []string{"queued", "assigned", "started", "completed"}) {
		t.Fatalf("watch: %v, events %v", err, kinds)
	}
}

// TestWatchOfARedrivenJobEndsAtItsCurrentEnding: a job cancelled and
// redriven has an earlier ending in its history; a watch of the job from
// its first event goes past it (redriven, queued) and ends only at the
// job's current ending.
func TestWatchOfARedrivenJobEndsAtItsCurrentEnding(t *testing.T) {
	n := startTestNode(t, nil, nil)
	id := n.submit()
	cancel := &clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: "acme", Job: uint64(id)}}}
	n.propose(cancel)
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Redrive{Redrive: &clusterpb.BulkJobs{Tenant: "acme", Jobs: []uint64{uint64(id)}}}})
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	s, err := pb.NewClientClient(n.dial("")).WatchEvents(ctx, &pb.WatchEventsRequest{Tenant: "acme", JobId: uint64(id), FromOldest: true})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for len(kinds) < 4 {
		ev, err := s.Recv()
		if err != nil {
			t.Fatalf("after %v: %v (the watch ended at the ending the job left)", kinds, err)
		}
		kinds = append(kinds, ev.Kind)
	}
	if want := []string{"queued", "cancelled", "redriven", "queued"}; !slices.Equal(kinds, want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	n.propose(cancel)
	ev, err := s.Recv()
	if err != nil || ev.Kind != "cancelled" {
		t.Fatalf("the second cancel: %v %v", ev, err)
	}
	if ev, err := s.Recv(); err != io.EOF {
		t.Fatalf("after the job's current ending: %v %v, want the end of the stream", ev, err)
	}
}
