package rpc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/nodetest"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/webhook"
)

// startWebhookNode is a one-node open cluster whose server has a webhook
// deliverer with key (nil: none) that may reach loopback.
func startWebhookNode(t *testing.T, key webhook.Key) (pb.AdminClient, *raftnode.Node) {
	t.Helper()
	admin, node, _ := startWebhookNodeAt(t, key, 0)
	return admin, node
}

// startWebhookNodeAt is startWebhookNode with a build that understands
// feature levels up to level (0: this build's), and its server.
func startWebhookNodeAt(t *testing.T, key webhook.Key, level uint32) (pb.AdminClient, *raftnode.Node, *Server) {
	t.Helper()
	node, srv, addr := serveNodeAt(t, level, func(node *raftnode.Node) Options {
		auth, err := NewAuth(nil, true)
		if err != nil {
			t.Fatal(err)
		}
		hooks := webhook.OnNode(node, webhook.Options{Key: key, Guard: webhook.NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}),
			MinBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, CommitInterval: 20 * time.Millisecond})
		return Options{Auth: auth, Webhooks: hooks}
	})
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewAdminClient(cc), node, srv
}

// serveNodeAt starts a one-node cluster whose build understands feature
// levels up to level (0: this build's), serving gRPC with the options opt
// makes for its node, and returns the node, its server and its gRPC
// address once it leads; everything stops when the test ends.
func serveNodeAt(t *testing.T, level uint32, opt func(node *raftnode.Node) Options) (*raftnode.Node, *Server, string) {
	t.Helper()
	cfg, lis := nodetest.Config(t)
	cfg.FeatureLevel = level
	node, err := raftnode.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(node, opt(node))
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop(5 * time.Second)
		<-served
		node.Shutdown()
	})
	waitFor(t, 20*time.Second, "a configured leader", func() bool { return node.IsLeader() && node.FSM.Configured() })
	return node, srv, lis.Addr().String()
}

func wantStatus(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	if st := status.Convert(err); st.Code() != code || st.Message() != msg {
		t.Fatalf("got %v %q, want %v %q", st.Code(), st.Message(), code, msg)
	}
}

func i64(v int64) *int64 { return &v }

