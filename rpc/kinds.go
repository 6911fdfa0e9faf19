package rpc

import (
	"context"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// hello records what the worker of a new session runs and settles the
// job the state says it holds that its Hello does not list (SPEC §3
// "Kinds", §5: feature level 8; below it, nothing). It runs before the
// session's Welcome, so that no Dispatch for the worker is proposed
// before its record says what it runs.
func (h *hub) hello(ctx context.Context, s *session, hello *pb.Hello) (recorded bool, err error) {
	f := h.node.State()
	if f.Level() < fsm.Level8 {
		return false, nil
	}
	c := &clusterpb.WorkerHello{WorkerId: s.id, Size: hello.Size, Pool: s.pool,
		Says: hello.Commands || len(hello.Kinds) > 0, Commands: hello.Commands, Kinds: hello.Kinds}
	for _, r := range hello.Running {
		c.Holds = append(c.Holds, &clusterpb.HeldJob{Job: r.Job, Attempt: r.Attempt})
	}
	cmd := &clusterpb.Command{Cmd: &clusterpb.Command_WorkerHello{WorkerHello: c}}
	if r := f.Admit(cmd); r.Refused() {
		return false, helloErr(r)
	}
	res, err := h.propose(ctx, cmd)
	if err != nil {
		return false, err
	}
	if r := res[0]; r.Refused() {
		return false, helloErr(r)
	} else if r.Job != 0 {
		h.log.Info("job lost: its worker's new session did not list it", "worker", s.id, "job", r.Job, "attempt", r.Attempt, "tenant", r.Tenant)
	}
	return true, nil
}

// helloErr is the refusal of a Hello's WorkerHello, its field named as
// the Hello's.
func helloErr(r fsm.Result) error {
	ref := r.Refusal()
	if ref.Field != "" {
		ref.Field = "hello." + ref.Field
	}
	return refusalErr(ref)
}

// unknownKindBelow8 is a Finished of outcome UNKNOWN_KIND to a cluster
// below feature level 8, which routes no job by kind: the run counts as
// one that can never succeed on this worker, as before kinds.
func unknownKindBelow8(fin *pb.JobFinished) {
	fin.Outcome, fin.Permanent = pb.Outcome_FAILED, true
	fin.StderrTail = "unknown_kind: the worker does not run jobs of this kind (the cluster's feature level is below 8)"
}
