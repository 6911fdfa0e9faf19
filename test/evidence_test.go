package test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/test/cluster"
)

// TestEvidenceOnEveryNode: on a three-node cluster that snapshots every
// 20 entries, real workers run two tenants' jobs; then each node issues
// the same usage statement (JSON and CSV) and the same certificate, byte
// for byte, for a window from index 1 and for one that starts after a
// snapshot; the certificate verifies; the statement's CPU is the sum of
// the jobs' CPU; and once the nodes are stopped, barista replay on each
// data directory prints the same bytes again.
func TestEvidenceOnEveryNode(t *testing.T) {
	c := cluster.Start(t, 3, "--snapshot-threshold", "20", "--trailing-logs", "10000", "--snapshot-interval", "300ms", "--config", configFile(t, quietClock))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.Apply(ctx, tenantCmd("acme", pb.Tier_GOLD, 0), tenantCmd("beta", pb.Tier_FREE, 0)); err != nil {
		t.Fatal(err)
	}
	// Jobs that burn some CPU, so that the CPU billed is not all zeros.
	burn := []byte(`{"argv": ["sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"]}`)
	const perTenant = 40
	for i := range perTenant {
		for _, tn := range []string{"acme", "beta"} {
			if _, err := c.Apply(ctx, &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tn,
				IdempotencyKey: fmt.Sprintf("%s-%d", tn, i), Size: pb.Size_SM, EstCostMs: 100, Payload: burn}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, id := range []string{"w1", "w2"} {
		c.AddWorker(id, "sm").Start("")
	}
	leader := c.WaitLeader(10 * time.Second)
	jobs := pb.NewClientClient(leader.Conn())
	waitFor(t, 2*time.Minute, "every job completed", func() (bool, string) {
		for _, tn := range []string{"acme", "beta"} {
			r, err := jobs.ListJobs(ctx, &pb.ListJobsRequest{Tenant: tn, State: "completed", PageSize: 1000})
			if err != nil || len(r.Jobs) != perTenant {
				return false, fmt.Sprintf("%s: %d completed, %v", tn, len(r.GetJobs()), err)
			}
		}
		return true, ""
	})
	for _, w := range c.Workers {
		w.Kill()
	}
	index, hash := c.WaitConverged(30 * time.Second)
	var cpu int64
	r, err := jobs.ListJobs(ctx, &pb.ListJobsRequest{Tenant: "acme", PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range r.Jobs {
		cpu += j.CpuMs
	}
	windows := []*pb.EvidenceWindow{{FromIndex: 1, ToIndex: index}, {FromIndex: index - 60, ToIndex: index}, {FromIndex: index - 10, ToIndex: index}}
	type docs struct{ json, csv, cert string }
	issued := make([][]docs, len(windows))
	for w, win := range windows {
		for _, n := range c.Nodes {
			cl := pb.NewClientClient(n.Conn())
			js, err1 := cl.UsageStatement(ctx, &pb.UsageStatementRequest{Tenant: "acme", Window: win})
			cs, err2 := cl.UsageStatement(ctx, &pb.UsageStatementRequest{Tenant: "acme", Window: win, Format: "csv"})
			ce, err3 := cl.FairnessCertificate(ctx, &pb.FairnessCertificateRequest{Tenant: "beta", Window: win})
			if err1 != nil || err2 != nil || err3 != nil {
				t.Fatalf("node %s, window %v: %v %v %v", n.ID, win, err1, err2, err3)
			}
			issued[w] = append(issued[w], docs{js.Document, cs.Document, ce.Document})
		}
		for i, d := range issued[w] {
			if d != issued[w][0] {
				t.Errorf("window %v: node %s issued other bytes than node %s", win, c.Nodes[i].ID, c.Nodes[0].ID)
			}
		}
		cert, err := client.ParseCertificate([]byte(issued[w][0].cert))
		if err != nil {
			t.Fatal(err)
		}
		if rep := client.VerifyCertificate(cert); !rep.OK() || (w == 0 && rep.Lines < perTenant) {
			t.Errorf("window %v: certificate of %d lines: %+v", win, rep.Lines, rep.Failures)
		}
	}
	st, err := client.ParseStatement([]byte(issued[0][0].json))
	if err != nil {
		t.Fatal(err)
	}
	// The window ends in the state every node holds at its last index:
	// the statement's replay (entry by entry) and the certificate's (command
	// by command) alike.
	cert, _ := client.ParseCertificate([]byte(issued[0][0].cert))
	if st.Window.EndHash != hash || cert.Window.EndHash != hash {
		t.Errorf("end hashes %s (statement), %s (certificate); the cluster's at %d: %s", st.Window.EndHash, cert.Window.EndHash, index, hash)
	}
	if st.Window.Open || st.Window.FromIndex != 1 || st.Window.ToIndex != index || st.CPUMs != cpu || st.Runs.OK != perTenant || st.Waiting.Dispatches != perTenant {
		t.Errorf("statement: window %+v, %d ms of CPU (the jobs' %d), runs %+v, %d dispatches", st.Window, st.CPUMs, cpu, st.Runs, st.Waiting.Dispatches)
	}
	t.Logf("statement of acme over 1..%d: %d ms of CPU in %d runs, waits p50 %d ms, p95 %d ms", index, st.CPUMs, st.Runs.OK, st.Waiting.P50Ms, st.Waiting.P95Ms)
	// Replay on each stopped node's data directory: the same bytes.
	for _, n := range c.Nodes {
		if err := n.Stop(); err != nil {
			t.Fatalf("stop %s: %v", n.ID, err)
		}
	}
	// The last window starts after a snapshot each node retains: its
	// replay starts there, not from index 1.
	for _, n := range c.Nodes {
		ents, _ := os.ReadDir(filepath.Join(n.DataDir, "snapshots"))
		found := false
		for _, e := range ents {
			if parts := strings.Split(e.Name(), "-"); len(parts) == 3 {
				if at, err := strconv.ParseUint(parts[1], 10, 64); err == nil && at < index-10 && at > 1 {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("%s retains no snapshot before index %d: %v", n.ID, index-10, ents)
		}
	}
	for w, win := range windows {
		from, to := strconv.FormatUint(win.FromIndex, 10), strconv.FormatUint(win.ToIndex, 10)
		for _, n := range c.Nodes {
			for _, run := range []struct {
				args []string
				want string
			}{
				{[]string{"--statement", "acme"}, issued[w][0].json},
				{[]string{"--statement", "acme", "--csv"}, issued[w][0].csv},
				{[]string{"--certificate", "beta"}, issued[w][0].cert},
			} {
				out, errOut, err := c.Run(append([]string{"replay", "--data-dir", n.DataDir, "--from-index", from, "--to-index", to}, run.args...)...)
				if err != nil || !bytes.Equal([]byte(out), []byte(run.want)) {
					t.Errorf("replay %v of %s (window %s..%s): %v %s\n got %.300q\nwant %.300q", run.args, n.ID, from, to, err, errOut, out, run.want)
				}
			}
		}
	}
}

// withoutPlace is an explain paragraph without its last sentence, the
// place in line, whose estimated start depends on the pace of the run.
func withoutPlace(text string) string {
	if i := strings.Index(text, " Place in line: "); i >= 0 {
		return text[:i]
	}
	return text
}
