package main

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	pb "github.com/baristahq/barista/proto"
)

// groupFake is a Client service that answers the group calls from a
// fixed list and records what it was sent.
type groupFake struct {
	pb.UnimplementedClientServer
	mu      sync.Mutex
	sets    []*pb.SetGroupRequest
	lists   []*pb.ListGroupsRequest
	submits []*pb.SubmitRequest
	usage   []*pb.TenantUsageRequest
	groups  []*pb.Group
}

func (f *groupFake) SetGroup(_ context.Context, req *pb.SetGroupRequest) (*pb.Group, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets = append(f.sets, req)
	return &pb.Group{Tenant: "acme", Name: req.Group, Cap: req.Cap, Limit: 3, Running: 1, Queued: 4}, nil
}

func (f *groupFake) GetGroup(_ context.Context, req *pb.GetGroupRequest) (*pb.Group, error) {
	return &pb.Group{Tenant: "acme", Name: req.Group, Cap: "inherit", TenantCap: 2, Limit: 2, Running: 2, Queued: 9}, nil
}

// ListGroups answers pages of two.
func (f *groupFake) ListGroups(_ context.Context, req *pb.ListGroupsRequest) (*pb.ListGroupsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists = append(f.lists, req)
	i := 0
	if req.PageToken != "" {
		i = int(req.PageToken[0] - '0')
	}
	out := &pb.ListGroupsResponse{Groups: f.groups[i:min(i+2, len(f.groups))]}
	if i+2 < len(f.groups) {
		out.NextPageToken = string(rune('0' + i + 2))
	}
	return out, nil
}

func (f *groupFake) Submit(_ context.Context, req *pb.SubmitRequest) (*pb.SubmitResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.submits = append(f.submits, req)
	return &pb.SubmitResponse{JobId: 7, Created: true}, nil
}

func (f *groupFake) TenantUsage(_ context.Context, req *pb.TenantUsageRequest) (*pb.TenantUsageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.usage = append(f.usage, req)
	return &pb.TenantUsageResponse{Tenant: "acme", Tier: pb.Tier_GOLD, Weight: 8, Running: 3, Queued: 12,
		RunningBySize: []uint32{3, 0, 0}, QueuedBySize: []uint32{12, 0, 0}, FinishTagMs: "0", VirtualNowMs: "0", GroupCount: 3,
		Groups: []*pb.GroupUsage{{Name: "store-7", Running: 1, Queued: 10, Limit: 1}, {Name: "", Running: 2, Queued: 2}}}, nil
}

