package client

import (
	"context"
	"iter"

	"google.golang.org/grpc"

	pb "github.com/baristahq/barista/proto"
)

// Raw is the protobuf API of a Client: every call of the cluster's
// client and admin services by its gRPC name, taking and returning the
// messages of package proto (pb), with the Client's failover and retry
// rules. The typed API — Insert, JobGet, JobList, EventWatch,
// TenantUpsert ... — is the way; Raw is the escape for what it does not
// cover (the bulk calls, groups, kind policies, evidence, any field the
// typed calls leave out) and for code written against the protobuf
// messages. For compatibility the Client keeps the methods of Raw whose
// names its typed API does not take (Client.Submit is Raw().Submit).
type Raw struct{ c *Client }

// Raw returns the protobuf API of c.
func (c *Client) Raw() Raw { return Raw{c} }

// Call runs fn through the nodes (Client.Call).
func (r Raw) Call(ctx context.Context, fn func(ctx context.Context, cc grpc.ClientConnInterface) error) error {
	return r.c.Call(ctx, fn)
}

// Stream runs fn on a node's stream (Client.Stream).
func (r Raw) Stream(ctx context.Context, fn func(ctx context.Context, cc grpc.ClientConnInterface) error) error {
	return r.c.Stream(ctx, fn)
}

// Submit submits one job (Client.Submit).
func (r Raw) Submit(ctx context.Context, req *pb.SubmitRequest) (*pb.SubmitResponse, error) {
	return r.c.Submit(ctx, req)
}

// SubmitBatch submits jobs in chunks (Client.SubmitBatch).
func (r Raw) SubmitBatch(ctx context.Context, jobs []*pb.SubmitRequest) ([]*pb.SubmitResult, error) {
	return r.c.SubmitBatch(ctx, jobs)
}

// GetJob returns a job of the tenant; typed: JobGet.
func (r Raw) GetJob(ctx context.Context, req *pb.GetJobRequest) (*pb.Job, error) {
	return r.c.GetJob(ctx, req)
}

// ListJobs returns one page of the tenant's jobs; typed: JobList.
func (r Raw) ListJobs(ctx context.Context, req *pb.ListJobsRequest) (*pb.ListJobsResponse, error) {
	return r.c.ListJobs(ctx, req)
}

// Jobs yields the tenant's jobs page after page; typed: JobList.
func (r Raw) Jobs(ctx context.Context, req *pb.ListJobsRequest) iter.Seq2[*pb.Job, error] {
	return r.c.Jobs(ctx, req)
}

// CancelJob cancels a job of the tenant; typed: JobCancel.
func (r Raw) CancelJob(ctx context.Context, req *pb.CancelJobRequest) (*pb.CancelJobResponse, error) {
	return r.c.CancelJob(ctx, req)
}

// ExplainJob says why a job is where it is; typed: JobExplain.
func (r Raw) ExplainJob(ctx context.Context, req *pb.ExplainJobRequest) (*pb.ExplainJobResponse, error) {
	return r.c.ExplainJob(ctx, req)
}

// RunJobNow releases a scheduled job at once; typed: JobRunNow.
func (r Raw) RunJobNow(ctx context.Context, req *pb.RunJobNowRequest) (*pb.RunJobNowResponse, error) {
	return r.c.RunJobNow(ctx, req)
}

// Watch streams the events req selects to fn; typed: EventWatch.
func (r Raw) Watch(ctx context.Context, req *pb.WatchEventsRequest, fn func(*pb.Event) error) error {
	return r.c.Watch(ctx, req, fn)
}

// TenantUsage returns the tenant's running and queued jobs, billed CPU,
// weight and counters.
func (r Raw) TenantUsage(ctx context.Context, req *pb.TenantUsageRequest) (*pb.TenantUsageResponse, error) {
	return r.c.TenantUsage(ctx, req)
}

// Redrive moves dead letters back to queued (Client.Redrive).
func (r Raw) Redrive(ctx context.Context, req *pb.BulkJobsRequest) (*pb.BulkJobsResponse, error) {
	return r.c.Redrive(ctx, req)
}

// CancelJobs cancels a tenant's jobs by IDs or a filter.
func (r Raw) CancelJobs(ctx context.Context, req *pb.BulkJobsRequest) (*pb.BulkJobsResponse, error) {
	return r.c.CancelJobs(ctx, req)
}

// PurgeJobs deletes a tenant's ended jobs by IDs or a filter.
func (r Raw) PurgeJobs(ctx context.Context, req *pb.BulkJobsRequest) (*pb.BulkJobsResponse, error) {
	return r.c.PurgeJobs(ctx, req)
}

// UpsertTenant creates or changes a tenant; typed: TenantUpsert.
func (r Raw) UpsertTenant(ctx context.Context, req *pb.UpsertTenantRequest) (*pb.Tenant, error) {
	return r.c.UpsertTenant(ctx, req)
}

// GetTenant returns one tenant's settings; typed: TenantGet.
func (r Raw) GetTenant(ctx context.Context, req *pb.GetTenantRequest) (*pb.Tenant, error) {
	return r.c.GetTenant(ctx, req)
}

// ListTenants returns every tenant; typed: TenantList.
func (r Raw) ListTenants(ctx context.Context, req *pb.ListTenantsRequest) (*pb.ListTenantsResponse, error) {
	return r.c.ListTenants(ctx, req)
}

// DeleteTenant deletes a tenant without jobs; typed: TenantDelete.
func (r Raw) DeleteTenant(ctx context.Context, req *pb.DeleteTenantRequest) (*pb.DeleteTenantResponse, error) {
	return r.c.DeleteTenant(ctx, req)
}

