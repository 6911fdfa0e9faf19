package client

import (
	"errors"
	"testing"
	"time"

	pb "github.com/baristahq/barista/proto"
)

// TestInsertUses: InsertOpts.Uses goes out as the submit's uses sorted by
// resource name; a count below 1 is refused before any call; a job read
// back has its uses by name.
func TestInsertUses(t *testing.T) {
	req, err := submitRequest(resizeArgs{Image: "a"}, &InsertOpts{Uses: map[string]int{"vector-db": 2, "openai": 1}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(req.Uses) != 2 || req.Uses[0].Resource != "openai" || req.Uses[0].Units != 1 || req.Uses[1].Resource != "vector-db" || req.Uses[1].Units != 2 {
		t.Fatalf("uses %v", req.Uses)
	}
	if _, err := submitRequest(resizeArgs{Image: "a"}, &InsertOpts{Uses: map[string]int{"openai": 0}}, time.Now()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("0 units: %v", err)
	}
	j := JobFromProto(&pb.Job{JobId: 1, Uses: []*pb.ResourceUse{{Resource: "openai", Units: 3}}})
	if len(j.Uses) != 1 || j.Uses["openai"] != 3 {
		t.Fatalf("job uses %v", j.Uses)
	}
	r := resourceOf(&pb.Resource{Name: "openai", Capacity: 4, TenantMax: new(uint32(3)), Held: 2, Tenants: []*pb.ResourceTenant{{Tenant: "acme", Max: 1, Held: 1}}})
	if m, ok := r.TenantMax.Get(); !ok || m != 3 || r.Capacity != 4 || r.Held != 2 || len(r.Tenants) != 1 || r.Tenants[0] != (ResourceTenant{"acme", 1, 1}) {
		t.Fatalf("resource %+v", r)
	}
}
