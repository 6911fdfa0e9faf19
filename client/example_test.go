package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
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
// result per job; ResultError types a refused job's reason.
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
			Payload: fmt.Appendf(nil, `{"argv": ["thumb", "%d"]}`, i)})
	}
	results, err := c.SubmitBatch(context.Background(), jobs)
	if err != nil {
		// The jobs before the failed request are in results.
		log.Fatalf("%d submitted: %v", len(results), err)
	}
	for i, r := range results {
		if err := client.ResultError(r.Error); err != nil {
			fmt.Printf("job %d refused: %v\n", i, err)
		}
	}
}

// A refusal keeps the server's message and matches its sentinel.
func ExampleResultError() {
	err := client.ResultError(`RESOURCE_EXHAUSTED: payload: 5242880 bytes, over the limit of 1048576`)
	fmt.Println(errors.Is(err, client.ErrResourceExhausted))
	fmt.Println(errors.Is(err, client.ErrInvalid))
	fmt.Println(err)
	// Output:
	// true
	// false
	// RESOURCE_EXHAUSTED: payload: 5242880 bytes, over the limit of 1048576
}
