package test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/test/cluster"
)

// listServices asks a server's reflection service for its services.
func listServices(t *testing.T, addr, token string) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := rpb.NewServerReflectionClient(cluster.Dial(t, addr, token, nil)).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	// A Send to a stream the server has already ended (an unknown
	// service) fails with io.EOF; the stream's status comes from Recv.
	if err := stream.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{ListServices: ""}}); err != nil && err != io.EOF {
		return nil, err
	}
	resp, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names, nil
}

// TestGRPCReflection: an --insecure-dev server serves reflection (grpcurl
// works against it); a server with tokens only with --grpc-reflection, and
// then to any token, never without one.
func TestGRPCReflection(t *testing.T) {
	dev := cluster.Start(t, 1)
	want := "[barista.v1.Admin barista.v1.Client barista.v1.Node barista.v1.Worker grpc.health.v1.Health grpc.reflection.v1.ServerReflection grpc.reflection.v1alpha.ServerReflection]"
	if got, err := listServices(t, dev.Nodes[0].GRPCAddr, ""); err != nil || fmt.Sprint(got) != want {
		t.Fatalf("dev server reflection: %v %v", got, err)
	}

	c := startWithTokens(t, 1, "")
	n := c.Nodes[0]
	if _, err := listServices(t, n.GRPCAddr, acmeToken); status.Code(err) != codes.Unimplemented {
		t.Fatalf("reflection without --grpc-reflection: %v, want UNIMPLEMENTED", err)
	}
	n.Stop()
	n.Start("--grpc-reflection")
	c.WaitLeader(20 * time.Second)
	if _, err := listServices(t, n.GRPCAddr, ""); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("reflection without a token: %v, want UNAUTHENTICATED", err)
	}
	for _, tok := range []string{acmeToken, workerToken, adminToken} {
		if got, err := listServices(t, n.GRPCAddr, tok); err != nil || fmt.Sprint(got) != want {
			t.Fatalf("reflection with a token: %v %v", got, err)
		}
	}
}