// serveClient serves a Client service on a loopback port until the test
// ends.
func serveClient(t *testing.T, c pb.ClientServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterClientServer(srv, c)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb strings.Builder
	code := Run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestGroupCommands: group set, get and list send what the flags say and
// print the answers; list follows the pages.
func TestGroupCommands(t *testing.T) {
	f := &groupFake{groups: []*pb.Group{
		{Tenant: "acme", Name: "", Cap: "inherit", Running: 1, Queued: 0},
		{Tenant: "acme", Name: "a", Cap: "none", TenantCap: 1, Limit: 1, Running: 1, Queued: 5},
		{Tenant: "acme", Name: "b", Cap: "4", Limit: 4, Queued: 2},
	}}
	addr := serveClient(t, f)
	code, out, errb := run(t, "group", "set", "store-7", "--cap", "3", "--tenant", "acme", "--server", addr)
	want := "tenant      acme\ngroup       store-7\ncap         3\ntenant_cap  none\nlimit       3\nrunning     1\nqueued      4\nrate        none\npaused      no\n"
	if code != 0 || out != want || errb != "" {
		t.Errorf("group set: exit %d, stdout:\n%s\nstderr: %s", code, out, errb)
	}
	if len(f.sets) != 1 || f.sets[0].Tenant != "acme" || f.sets[0].Group != "store-7" || f.sets[0].Cap != "3" {
		t.Errorf("sent %v", f.sets)
	}
	code, out, _ = run(t, "group", "get", "store-7", "--tenant", "acme", "--json", "--server", addr)
	if want := `{"burst":0,"cap":"inherit","limit":2,"name":"store-7","paused":"","queued":9,"rate":"","rate_eligible_at_ms":0,"running":2,"tenant":"acme","tenant_cap":2}` + "\n"; code != 0 || out != want {
		t.Errorf("group get --json: exit %d, %s", code, out)
	}
	code, out, _ = run(t, "group", "list", "--tenant", "acme", "--server", addr)
	want = "GROUP                            CAP      TENANT_CAP LIMIT  RUNNING  QUEUED\n" +
		"(unnamed)                        inherit  none       none         1       0\n" +
		"a                                none     1          1            1       5\n" +
		"b                                4        none       4            0       2\n"
	if code != 0 || out != want {
		t.Errorf("group list: exit %d, stdout:\n%s\nwant:\n%s", code, out, want)
	}
	if len(f.lists) != 2 || f.lists[0].PageToken != "" || f.lists[1].PageToken != "2" || f.lists[1].PageSize != 1000 {
		t.Errorf("list requests %v", f.lists)
	}
}

// TestGroupFlagsChecked: a bad group name or cap is a usage error naming
// the flag and the rule, before anything is sent.
func TestGroupFlagsChecked(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"group", "set", "a b", "--cap", "1"}, `GROUP: group name "a b" has ' ' at byte 1 (allowed: A-Z a-z 0-9 . _ : @ -)`},
		{[]string{"group", "set", "g"}, "--cap or --rate: required (--cap a number, none or inherit; --rate N/PERIOD or none)"},
		{[]string{"group", "set", "g", "--cap", "0"}, `--cap: "0": want a number 1..1000000, none or inherit`},
		{[]string{"group", "set"}, "group set needs one GROUP"},
		{[]string{"group", "get", "x/y"}, `GROUP: group name "x/y" has '/' at byte 1 (allowed: A-Z a-z 0-9 . _ : @ -)`},
		{[]string{"group", "list", "extra"}, `unexpected argument "extra"`},
		{[]string{"tenant", "set", "acme", "--group-cap", "0"}, `--group-cap: "0": want none or a number 1..1000000`},
		{[]string{"tenant", "set", "acme", "--group-cap", "inherit"}, `--group-cap: "inherit": want none or a number 1..1000000`},
		{[]string{"tenant", "set", "acme", "--group-order", "lifo"}, `--group-order: "lifo": want fifo or fair`},
		{[]string{"tenant", "set", "acme", "--max-groups", "1000001"}, "barista tenant set: --max-groups: 1000001 is out of range (0..1000000)"},
		{[]string{"usage", "--groups", "0"}, "barista usage: --groups: 0 is out of range (1..1000)"},
	} {
		args := append([]string{}, c.args...)
		at := len(args)
		for i, a := range args {
			if a == "--" {
				at = i
				break
			}
		}
		args = append(args[:at:at], append([]string{"--server", "127.0.0.1:1", "--rpc-timeout", "1s"}, args[at:]...)...)
		code, _, errb := run(t, args...)
		first, _, _ := strings.Cut(errb, "\n")
		if code != 2 || first != c.want {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant exit 2 and %q", c.args, code, errb, c.want)
		}
	}
}

// TestSubmitGroupAndUsage: submit --group sends the group (and so does a
// line of --from-file); usage asks for --groups groups and prints them.
func TestSubmitGroupAndUsage(t *testing.T) {
	f := &groupFake{}
	addr := serveClient(t, f)
	if code, out, errb := run(t, "submit", "--tenant", "acme", "--size", "sm", "--cost", "1s", "--group", "store-7", "--server", addr, "--", "true"); code != 0 {
		t.Fatalf("submit: exit %d %s %s", code, out, errb)
	}
	if len(f.submits) != 1 || f.submits[0].Group != "store-7" {
		t.Errorf("submitted %v", f.submits)
	}
	code, out, errb := run(t, "usage", "--tenant", "acme", "--groups", "2", "--server", addr)
	if code != 0 {
		t.Fatalf("usage: exit %d %s", code, errb)
	}
	want := "\nGROUP                            RUNNING  QUEUED  LIMIT\n" +
		"store-7                                1      10      1\n" +
		"(unnamed)                              2       2   none\n"
	if !strings.Contains(out, "groups      3\n"+want) || !strings.HasSuffix(out, want) {
		t.Errorf("usage:\n%s\nwant it to end with groups 3 and:\n%s", out, want)
	}
	if len(f.usage) != 1 || f.usage[0].TopGroups != 2 {
		t.Errorf("usage requests %v", f.usage)
	}
	code, out, _ = run(t, "usage", "--tenant", "acme", "--json", "--server", addr)
	if code != 0 || !strings.Contains(out, `"group_count":3,"groups":[{"limit":1,"name":"store-7","queued":10,"running":1},{"limit":0,"name":"","queued":2,"running":2}]`) {
		t.Errorf("usage --json: %s", out)
	}
	if f.usage[1].TopGroups != 10 {
		t.Errorf("default --groups: %d", f.usage[1].TopGroups)
	}
}
