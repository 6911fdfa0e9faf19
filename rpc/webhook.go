package rpc

import (
	"context"
	"net/url"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/webhook"
)

// DefaultWebhookGrace is how long a rotated secret stays valid when the
// request does not say.
const DefaultWebhookGrace = 24 * time.Hour

// webhookNow is webhookToPB with this node's ClockNow.
func (b *base) webhookNow(w *fsm.Webhook) *pb.Webhook {
	out := webhookToPB(w)
	out.Now = b.clockNow()
	return out
}

func webhookToPB(w *fsm.Webhook) *pb.Webhook {
	out := &pb.Webhook{Tenant: w.Name, Url: w.URL, Kinds: fsm.WebhookKindNames(w.Kinds), SecretVersion: w.Version, Cursor: w.Cursor,
		AckedAtMs: int64(w.AckedAt), GapFromSeq: w.GapFrom, GapToSeq: w.GapTo}
	if w.PrevVersion != 0 {
		out.PreviousSecretVersion, out.PreviousSecretUntilMs = w.PrevVersion, int64(w.PrevUntil)
	}
	return out
}

// webhookSetCommand builds the command of a set request, without the
// key the leader adds. What of it needs no state is checked by Apply's
// rules on any node (edgeCheck); the grace period is the request's own.
func webhookSetCommand(req *pb.WebhookSetRequest) (*clusterpb.Command, error) {
	if req.GraceMs != nil && !req.Rotate {
		return nil, fieldErr(codes.InvalidArgument, "grace_ms", "only with rotate")
	}
	grace := DefaultWebhookGrace.Milliseconds()
	if req.GraceMs != nil {
		grace = *req.GraceMs
	}
	if !req.Rotate {
		grace = 0
	}
	return &clusterpb.Command{Cmd: &clusterpb.Command_WebhookSet{WebhookSet: &clusterpb.WebhookSet{
		Tenant: req.Tenant, Url: req.Url, Kinds: req.Kinds, Rotate: req.Rotate, GraceMs: grace}}}, nil
}

// webhookKey returns the leader's webhook key, or why there is none.
func (b *base) webhookKey() (webhook.Key, error) {
	if b.webhooks == nil || b.webhooks.Key() == nil {
		return nil, status.Errorf(codes.FailedPrecondition,
			"the leader (%s) has no webhook key: set [webhooks] key or $BARISTA_WEBHOOK_KEY, the same on every server", b.node.ID())
	}
	return b.webhooks.Key(), nil
}

// WebhookSet registers or changes a tenant's endpoint. The secret is in
// the answer when the endpoint is new or its secret was rotated.
func (s *AdminService) WebhookSet(ctx context.Context, req *pb.WebhookSetRequest) (*pb.WebhookSetResponse, error) {
	cmd, err := webhookSetCommand(req)
	if err != nil {
		return nil, err
	}
	if err := s.edgeCheck(cmd); err != nil {
		return nil, err
	}
	if resp, handled, err := forward(ctx, &s.base, func(ctx context.Context, cc *grpc.ClientConn) (*pb.WebhookSetResponse, error) {
		return pb.NewAdminClient(cc).WebhookSet(ctx, req)
	}); handled {
		return resp, err
	}
	key, err := s.webhookKey()
	if err != nil {
		return nil, err
	}
	// An address this leader's guard refuses is refused now, with the
	// reason; a name is checked, resolved, at each connection.
	if u, _ := url.Parse(req.Url); u != nil && req.Url != "" {
		if err := s.webhooks.Guard().CheckHost(u.Hostname()); err != nil {
			return nil, fieldErr(codes.InvalidArgument, "url", "%v", err)
		}
	}
	cmd.GetWebhookSet().KeyId = key.ID()
	res, err := s.commit(ctx, cmd)
	if err != nil {
		return nil, err
	}
	w, ok := s.node.FSM.WebhookOf(req.Tenant)
	if !ok {
		return nil, status.Errorf(codes.Aborted, "the webhook of tenant %q changed meanwhile; retry", req.Tenant)
	}
	out := &pb.WebhookSetResponse{Webhook: s.webhookNow(&w), Created: res.Created}
	if res.Created || req.Rotate {
		out.Secret = key.Secret(w.Tenant, w.Name, w.Version)
		out.PreviousSecretKept = req.Rotate && w.PrevVersion != 0
	}
	return out, nil
}

// readWebhook returns a live tenant's endpoint, or NOT_FOUND naming what
// is missing.
func readWebhook(f *fsm.FSM, tenant string) (fsm.Webhook, error) {
	if w, ok := f.WebhookOf(tenant); ok {
		return w, nil
	}
	var known bool
	f.Read(func(sc *sfq.Scheduler) { _, known = sc.TenantIndex(tenant) })
	if !known {
		return fsm.Webhook{}, tenantNotFound(tenant)
	}
	return fsm.Webhook{}, status.Errorf(codes.NotFound, "tenant %q has no webhook", tenant)
}

