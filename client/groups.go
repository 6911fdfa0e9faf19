package client

import (
	"context"
	"iter"

	pb "github.com/baristahq/barista/proto"
)

// SetGroup sets a group's cap: with an admin token the admin's
// ("inherit", "none" or a number), with the tenant's client token the
// tenant's own, a second cap that only tightens. It sets a value, so it
// is retried on another node like a read.
func (c *Client) SetGroup(ctx context.Context, req *pb.SetGroupRequest) (*pb.Group, error) {
	return unary(ctx, c, req, pb.ClientClient.SetGroup)
}

// GetGroup returns one group of the tenant ("" is its unnamed group);
// NOT_FOUND for a group without jobs or settings.
func (c *Client) GetGroup(ctx context.Context, req *pb.GetGroupRequest) (*pb.Group, error) {
	return unary(ctx, c, req, pb.ClientClient.GetGroup)
}

// ListGroups returns one page of the tenant's groups by name, the unnamed
// group first; Groups walks every page.
func (c *Client) ListGroups(ctx context.Context, req *pb.ListGroupsRequest) (*pb.ListGroupsResponse, error) {
	return unary(ctx, c, req, pb.ClientClient.ListGroups)
}

// Groups yields the tenant's groups, page after page from req.PageToken,
// until the last page or the loop stops; a failure is yielded once, with
// a nil group, and ends it.
func (c *Client) Groups(ctx context.Context, req *pb.ListGroupsRequest) iter.Seq2[*pb.Group, error] {
	return pages(req.PageToken, func(token string) (*pb.ListGroupsResponse, error) {
		return c.ListGroups(ctx, &pb.ListGroupsRequest{Tenant: req.Tenant, PageSize: req.PageSize, PageToken: token, Read: req.Read})
	}, (*pb.ListGroupsResponse).GetGroups, (*pb.ListGroupsResponse).GetNextPageToken)
}

// SetKindPolicy sets (or, with Remove, removes) the retry policy of a
// kind for the tenant's jobs, or with Tenant "*" (an admin token) for
// every tenant's: what a submit of that kind does not set itself
// (max_attempts, retry_backoff, retry_backoff_max, timeout) is taken from
// it at the submit (SPEC §3 "Kinds"; feature level 8).
func (c *Client) SetKindPolicy(ctx context.Context, req *pb.SetKindPolicyRequest) (*pb.KindPolicy, error) {
	return unary(ctx, c, req, pb.ClientClient.SetKindPolicy)
}

// KindPolicies lists the tenant's retry policies of kinds and every
// tenant's (Tenant "*": every tenant's only).
func (c *Client) KindPolicies(ctx context.Context, req *pb.ListKindPoliciesRequest) (*pb.ListKindPoliciesResponse, error) {
	return unary(ctx, c, req, pb.ClientClient.ListKindPolicies)
}
