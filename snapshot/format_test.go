package snapshot

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// TestReadsSnapshotOfRevivedTenant: testdata/recreated-tenant-v1.snap was
// written by the build before a re-created tenant got a new index, from
// this log: acme and beta created; acme submits key K (job 1); beta
// submits job 2; job 1 cancelled; acme deleted and created again (that
// build revived index 0, keeping job 1 and key K); acme submits K (that
// build answered job 1) and K2 (job 3). The file loads (snapshot format
// 1) at feature level 1 and is written back byte for byte; raised to level
// 2 it re-encodes in today's format to a state that reads back to the same
// hash, and the state is the one that build left: nothing is rewritten on
// upgrade. The next delete and re-create on the loaded
// state gives a new, empty tenant.
func TestReadsSnapshotOfRevivedTenant(t *testing.T) {
	const path = "testdata/recreated-tenant-v1.snap"
	// The hash of the loaded state in today's state encoding (4).
	const wantHash = "022048531fc70f1047658c39a7f87cee2b7c871e91b9c33007ee3abf4a1a9bbb"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := fsm.New()
	index, err := Read(bytes.NewReader(raw), f)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	v, err := f.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	var same bytes.Buffer
	if _, err := Write(&same, v); err != nil || !bytes.Equal(same.Bytes(), raw) {
		t.Fatalf("written back at level 1: %v, equal %t", err, bytes.Equal(same.Bytes(), raw))
	}
	if res, err := f.ApplyEnvelope(index, &clusterpb.Envelope{Version: fsm.Version, StampMs: 1, Commands: []*clusterpb.Command{
		{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: fsm.Level2}}}}}); err != nil || res[0].Code != fsm.OK {
		t.Fatalf("raising the level: %v %v", res, err)
	}
	if v, err = f.Freeze(); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	h, err := Write(&again, v)
	if err != nil {
		t.Fatal(err)
	}
	if index != 8 || fmt.Sprintf("%x", h) != wantHash {
		t.Fatalf("index %d hash %x (want 8 %s)", index, h, wantHash)
	}
	g := fsm.New()
	if _, err := Read(bytes.NewReader(again.Bytes()), g); err != nil {
		t.Fatalf("read back: %v", err)
	}
	if gh, _ := g.Hash(); fmt.Sprintf("%x", gh) != wantHash {
		t.Fatalf("read back: hash %x, want %s", gh, wantHash)
	}
	jobsOf := func(tenant string) string {
		var ids []sfq.JobID
		f.Read(func(s *sfq.Scheduler) {
			s.TenantJobs(tenant, 0, func(j *sfq.Job) bool { ids = append(ids, j.ID); return true })
		})
		return fmt.Sprint(ids)
	}
	if got := jobsOf("acme"); got != "[1 3]" {
		t.Fatalf("acme's jobs as loaded: %s, want [1 3] (the revived index keeps them)", got)
	}
	apply := func(i uint64, cmds ...*clusterpb.Command) []fsm.Result {
		res, err := f.ApplyEnvelope(i, &clusterpb.Envelope{Version: fsm.Version, StampMs: 20_000, Commands: cmds})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := apply(9,
		&clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: "acme", Job: 3}}},
		&clusterpb.Command{Cmd: &clusterpb.Command_TenantDelete{TenantDelete: &clusterpb.TenantDelete{Name: "acme"}}},
		&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD}}},
		&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", IdempotencyKey: "K", Size: pb.Size_MD, EstCostMs: 1000, Payload: []byte("old")}}})
	if sub := res[3]; sub.Code != fsm.OK || !sub.Created || sub.Job != 4 {
		t.Fatalf("submit with K after re-creating the loaded tenant: %+v", sub)
	}
	if got := jobsOf("acme"); got != "[4]" {
		t.Fatalf("the new acme lists %s, want [4]", got)
	}
	if got := jobsOf("beta"); got != "[2]" {
		t.Fatalf("beta lists %s, want [2]", got)
	}
	if err := f.Verify(); err != nil {
		t.Fatal(err)
	}
}