// WebhookGet returns a tenant's endpoint (never its secret).
func (s *AdminService) WebhookGet(ctx context.Context, req *pb.WebhookGetRequest) (*pb.Webhook, error) {
	if req.Tenant == "" {
		return nil, fieldErr(codes.InvalidArgument, "tenant", "required")
	}
	fwd := &pb.WebhookGetRequest{Tenant: req.Tenant}
	return read(ctx, &s.base, req.Read, func(ctx context.Context, cc *grpc.ClientConn) (*pb.Webhook, error) {
		return pb.NewAdminClient(cc).WebhookGet(ctx, fwd)
	}, func() (*pb.Webhook, error) {
		w, err := readWebhook(s.node.FSM, req.Tenant)
		if err != nil {
			return nil, err
		}
		return s.webhookNow(&w), nil
	})
}

// WebhookDelete removes a tenant's endpoint; events not yet delivered
// are not.
func (s *AdminService) WebhookDelete(ctx context.Context, req *pb.WebhookDeleteRequest) (*pb.WebhookDeleteResponse, error) {
	if req.Tenant == "" {
		return nil, fieldErr(codes.InvalidArgument, "tenant", "required")
	}
	cmd := &clusterpb.Command{Cmd: &clusterpb.Command_WebhookDelete{WebhookDelete: &clusterpb.WebhookDelete{Tenant: req.Tenant}}}
	if _, resp, done, err := write(ctx, &s.base, cmd, func(ctx context.Context, cc *grpc.ClientConn) (*pb.WebhookDeleteResponse, error) {
		return pb.NewAdminClient(cc).WebhookDelete(ctx, req)
	}); done {
		return resp, err
	}
	return &pb.WebhookDeleteResponse{}, nil
}

// WebhookStatus answers from the leader: the replicated endpoint, its
// backlog, and what the leader knows of its deliveries.
func (s *AdminService) WebhookStatus(ctx context.Context, req *pb.WebhookStatusRequest) (*pb.WebhookStatusResponse, error) {
	if req.Tenant == "" {
		return nil, fieldErr(codes.InvalidArgument, "tenant", "required")
	}
	if resp, handled, err := forward(ctx, &s.base, func(ctx context.Context, cc *grpc.ClientConn) (*pb.WebhookStatusResponse, error) {
		return pb.NewAdminClient(cc).WebhookStatus(ctx, req)
	}); handled {
		return resp, err
	}
	if err := s.node.ConsistentRead(ctx); err != nil {
		return nil, proposeErr(err)
	}
	f := s.node.FSM
	w, err := readWebhook(f, req.Tenant)
	if err != nil {
		return nil, err
	}
	out := &pb.WebhookStatusResponse{Webhook: s.webhookNow(&w), Backlog: webhook.Backlog(f, w), LeaderId: s.node.ID(), DeliveredSeq: w.Cursor}
	if s.webhooks == nil {
		return out, nil
	}
	if st, ok := s.webhooks.Status(w.Tenant); ok {
		out.DeliveredSeq = max(st.Delivered, w.Cursor)
		out.LastSuccessMs = unixMs(st.LastSuccess)
		out.LastError = st.LastError
		out.LastErrorMs = unixMs(st.LastErrorAt)
		out.NextRetryMs = unixMs(st.NextRetry)
		out.Failures = st.Failures
	} else if s.webhooks.Key() == nil {
		_, kerr := s.webhookKey()
		out.LastError = status.Convert(kerr).Message()
	}
	return out, nil
}

func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// WebhookReplay delivers a tenant's events again from a seq on.
func (s *AdminService) WebhookReplay(ctx context.Context, req *pb.WebhookReplayRequest) (*pb.Webhook, error) {
	if req.Tenant == "" {
		return nil, fieldErr(codes.InvalidArgument, "tenant", "required")
	}
	if req.FromSeq == 0 {
		return nil, fieldErr(codes.InvalidArgument, "from_seq", "must be at least 1")
	}
	cmd := &clusterpb.Command{Cmd: &clusterpb.Command_WebhookReplay{WebhookReplay: &clusterpb.WebhookReplay{Tenant: req.Tenant, FromSeq: req.FromSeq}}}
	if err := levelErr(s.node.FSM, cmd); err != nil {
		return nil, err
	}
	if resp, handled, err := forward(ctx, &s.base, func(ctx context.Context, cc *grpc.ClientConn) (*pb.Webhook, error) {
		return pb.NewAdminClient(cc).WebhookReplay(ctx, req)
	}); handled {
		return resp, err
	}
	first, _ := s.node.FSM.Events(^uint64(0), func(*fsm.Event) bool { return false })
	if req.FromSeq < first {
		return nil, fieldErr(codes.OutOfRange, "from_seq", "%d was pruned; the oldest retained event is %d", req.FromSeq, first)
	}
	res, err := s.propose(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if err := resultErr(res[0]); err != nil {
		return nil, err
	}
	w, err := readWebhook(s.node.FSM, req.Tenant)
	if err != nil {
		return nil, err
	}
	return s.webhookNow(&w), nil
}
