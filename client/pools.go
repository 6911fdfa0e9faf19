package client

import (
	"context"
	"iter"

	pb "github.com/baristahq/barista/proto"
)

// Pools and subscriptions (admin calls; feature level 6): a pool is a
// fleet of workers and the jobs that may run on it, each its own fair
// share. A job names its pool in SubmitRequest.Pool, a listing filters on
// ListJobsRequest.Pool, the bulk calls on JobFilter.Pool.

// PoolSet creates a pool or changes one; fields left out keep their
// value. It sets a value, so it is retried on another node like a read.
func (c *Client) PoolSet(ctx context.Context, req *pb.PoolSetRequest) (*pb.Pool, error) {
	return call(ctx, c, pb.NewAdminClient, req, pb.AdminClient.PoolSet)
}

// PoolGet returns one pool: its settings, its jobs and its connected
// workers.
func (c *Client) PoolGet(ctx context.Context, req *pb.PoolGetRequest) (*pb.Pool, error) {
	return call(ctx, c, pb.NewAdminClient, req, pb.AdminClient.PoolGet)
}

// PoolList returns every pool by name.
func (c *Client) PoolList(ctx context.Context, req *pb.PoolListRequest) (*pb.PoolListResponse, error) {
	return call(ctx, c, pb.NewAdminClient, req, pb.AdminClient.PoolList)
}

// PoolDelete deletes a pool without jobs and connected workers. It is
// sent once: a second delete answers NOT_FOUND.
func (c *Client) PoolDelete(ctx context.Context, req *pb.PoolDeleteRequest) (*pb.PoolDeleteResponse, error) {
	return call(ctx, c, pb.NewAdminClient, req, pb.AdminClient.PoolDelete)
}

// SubscriptionSet sets a tenant's subscription in a pool (Burst is
// required). It sets a value, so it is retried on another node.
func (c *Client) SubscriptionSet(ctx context.Context, req *pb.SubscriptionSetRequest) (*pb.SubscriptionSetResponse, error) {
	return call(ctx, c, pb.NewAdminClient, req, pb.AdminClient.SubscriptionSet)
}

// SubscriptionDelete removes a tenant's subscription in a pool. It is
// retried on another node: a second removal answers Changed false.
func (c *Client) SubscriptionDelete(ctx context.Context, req *pb.SubscriptionDeleteRequest) (*pb.SubscriptionSetResponse, error) {
	return call(ctx, c, pb.NewAdminClient, req, pb.AdminClient.SubscriptionDelete)
}

// SubscriptionList returns one page of the subscriptions (of a tenant, of
// a pool, if named); Subscriptions walks every page.
func (c *Client) SubscriptionList(ctx context.Context, req *pb.SubscriptionListRequest) (*pb.SubscriptionListResponse, error) {
	return call(ctx, c, pb.NewAdminClient, req, pb.AdminClient.SubscriptionList)
}

// Subscriptions yields the subscriptions req selects, page after page
// from req.PageToken, until the last page or the loop stops; a failure is
// yielded once, with a nil subscription, and ends it.
func (c *Client) Subscriptions(ctx context.Context, req *pb.SubscriptionListRequest) iter.Seq2[*pb.Subscription, error] {
	return pages(req.PageToken, func(token string) (*pb.SubscriptionListResponse, error) {
		return c.SubscriptionList(ctx, &pb.SubscriptionListRequest{Tenant: req.Tenant, Pool: req.Pool, PageSize: req.PageSize, PageToken: token, Read: req.Read})
	}, (*pb.SubscriptionListResponse).GetSubscriptions, (*pb.SubscriptionListResponse).GetNextPageToken)
}
