package raftnode_test

import (
	"testing"
	"time"

	"github.com/baristahq/barista/internal/nodetest"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/snapshot"
)

// TestEvidenceFromTheNodesStores: a running node's own snapshots and log
// (EvidenceSource) yield the statement of what it applied — its dispatch,
// its run, its CPU charged and billed — and a certificate that verifies.
func TestEvidenceFromTheNodesStores(t *testing.T) {
	cfg, lis := nodetest.Config(t)
	lis.Close()
	node, err := raftnode.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Shutdown()
	nodetest.WaitFor(t, 10*time.Second, "leadership", node.IsLeader)
	job := nodetest.SubmitOne(t, node)
	nodetest.ClockMoves(t, node)
	res := nodetest.Propose(t, node, &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "w1", Size: pb.Size_MD, Credit: 1}}})
	if !res[0].Assigned || res[0].Job != job {
		t.Fatalf("dispatch %+v", res[0])
	}
	nodetest.ClockMoves(t, node)
	nodetest.Propose(t, node, &clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: uint64(job), Attempt: 1, WorkerId: "w1", CpuMs: 1500, Outcome: pb.Outcome_OK}}})
	st, err := snapshot.Statement(node.EvidenceSource(), "acme", snapshot.WindowSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if st.CPUMs != 1500 || st.Runs.OK != 1 || st.Waiting.Dispatches != 1 || len(st.Shares) != 1 {
		t.Fatalf("statement %s", st.JSON())
	}
	if sh := st.Shares[0]; sh.ChargedMs != 1500 || sh.BilledMs != 1500 || sh.Received == nil || *sh.Received != 1 || sh.Entitled == nil || *sh.Entitled != 1 {
		t.Errorf("share %+v\n%s", sh, st.JSON())
	}
}
