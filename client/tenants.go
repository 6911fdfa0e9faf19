package client

import (
	"context"

	pb "github.com/baristahq/barista/proto"
)

// Tenants (admin calls): what a SaaS does when a customer signs up,
// changes plan or leaves — create or change its tenant, read it, give it
// a subscription in a pool, delete it.

// UpsertTenant creates a tenant (Tier is required then) or changes one:
// a field left out keeps its value, a field given sets it (0, false and
// "" included: docs/api.md, "Upserts"). It sets values, so it is retried
// on another node like a read.
func (c *Client) UpsertTenant(ctx context.Context, req *pb.UpsertTenantRequest) (*pb.Tenant, error) {
	return call(ctx, c, pb.NewAdminClient, req, pb.AdminClient.UpsertTenant)
}

// GetTenant returns one tenant's settings (NOT_FOUND if none).
func (c *Client) GetTenant(ctx context.Context, req *pb.GetTenantRequest) (*pb.Tenant, error) {
	return call(ctx, c, pb.NewAdminClient, req, pb.AdminClient.GetTenant)
}

// ListTenants returns every tenant, in creation order.
func (c *Client) ListTenants(ctx context.Context, req *pb.ListTenantsRequest) (*pb.ListTenantsResponse, error) {
	return call(ctx, c, pb.NewAdminClient, req, pb.AdminClient.ListTenants)
}

// DeleteTenant deletes a tenant that holds no scheduled, queued or
// running job (FAILED_PRECONDITION names them otherwise). It is sent
// once: a second delete answers NOT_FOUND.
func (c *Client) DeleteTenant(ctx context.Context, req *pb.DeleteTenantRequest) (*pb.DeleteTenantResponse, error) {
	return call(ctx, c, pb.NewAdminClient, req, pb.AdminClient.DeleteTenant)
}
