// Package client is the Go client of a barista cluster: the client API
// (submit, read, list, cancel, watch, usage, explain, redrive) over gRPC,
// for programs that import it and for the barista command line.
//
//	import "github.com/baristahq/barista/client"
//
// # Quick start
//
// Dial any nodes of the cluster (their gRPC addresses) with the tenant's
// client token; the client picks a node that answers, and a follower
// forwards writes to the leader, so any node serves any call:
//
//	c, err := client.New([]string{"10.0.0.1:7400", "10.0.0.2:7400", "10.0.0.3:7400"},
//		client.Options{Token: os.Getenv("BARISTA_TOKEN"), TLS: tlsCfg}) // tlsCfg: client.TLSConfig(caFile, "", "")
//	if err != nil { ... }
//	defer c.Close()
//
// Submit a job; an idempotency key makes the submit safe to send again
// (the same key finds the same job). This one is a command line, which a
// command worker ("barista worker") runs: its Form says so, and only a
// worker that runs commands is given it:
//
//	key := "invoice-2291"
//	sub, err := c.Submit(ctx, &pb.SubmitRequest{IdempotencyKey: &key, JobType: "render",
//		Size: pb.Size_MD, EstCostMs: 90_000, Payload: []byte(`{"argv": ["render", "2291"]}`),
//		Form: pb.JobForm_COMMAND})
//
// Submit sends the request as the caller built it: a Form left unset
// makes a job any worker may be given, as before kinds. Insert and
// InsertMany submit typed arguments (JobArgs) as function jobs of their
// kind, which only a worker that registered the kind runs (the package
// worker's Kinds).
//
// Watch its events until it ends (with JobId set, the stream ends after
// the job's terminal event), then read it:
//
//	err = c.Watch(ctx, &pb.WatchEventsRequest{JobId: sub.JobId, FromOldest: true}, func(ev *pb.Event) error {
//		log.Printf("job %d: %s", ev.JobId, ev.Kind)
//		return nil
//	})
//	job, err := c.GetJob(ctx, &pb.GetJobRequest{JobId: sub.JobId})
//
// List the tenant's jobs (Jobs walks every page), ask why one waits, and
// cancel it:
//
//	for j, err := range c.Jobs(ctx, &pb.ListJobsRequest{State: "queued"}) { ... }
//	why, err := c.ExplainJob(ctx, &pb.ExplainJobRequest{JobId: id}) // why.Text: one readable paragraph
//	_, err = c.CancelJob(ctx, &pb.CancelJobRequest{JobId: id})
//
// Send dead letters (failed, timed out, expired or cancelled jobs) back to
// their queue, by IDs or by a filter, following NextPageToken:
//
//	resp, err := c.Redrive(ctx, &pb.BulkJobsRequest{Filter: &pb.JobFilter{States: []string{"failed"}}})
//
// A client token acts on its own tenant (Tenant may stay empty); an admin
// token names the tenant in each request.
//
// # Errors
//
// Errors carry the server's gRPC code and message (an *Error) and match
// the package's sentinels with errors.Is, one per code:
//
//	switch {
//	case errors.Is(err, client.ErrNotFound):          // no such job of this tenant
//	case errors.Is(err, client.ErrPermissionDenied):  // the token may not do this
//	case errors.Is(err, client.ErrResourceExhausted): // a quota or a rate limit; RetryDelay says when
//	}
//
// ResultError types the reason of one refused job of a SubmitBatch the
// same way.
//
// # Retries and failover
//
// A call goes out only over a connection that is ready: a node that is
// down is skipped at once and the next one of the list is asked. A call
// that failed after it went out (UNAVAILABLE, DEADLINE_EXCEEDED) is sent
// again, to the next node, in rounds with backoff until its deadline, only
// when repeating it is safe: reads, submits with an idempotency key,
// batches whose every job has a key, and the admin upserts. A submit
// without a key or a cancel is never sent twice; the caller gets the
// error and decides (a node that refused the call as "no longer the
// leader" did nothing, and is always retried).
//
// Watch follows a tenant's events across reconnects and nodes, resuming
// after the last event it delivered: no gap and no duplicate.
//
// Every call takes a context; a Client is safe for concurrent use and is
// closed with Close. The package imports no server code of barista: only
// its protocol (package proto).
package client
