package client

import (
	"context"
	"fmt"
	"iter"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/internal/text"
	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
)

// MaxBatch is the most jobs one SubmitBatch request carries, and
// MaxBatchBytes the most bytes of jobs: SubmitBatch sends larger lists in
// chunks that keep under both, so that every request fits one message
// (MaxMessageBytes) with room to spare.
const (
	MaxBatch      = wire.MaxBatch
	MaxBatchBytes = wire.MaxBatchBytes
)

// batchChunks cuts jobs into the chunks SubmitBatch sends: at most
// MaxBatch jobs and MaxBatchBytes of them each; a job larger than that
// goes alone.
func batchChunks(jobs []*pb.SubmitRequest) [][2]int {
	var out [][2]int
	start, bytes := 0, 0
	for i, j := range jobs {
		n := proto.Size(j) + 8 // the field's tag and length
		if i > start && (i-start == MaxBatch || bytes+n > MaxBatchBytes) {
			out = append(out, [2]int{start, i})
			start, bytes = i, 0
		}
		bytes += n
	}
	if start < len(jobs) {
		out = append(out, [2]int{start, len(jobs)})
	}
	return out
}

// unary runs one call of the client service — method, a method of
// pb.ClientClient, with req — through Call and returns its answer.
func unary[Req, Resp any](ctx context.Context, c *Client, req Req, method func(pb.ClientClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	return call(ctx, c, pb.NewClientClient, req, method)
}

// call runs one call of any service — method, a method of the service's
// client that newClient makes, with req — through Call and returns its
// answer.
func call[C, Req, Resp any](ctx context.Context, c *Client, newClient func(grpc.ClientConnInterface) C, req Req,
	method func(C, context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	var resp Resp
	err := c.Call(ctx, func(ctx context.Context, cc grpc.ClientConnInterface) (err error) {
		resp, err = method(newClient(cc), ctx, req)
		return err
	})
	if err != nil {
		var zero Resp
		return zero, err
	}
	return resp, nil
}

// Submit submits one job and returns its ID. With an idempotency key it
// is retried on another node when a node fails (the same key and content
// returns the existing job, with Created false); without one it is sent
// once: an UNAVAILABLE error then means the job may or may not exist.
func (c *Client) Submit(ctx context.Context, req *pb.SubmitRequest) (*pb.SubmitResponse, error) {
	if err := tooLarge(req, proto.Size(req)); err != nil {
		return nil, err
	}
	return unary(ctx, c, req, pb.ClientClient.Submit)
}

// tooLarge refuses a job whose request (of size bytes) no server can take
// (over MaxMessageBytes): what the wire cannot carry is said here, with
// the size and the limit, as the permanent refusal it is — gRPC would
// refuse to send it with RESOURCE_EXHAUSTED, which asks for a retry. A
// job that fits a message but whose payload is over the cluster's
// max_payload_bytes is the cluster's to refuse (INVALID_ARGUMENT,
// TOO_LARGE).
func tooLarge(job *pb.SubmitRequest, size int) error {
	if size <= MaxMessageBytes {
		return nil
	}
	return &Error{Code: codes.InvalidArgument, Reason: text.ReasonTooLarge, Field: "payload", Message: fmt.Sprintf("payload: %d bytes: the job would be a %d-byte request, over the largest a server takes (%d bytes; the cluster's max_payload_bytes is lower still)",
		len(job.GetPayload()), size, MaxMessageBytes)}
}

// SubmitBatch submits jobs in requests of at most MaxBatch jobs and
// MaxBatchBytes, in order, and returns one result per job, in the order
// of jobs: a job the cluster refused has its refusal in Status
// (SubmitResultError makes it an *Error) and does not
// stop the others. A job too large for any request (over MaxMessageBytes
// with its request) is refused alone, in its Error, as INVALID_ARGUMENT
// naming its size and the limit.
// A chunk whose every job has an idempotency key is retried like a keyed
// Submit; one with an unkeyed job is sent once.
//
// If a request fails otherwise (the cluster could not be reached),
// SubmitBatch stops: it returns the results of the chunks before it (a
// prefix of jobs: results[i] is jobs[i]) and an error naming the jobs of
// the failed chunk, which wraps the *Error.
func (c *Client) SubmitBatch(ctx context.Context, jobs []*pb.SubmitRequest) ([]*pb.SubmitResult, error) {
	results := make([]*pb.SubmitResult, 0, len(jobs))
	for _, ch := range batchChunks(jobs) {
		start, end := ch[0], ch[1]
		req := &pb.SubmitBatchRequest{Jobs: jobs[start:end]}
		if end-start == 1 {
			if err := tooLarge(jobs[start], proto.Size(req)); err != nil {
				// One job too large to send: its own refusal, not the
				// batch's.
				results = append(results, refusedResult(err))
				continue
			}
		}
		resp, err := unary(ctx, c, req, pb.ClientClient.SubmitBatch)
		if err != nil && end-start == 1 && status.Code(err) == codes.ResourceExhausted && Reason(err) == "" {
			// One job a server refused as too large to take (gRPC's own
			// refusal of a message over its limit gives no reason).
			e := fromStatus(status.Convert(err))
			e.Reason, e.Field, e.st = text.ReasonTooLarge, "payload", nil
			results = append(results, refusedResult(e))
			continue
		}
		if err != nil {
			return results, fmt.Errorf("jobs %d..%d of %d not submitted: %w", start, end-1, len(jobs), err)
		}
		if len(resp.Results) != end-start {
			return results, fmt.Errorf("jobs %d..%d of %d: %d results for %d jobs", start, end-1, len(jobs), len(resp.Results), end-start)
		}
		results = append(results, resp.Results...)
	}
	return results, nil
}

// GetJob returns a job of the tenant (NOT_FOUND for a job of another
// tenant, exactly as for a missing one).
func (c *Client) GetJob(ctx context.Context, req *pb.GetJobRequest) (*pb.Job, error) {
	return unary(ctx, c, req, pb.ClientClient.GetJob)
}

// ListJobs returns one page of the tenant's jobs, in ID order; its
// NextPageToken, if not empty, asks for the next page. Jobs walks every
// page.
func (c *Client) ListJobs(ctx context.Context, req *pb.ListJobsRequest) (*pb.ListJobsResponse, error) {
	return unary(ctx, c, req, pb.ClientClient.ListJobs)
}

// Jobs yields the tenant's jobs that req selects, page after page from
// req.PageToken, until the last page or the loop stops; a failure is
// yielded once, with a nil job, and ends it. Each page is one ListJobs
// call (bounded by Options.CallTimeout).
func (c *Client) Jobs(ctx context.Context, req *pb.ListJobsRequest) iter.Seq2[*pb.Job, error] {
	return pages(req.PageToken, func(token string) (*pb.ListJobsResponse, error) {
		return c.ListJobs(ctx, &pb.ListJobsRequest{Tenant: req.Tenant, State: req.State, PageSize: req.PageSize, PageToken: token,
			Read: req.Read, IncludePayload: req.IncludePayload, NewestFirst: req.NewestFirst, OldestFirst: req.OldestFirst, Pool: req.Pool})
	}, (*pb.ListJobsResponse).GetJobs, (*pb.ListJobsResponse).GetNextPageToken)
}

// pages yields the items of a listing page after page, from the page of
// token on, until the last page (next gives ""), the loop stops, or list
// fails: its error is yielded once, with a zero item, and ends it.
func pages[Item, Page any](token string, list func(token string) (Page, error), items func(Page) []Item, next func(Page) string) iter.Seq2[Item, error] {
	return func(yield func(Item, error) bool) {
		for token := token; ; {
			p, err := list(token)
			if err != nil {
				var zero Item
				yield(zero, err)
				return
			}
			for _, it := range items(p) {
				if !yield(it, nil) {
					return
				}
			}
			if token = next(p); token == "" {
				return
			}
		}
	}
}

// CancelJob cancels a job of the tenant. It is sent once: a second
// cancel answers differently.
func (c *Client) CancelJob(ctx context.Context, req *pb.CancelJobRequest) (*pb.CancelJobResponse, error) {
	return unary(ctx, c, req, pb.ClientClient.CancelJob)
}

// TenantUsage returns the tenant's running and queued jobs, billed CPU,
// weight and counters.
func (c *Client) TenantUsage(ctx context.Context, req *pb.TenantUsageRequest) (*pb.TenantUsageResponse, error) {
	return unary(ctx, c, req, pb.ClientClient.TenantUsage)
}

// ExplainJob says why a job of the tenant is where it is (queued behind
// others, capped, paused, running ...).
func (c *Client) ExplainJob(ctx context.Context, req *pb.ExplainJobRequest) (*pb.ExplainJobResponse, error) {
	return unary(ctx, c, req, pb.ClientClient.ExplainJob)
}

// RunJobNow releases a scheduled job of the tenant at once. It is sent
// once: a second run-now of a job already released is refused.
func (c *Client) RunJobNow(ctx context.Context, req *pb.RunJobNowRequest) (*pb.RunJobNowResponse, error) {
	return unary(ctx, c, req, pb.ClientClient.RunJobNow)
}

// Redrive moves dead letters of a tenant back to queued (one call: at
// most 10,000 jobs; follow NextPageToken). With a RequestKey it is
// retried on another node when a node fails.
func (c *Client) Redrive(ctx context.Context, req *pb.BulkJobsRequest) (*pb.BulkJobsResponse, error) {
	return unary(ctx, c, req, pb.ClientClient.Redrive)
}

// CancelJobs cancels a tenant's jobs by IDs or a filter (one call).
func (c *Client) CancelJobs(ctx context.Context, req *pb.BulkJobsRequest) (*pb.BulkJobsResponse, error) {
	return unary(ctx, c, req, pb.ClientClient.CancelJobs)
}

// PurgeJobs deletes a tenant's ended jobs by IDs or a filter (one call).
func (c *Client) PurgeJobs(ctx context.Context, req *pb.BulkJobsRequest) (*pb.BulkJobsResponse, error) {
	return unary(ctx, c, req, pb.ClientClient.PurgeJobs)
}

// refusedResult is a batch result that err refused before it was sent.
func refusedResult(err error) *pb.SubmitResult {
	r := &pb.SubmitResult{}
	wire.SetRefusal(r, err)
	return r
}
