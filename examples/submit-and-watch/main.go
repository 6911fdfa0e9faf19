// Command submit-and-watch is an example program built on the barista Go
// client (package client): it connects to a cluster through any of its
// nodes, submits a few jobs with idempotency keys, and follows each one to
// its end, printing its events.
//
//	submit-and-watch --server 10.0.0.1:7400,10.0.0.2:7400 --tenant acme --jobs 3
//
// Run it twice with the same --key-prefix and the second run submits
// nothing new: the keys name the same jobs, which it follows again. It
// exits 0 when every job completed, 1 otherwise.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
)

func main() {
	os.Exit(run())
}

func run() int {
	servers := flag.String("server", env("BARISTA_ADDR", "127.0.0.1:7400"), "gRPC `ADDR[,ADDR...]` of any nodes")
	token := flag.String("token", os.Getenv("BARISTA_TOKEN"), "client bearer `TOKEN` (pinned to a tenant)")
	tlsCA := flag.String("tls-ca", os.Getenv("BARISTA_TLS_CA"), "verify the nodes with this CA `FILE` (enables TLS)")
	insecureGRPC := flag.Bool("insecure-grpc", false, "send the token without TLS to nodes that are not on this machine (refused otherwise)")
	tenant := flag.String("tenant", os.Getenv("BARISTA_TENANT"), "`TENANT` (may be left out with a client token)")
	jobs := flag.Int("jobs", 3, "number of jobs to submit (`N`)")
	prefix := flag.String("key-prefix", "example", "idempotency keys are `PREFIX`-1, PREFIX-2, ...")
	flag.Parse()
	if *jobs < 1 || *jobs > 1000 {
		fmt.Fprintln(os.Stderr, "--jobs: want 1..1000")
		return 2
	}

	opts := client.Options{Token: *token, InsecureGRPC: *insecureGRPC}
	if *tlsCA != "" {
		cfg, err := client.TLSConfig(*tlsCA, "", "")
		if err != nil {
			fmt.Fprintln(os.Stderr, "--tls-ca:", err)
			return 2
		}
		opts.TLS = cfg
	}
	c, err := client.New(strings.Split(*servers, ","), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer c.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	// Submit: each job runs a command on a worker that runs command lines
	// (barista worker): its form says so, and no worker of functions is
	// given it. The keys make the submits safe to retry, so the client
	// retries them across a node's failure, and a second run finds the
	// same jobs.
	ids := make([]uint64, *jobs)
	for i := range ids {
		key := fmt.Sprintf("%s-%d", *prefix, i+1)
		payload, _ := json.Marshal(map[string]any{"argv": []string{"echo", "hello from job", key}})
		resp, err := c.Submit(ctx, &pb.SubmitRequest{Tenant: *tenant, IdempotencyKey: &key, JobType: "example",
			Size: pb.Size_SM, EstCostMs: 100, Payload: payload, Form: pb.JobForm_COMMAND})
		switch {
		case errors.Is(err, client.ErrPermissionDenied), errors.Is(err, client.ErrUnauthenticated):
			fmt.Fprintln(os.Stderr, "the cluster refused the token:", err)
			return 1
		case err != nil:
			fmt.Fprintln(os.Stderr, "submit:", err)
			return 1
		}
		ids[i] = resp.JobId
		verb := "submitted"
		if !resp.Created {
			verb = "already submitted"
		}
		fmt.Printf("job %d %s (key %s)\n", resp.JobId, verb, key)
	}

	// Watch: one stream per job, from its first event to its last; a
	// stream cut by a node's failure resumes on another node after the
	// last event printed.
	var mu sync.Mutex
	states := map[string]int{}
	var wg sync.WaitGroup
	var failed error
	for _, id := range ids {
		wg.Go(func() {
			err := c.Watch(ctx, &pb.WatchEventsRequest{Tenant: *tenant, JobId: id, FromOldest: true}, func(ev *pb.Event) error {
				mu.Lock()
				defer mu.Unlock()
				line := fmt.Sprintf("job %d: %s", ev.JobId, ev.Kind)
				if ev.WorkerId != "" {
					line += " on " + ev.WorkerId
				}
				if ev.Kind == "completed" || ev.Kind == "failed" {
					line += fmt.Sprintf(" (exit code %d)", ev.ExitCode)
				}
				fmt.Println(line)
				return nil
			})
			if err == nil {
				// The watch ended with the job: read its final state.
				var j *pb.Job
				if j, err = c.GetJob(ctx, &pb.GetJobRequest{Tenant: *tenant, JobId: id}); err == nil {
					mu.Lock()
					states[j.State]++
					mu.Unlock()
					return
				}
			}
			mu.Lock()
			failed = fmt.Errorf("job %d: %w", id, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	if failed != nil {
		fmt.Fprintln(os.Stderr, failed)
		return 1
	}
	fmt.Printf("%d jobs: %d completed, %d failed, %d cancelled, %d timed out\n",
		len(ids), states["completed"], states["failed"], states["cancelled"], states["timed_out"])
	if states["completed"] != len(ids) {
		return 1
	}
	return 0
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
