package rpc

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/internal/auth"
	pb "github.com/baristahq/barista/proto"
)

// TestClientTenantCalls: a SaaS's sign-up through the Go client alone,
// with an admin token: a tenant made with its tier and quota, given a
// subscription, upgraded by its tier alone (the quota is kept), read,
// and deleted (the CLI used to be the only way).
func TestClientTenantCalls(t *testing.T) {
	n := startTestNode(t, []auth.Token{{Secret: testAdmin, Role: auth.RoleAdmin}}, nil)
	c, err := client.New([]string{n.addr}, client.Options{Token: testAdmin})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	created, err := c.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "customer-4411", Tier: pb.Tier_SILVER.Enum(), Caps: &pb.CapsUpdate{MaxQueued: proto.Uint32(10_000)}})
	if err != nil || !created.Created {
		t.Fatalf("create: %v %v", created, err)
	}
	if _, err := c.Raw().SubscriptionSet(ctx, &pb.SubscriptionSetRequest{Tenant: "customer-4411", Pool: "default", Burst: proto.Uint32(2)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "customer-4411", Tier: pb.Tier_GOLD.Enum()}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetTenant(ctx, &pb.GetTenantRequest{Name: "customer-4411"})
	if err != nil || got.Tier != pb.Tier_GOLD || got.Caps.GetMaxQueued() != 10_000 {
		t.Fatalf("after the upgrade: %v %v", got, err)
	}
	list, err := c.ListTenants(ctx, &pb.ListTenantsRequest{})
	if err != nil || len(list.Tenants) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	if _, err := c.Raw().SubscriptionDelete(ctx, &pb.SubscriptionDeleteRequest{Tenant: "customer-4411", Pool: "default"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteTenant(ctx, &pb.DeleteTenantRequest{Name: "customer-4411"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetTenant(ctx, &pb.GetTenantRequest{Name: "customer-4411"}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("after the delete: %v", err)
	}
}
