// Package client is the Go client of a barista cluster: the client API
// (insert, read, list, cancel, watch, explain, usage, redrive) and the
// admin calls of tenants and pools over gRPC, in Go types, for programs
// that import it and for the barista command line.
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
// Insert a job: its arguments are a Go type whose Kind names the job's
// kind, and whose JSON is its payload; an idempotency key makes the
// insert safe to send again (the same key finds the same job). Insert
// returns the job from the submit's own answer:
//
//	type Render struct{ Invoice int }
//	func (Render) Kind() string { return "render" }
//
//	r, err := c.Insert(ctx, Render{Invoice: 2291}, &client.InsertOpts{Key: "invoice-2291",
//		Size: client.SizeMD, Cost: 90 * time.Second})
//
// Insert and InsertMany submit function jobs of their kind, which only a
// worker that registered the kind runs (the package worker's Kinds).
//
// Follow its events until it ends (with JobID set, the events end after
// the job's last), then read it:
//
//	for ev, err := range c.EventWatch(ctx, client.WatchOpts{JobID: r.Job.ID, FromOldest: true}) {
//		if err != nil { ... }
//		log.Printf("job %d: %s", ev.JobID, ev.Kind)
//	}
//	job, err := c.JobGet(ctx, "", r.Job.ID)
//
// List the tenant's jobs (JobList walks every page), ask why one waits,
// and cancel it:
//
//	for j, err := range c.JobList(ctx, client.JobListOpts{State: client.JobQueued}) { ... }
//	why, err := c.JobExplain(ctx, "", id) // why.Reason, why.Text: one readable paragraph
//	_, err = c.JobCancel(ctx, "", id)
//
// With an admin token, create or change a tenant (TenantUpsert sets what
// its TenantUpdate gives, and leaves the rest), and its pools'
// subscriptions:
//
//	t, err := admin.TenantUpsert(ctx, "customer-4411", client.TenantUpdate{
//		Tier: client.Some(client.TierSilver), MaxQueued: client.Some(10_000)})
//
// # The protobuf API
//
// The calls above are typed: enums are Go constants, durations and times
// Go types, and they are named noun first (JobGet, TenantUpsert,
// EventWatch ...). c.Raw() is the same API in the protocol's messages
// (package proto), every call by its gRPC name, for what the typed calls
// do not cover (the bulk calls, groups, kind policies, usage) and for
// code written against the messages. Send dead letters (failed, timed
// out, expired or cancelled jobs) back to their queue, by IDs or by a
// filter, following NextPageToken:
//
//	resp, err := c.Raw().Redrive(ctx, &pb.BulkJobsRequest{Filter: &pb.JobFilter{States: []string{"failed"}}})
//
// Raw().Submit sends a request as the caller built it: a Form left unset
// makes a job any worker may be given, as before kinds. For
// compatibility the Client keeps the methods of Raw whose names its typed
// API does not take (Submit, GetJob, Watch ...).
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
