package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
	"google.golang.org/protobuf/proto"
)

// A program connects to any nodes of the cluster with a client token,
// submits a job with an idempotency key (safe to retry), and follows it to
// its end.
func Example() {
	c, err := client.New([]string{"10.0.0.1:7400", "10.0.0.2:7400", "10.0.0.3:7400"}, client.Options{Token: "acme-client-token"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	key := "invoice-2291"
	resp, err := c.Submit(ctx, &pb.SubmitRequest{
		IdempotencyKey: &key,
		JobType:        "render",
		Size:           pb.Size_MD,
		EstCostMs:      90_000,
		Payload:        []byte(`{"argv": ["render", "--invoice", "2291"]}`),
		Form:           pb.JobForm_COMMAND, // a command line: for a worker that runs commands
	})
	switch {
	case errors.Is(err, client.ErrPermissionDenied):
		log.Fatalf("this token may not submit for the tenant: %v", err)
	case err != nil:
		log.Fatal(err)
	}

	// The job's events from its first, until it ends; across a node's
	// failure the watch resumes after the last event printed.
	err = c.Watch(ctx, &pb.WatchEventsRequest{JobId: resp.JobId, FromOldest: true}, func(ev *pb.Event) error {
		fmt.Printf("%d job %d %s\n", ev.Seq, ev.JobId, ev.Kind)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	job, err := c.GetJob(ctx, &pb.GetJobRequest{JobId: resp.JobId})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("job", job.JobId, job.State, "exit code", job.ExitCode)
}

// SubmitBatch sends any number of jobs, 1,000 per request, with one
// result per job; SubmitResultError types a refused job's refusal.
func ExampleClient_SubmitBatch() {
	c, err := client.New([]string{"127.0.0.1:7400"}, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	var jobs []*pb.SubmitRequest
	for i := range 2500 {
		key := fmt.Sprintf("thumb-%d", i)
		jobs = append(jobs, &pb.SubmitRequest{Tenant: "acme", IdempotencyKey: &key, Size: pb.Size_SM, EstCostMs: 500,
			Payload: fmt.Appendf(nil, `{"argv": ["thumb", "%d"]}`, i), Form: pb.JobForm_COMMAND})
	}
	results, err := c.SubmitBatch(context.Background(), jobs)
	if err != nil {
		// The jobs before the failed request are in results.
		log.Fatalf("%d submitted: %v", len(results), err)
	}
	for i, r := range results {
		if err := client.SubmitResultError(r); err != nil {
			fmt.Printf("job %d refused: %v\n", i, err)
		}
	}
}

// A refusal of one job of a batch keeps the server's message, matches
// its code's and its reason's sentinels, and names the field at fault.
func ExampleSubmitResultError() {
	c, err := client.New([]string{"127.0.0.1:7400"}, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	results, err := c.SubmitBatch(context.Background(), []*pb.SubmitRequest{{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 500}})
	if err != nil {
		log.Fatal(err)
	}
	var e *client.Error
	if err := client.SubmitResultError(results[0]); errors.As(err, &e) {
		switch {
		case errors.Is(err, client.ErrQuotaExceeded):
			fmt.Println("the tenant is at its quota:", e.Message)
		case errors.Is(err, client.ErrRateLimited):
			fmt.Println("try again in", e.RetryAfter)
		default:
			fmt.Printf("refused (%s, field %q): %s\n", e.Reason, e.Field, e.Message)
		}
	}
}

// A SaaS's sign-up, with an admin token: the customer's tenant is made
// with its plan's tier and quota, and given a subscription in the gpu
// pool. Upgrading its plan later changes the tier alone: what an upsert
// leaves out keeps its value. Leaving, it is deleted (once its jobs are
// done).
func ExampleClient_UpsertTenant() {
	c, err := client.New([]string{"10.0.0.1:7400", "10.0.0.2:7400"}, client.Options{Token: "admin-token"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	t, err := c.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "customer-4411", Tier: pb.Tier_SILVER.Enum(),
		Caps: &pb.CapsUpdate{MaxQueued: proto.Uint32(10_000)}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("tenant", t.Name, "created", t.Created)
	if _, err := c.Raw().SubscriptionSet(ctx, &pb.SubscriptionSetRequest{Tenant: "customer-4411", Pool: "gpu", Burst: proto.Uint32(2)}); err != nil {
		log.Fatal(err)
	}

	// An upgrade: the tier changes, the quota stays.
	if _, err := c.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "customer-4411", Tier: pb.Tier_GOLD.Enum()}); err != nil {
		log.Fatal(err)
	}
	t, err = c.GetTenant(ctx, &pb.GetTenantRequest{Name: "customer-4411"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.Tier, t.Caps.GetMaxQueued())

	// Leaving.
	if _, err := c.Raw().SubscriptionDelete(ctx, &pb.SubscriptionDeleteRequest{Tenant: "customer-4411", Pool: "gpu"}); err != nil {
		log.Fatal(err)
	}
	if _, err := c.DeleteTenant(ctx, &pb.DeleteTenantRequest{Name: "customer-4411"}); errors.Is(err, client.ErrFailedPrecondition) {
		log.Print("it still has jobs: cancel or wait for them first")
	}
}