// PoolSet creates a pool or changes one; fields left out keep their
// value. It sets a value, so it is retried on another node like a read.
// Typed: Client.PoolSet.
func (r Raw) PoolSet(ctx context.Context, req *pb.PoolSetRequest) (*pb.Pool, error) {
	return call(ctx, r.c, pb.NewAdminClient, req, pb.AdminClient.PoolSet)
}

// PoolGet returns one pool: its settings, its jobs and its connected
// workers. Typed: Client.PoolGet.
func (r Raw) PoolGet(ctx context.Context, req *pb.PoolGetRequest) (*pb.Pool, error) {
	return call(ctx, r.c, pb.NewAdminClient, req, pb.AdminClient.PoolGet)
}

// PoolList returns every pool by name. Typed: Client.PoolList.
func (r Raw) PoolList(ctx context.Context, req *pb.PoolListRequest) (*pb.PoolListResponse, error) {
	return call(ctx, r.c, pb.NewAdminClient, req, pb.AdminClient.PoolList)
}

// PoolDelete deletes a pool without jobs and connected workers. It is
// sent once: a second delete answers NOT_FOUND. Typed: Client.PoolDelete.
func (r Raw) PoolDelete(ctx context.Context, req *pb.PoolDeleteRequest) (*pb.PoolDeleteResponse, error) {
	return call(ctx, r.c, pb.NewAdminClient, req, pb.AdminClient.PoolDelete)
}

// SubscriptionSet sets a tenant's subscription in a pool (Burst is
// required). It sets a value, so it is retried on another node. Typed:
// Client.SubscriptionSet.
func (r Raw) SubscriptionSet(ctx context.Context, req *pb.SubscriptionSetRequest) (*pb.SubscriptionSetResponse, error) {
	return call(ctx, r.c, pb.NewAdminClient, req, pb.AdminClient.SubscriptionSet)
}

// SubscriptionDelete removes a tenant's subscription in a pool. It is
// retried on another node: a second removal answers Changed false.
// Typed: Client.SubscriptionDelete.
func (r Raw) SubscriptionDelete(ctx context.Context, req *pb.SubscriptionDeleteRequest) (*pb.SubscriptionSetResponse, error) {
	return call(ctx, r.c, pb.NewAdminClient, req, pb.AdminClient.SubscriptionDelete)
}

// SubscriptionList returns one page of the subscriptions (of a tenant, of
// a pool, if named); Subscriptions walks every page.
func (r Raw) SubscriptionList(ctx context.Context, req *pb.SubscriptionListRequest) (*pb.SubscriptionListResponse, error) {
	return call(ctx, r.c, pb.NewAdminClient, req, pb.AdminClient.SubscriptionList)
}

// Subscriptions yields the subscriptions req selects, page after page
// from req.PageToken, until the last page or the loop stops; a failure is
// yielded once, with a nil subscription, and ends it. Typed:
// Client.SubscriptionList.
func (r Raw) Subscriptions(ctx context.Context, req *pb.SubscriptionListRequest) iter.Seq2[*pb.Subscription, error] {
	return pages(req.PageToken, func(token string) (*pb.SubscriptionListResponse, error) {
		return r.SubscriptionList(ctx, &pb.SubscriptionListRequest{Tenant: req.Tenant, Pool: req.Pool, PageSize: req.PageSize, PageToken: token, Read: req.Read})
	}, (*pb.SubscriptionListResponse).GetSubscriptions, (*pb.SubscriptionListResponse).GetNextPageToken)
}

// SetGroup sets a group's cap (Client.SetGroup).
func (r Raw) SetGroup(ctx context.Context, req *pb.SetGroupRequest) (*pb.Group, error) {
	return r.c.SetGroup(ctx, req)
}

// GetGroup returns one group of the tenant.
func (r Raw) GetGroup(ctx context.Context, req *pb.GetGroupRequest) (*pb.Group, error) {
	return r.c.GetGroup(ctx, req)
}

// ListGroups returns one page of the tenant's groups.
func (r Raw) ListGroups(ctx context.Context, req *pb.ListGroupsRequest) (*pb.ListGroupsResponse, error) {
	return r.c.ListGroups(ctx, req)
}

// Groups yields the tenant's groups page after page.
func (r Raw) Groups(ctx context.Context, req *pb.ListGroupsRequest) iter.Seq2[*pb.Group, error] {
	return r.c.Groups(ctx, req)
}

// SetKindPolicy sets or removes the retry policy of a kind.
func (r Raw) SetKindPolicy(ctx context.Context, req *pb.SetKindPolicyRequest) (*pb.KindPolicy, error) {
	return r.c.SetKindPolicy(ctx, req)
}

// KindPolicies lists the retry policies of kinds.
func (r Raw) KindPolicies(ctx context.Context, req *pb.ListKindPoliciesRequest) (*pb.ListKindPoliciesResponse, error) {
	return r.c.KindPolicies(ctx, req)
}

// UsageStatement asks a node for a tenant's usage statement.
func (r Raw) UsageStatement(ctx context.Context, req *pb.UsageStatementRequest) (*pb.UsageStatementResponse, error) {
	return r.c.UsageStatement(ctx, req)
}

// FairnessCertificate asks a node for a tenant's certificate.
func (r Raw) FairnessCertificate(ctx context.Context, req *pb.FairnessCertificateRequest) (*pb.FairnessCertificateResponse, error) {
	return r.c.FairnessCertificate(ctx, req)
}