// TestWebhookAdminCalls: the admin calls at the edge: the secret shown
// when an endpoint is created or rotated and never otherwise, refusals
// naming the field, and the leader's status of a failing endpoint.
func TestWebhookAdminCalls(t *testing.T) {
	ctx := context.Background()
	// A leader without the key refuses to issue secrets.
	noKey, _ := startWebhookNode(t, nil)
	if _, err := noKey.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "acme", Tier: pb.Tier_GOLD.Enum()}); err != nil {
		t.Fatal(err)
	}
	_, err := noKey.WebhookSet(ctx, &pb.WebhookSetRequest{Tenant: "acme", Url: "https://hooks.example.com/"})
	wantStatus(t, err, codes.FailedPrecondition, "the leader (n1) has no webhook key: set [webhooks] key or $BARISTA_WEBHOOK_KEY, the same on every server")

	key := webhook.Key("0123456789abcdef0123456789abcdef")
	admin, node := startWebhookNode(t, key)
	if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "acme", Tier: pb.Tier_GOLD.Enum()}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		req  *pb.WebhookSetRequest
		code codes.Code
		msg  string
	}{
		{&pb.WebhookSetRequest{Tenant: "acme", Url: "https://10.0.0.1/x"}, codes.InvalidArgument,
			"url: 10.0.0.1 is a private address, refused (a server's [webhooks] allow_cidrs or --webhook-allow-cidr may allow it)"},
		{&pb.WebhookSetRequest{Tenant: "acme", Url: "http://[::1]:8080/x"}, codes.InvalidArgument,
			"url: ::1 is a loopback address, refused (a server's [webhooks] allow_cidrs or --webhook-allow-cidr may allow it)"},
		{&pb.WebhookSetRequest{Tenant: "acme", Url: "https://hooks.example.com/", GraceMs: i64(5)}, codes.InvalidArgument, "grace_ms: only with rotate"},
		{&pb.WebhookSetRequest{Tenant: "acme", Url: "https://hooks.example.com/", Rotate: true, GraceMs: i64(-1)}, codes.InvalidArgument,
			"grace_ms: -1, want 0..2592000000 (30 days)"},
		{&pb.WebhookSetRequest{Tenant: "a b", Url: "https://hooks.example.com/"}, codes.NotFound,
			`unknown tenant "a b"`},
		{&pb.WebhookSetRequest{Tenant: "nope", Url: "https://hooks.example.com/"}, codes.NotFound, `unknown tenant "nope"`},
	} {
		_, err := admin.WebhookSet(ctx, c.req)
		wantStatus(t, err, c.code, c.msg)
	}

	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer recv.Close()
	set, err := admin.WebhookSet(ctx, &pb.WebhookSetRequest{Tenant: "acme", Url: recv.URL + "/hook", Kinds: []string{"queued", "completed"}})
	if err != nil {
		t.Fatal(err)
	}
	if !set.Created || set.Secret != key.Secret(0, "acme", 1) || set.PreviousSecretKept || set.Webhook.SecretVersion != 1 ||
		set.Webhook.Url != recv.URL+"/hook" || len(set.Webhook.Kinds) != 2 {
		t.Fatalf("set: %v", set)
	}
	// A set that leaves the kinds out keeps them; "all" is every kind.
	again, err := admin.WebhookSet(ctx, &pb.WebhookSetRequest{Tenant: "acme", Url: recv.URL + "/hook"})
	if err != nil || again.Created || again.Secret != "" || again.Webhook.SecretVersion != 1 || len(again.Webhook.Kinds) != 2 {
		t.Fatalf("set again: %v, %v", again, err)
	}
	again, err = admin.WebhookSet(ctx, &pb.WebhookSetRequest{Tenant: "acme", Kinds: []string{"all"}})
	if err != nil || again.Created || again.Webhook.Url != recv.URL+"/hook" || len(again.Webhook.Kinds) != 0 {
		t.Fatalf("set again: %v, %v", again, err)
	}
	clock, _ := node.FSM.Clock()
	rot, err := admin.WebhookSet(ctx, &pb.WebhookSetRequest{Tenant: "acme", Url: recv.URL + "/hook", Rotate: true})
	if err != nil || rot.Secret != key.Secret(0, "acme", 4) || !rot.PreviousSecretKept || rot.Webhook.PreviousSecretVersion != 1 ||
		rot.Webhook.PreviousSecretUntilMs < int64(clock)+24*3600*1000 {
		t.Fatalf("rotate: %v, %v", rot, err)
	}
	rot, err = admin.WebhookSet(ctx, &pb.WebhookSetRequest{Tenant: "acme", Url: recv.URL + "/hook", Rotate: true, GraceMs: i64(0)})
	if err != nil || rot.Secret != key.Secret(0, "acme", 5) || rot.PreviousSecretKept || rot.Webhook.PreviousSecretVersion != 0 {
		t.Fatalf("rotate without grace: %v, %v", rot, err)
	}

	// One event for the endpoint; it answers 503.
	if _, err := pb.NewClientClient(dialAdmin(t, node)).Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 100}); err != nil {
		t.Fatal(err)
	}
	var st *pb.WebhookStatusResponse
	waitFor(t, 20*time.Second, "a failure in the status", func() bool {
		st, err = admin.WebhookStatus(ctx, &pb.WebhookStatusRequest{Tenant: "acme"})
		return err == nil && st.Failures >= 1
	})
	if st.LeaderId != "n1" || st.Backlog != 1 || st.LastError != "HTTP 503" || st.NextRetryMs == 0 || st.LastSuccessMs != 0 || st.DeliveredSeq != 0 {
		t.Fatalf("status: %v", st)
	}
	_, err = admin.WebhookReplay(ctx, &pb.WebhookReplayRequest{Tenant: "acme"})
	wantStatus(t, err, codes.InvalidArgument, "from_seq: must be at least 1")
	_, err = admin.WebhookReplay(ctx, &pb.WebhookReplayRequest{Tenant: "acme", FromSeq: 3})
	wantStatus(t, err, codes.InvalidArgument, "from_seq: 3 is past the next event (2)")
	if w, err := admin.WebhookReplay(ctx, &pb.WebhookReplayRequest{Tenant: "acme", FromSeq: 2}); err != nil || w.Cursor != 1 {
		t.Fatalf("replay: %v, %v", w, err)
	}
	if _, err := admin.WebhookDelete(ctx, &pb.WebhookDeleteRequest{Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	_, err = admin.WebhookGet(ctx, &pb.WebhookGetRequest{Tenant: "acme"})
	wantStatus(t, err, codes.NotFound, `tenant "acme" has no webhook`)
	_, err = admin.WebhookGet(ctx, &pb.WebhookGetRequest{Tenant: "nope"})
	wantStatus(t, err, codes.NotFound, `tenant: "nope" not found`)
	_, err = admin.WebhookStatus(ctx, &pb.WebhookStatusRequest{Tenant: "acme"})
	wantStatus(t, err, codes.NotFound, `tenant "acme" has no webhook`)
}

func dialAdmin(t *testing.T, node *raftnode.Node) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(node.Config().GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// TestWebhookCallsNeedLevel3: in a cluster whose voters understand only
// feature level 2, the webhook calls that change the state are refused at
// the edge, naming the call and both levels; reads find no endpoint.
func TestWebhookCallsNeedLevel3(t *testing.T) {
	ctx := context.Background()
	key := webhook.Key("0123456789abcdef0123456789abcdef")
	admin, node, _ := startWebhookNodeAt(t, key, fsm.Level2)
	waitFor(t, 20*time.Second, "level 2", func() bool { return node.FSM.Level() == fsm.Level2 })
	if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "acme", Tier: pb.Tier_GOLD.Enum()}); err != nil {
		t.Fatal(err)
	}
	msg := func(what string) string {
		return what + ` needs cluster feature level 3; the cluster is at level 2 until every voter runs a build that understands level 3 (docs/operations.md, "Upgrades")`
	}
	_, err := admin.WebhookSet(ctx, &pb.WebhookSetRequest{Tenant: "acme", Url: "https://hooks.example.com/"})
	wantStatus(t, err, codes.FailedPrecondition, msg("webhook set"))
	_, err = admin.WebhookDelete(ctx, &pb.WebhookDeleteRequest{Tenant: "acme"})
	wantStatus(t, err, codes.FailedPrecondition, msg("webhook delete"))
	_, err = admin.WebhookReplay(ctx, &pb.WebhookReplayRequest{Tenant: "acme", FromSeq: 1})
	wantStatus(t, err, codes.FailedPrecondition, msg("webhook replay"))
	_, err = admin.WebhookGet(ctx, &pb.WebhookGetRequest{Tenant: "acme"})
	wantStatus(t, err, codes.NotFound, `tenant "acme" has no webhook`)
	if node.FSM.HasWebhooks() || node.FSM.Level() != fsm.Level2 {
		t.Fatalf("webhooks %t at level %d", node.FSM.HasWebhooks(), node.FSM.Level())
	}
}
