// Package client is the Go client of a barista cluster: the client API
// (submit, read, list, cancel, watch, usage, explain) over gRPC, for
// programs that import it and for the barista command line.
//
// A Client is made from the gRPC addresses of any of the cluster's nodes;
// a follower forwards writes to the leader, so any node serves any call.
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
// Errors carry the server's gRPC code and message and match the package's
// sentinels with errors.Is:
//
//	if errors.Is(err, client.ErrNotFound) { ... }
//
// Every call takes a context; a Client is safe for concurrent use and is
// closed with Close.
package client
