package test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baristahq/barista/test/cluster"
)

// TestSubmitsAcrossLeaderKill: keyed submits by the CLI, one every 10 ms,
// half through a follower only and half with every node's address, while
// the leader is killed. A follower holds a write whose leader cannot be
// reached until the next leader is known, and the CLI goes on to another
// node when a node is down, so every submit succeeds on its first CLI
// invocation, each exactly once. Then the dead node shows as unreachable
// to list-peers, status and the web page of a live follower.
func TestSubmitsAcrossLeaderKill(t *testing.T) {
	c, _ := startWithAcme(t, 3, 3*time.Minute)
	leader := c.WaitLeader(10 * time.Second)
	followers := c.Followers(leader)
	all := strings.Join([]string{c.Nodes[0].GRPCAddr, c.Nodes[1].GRPCAddr, c.Nodes[2].GRPCAddr}, ",")

	const submits = 200
	type outcome struct {
		out, errOut string
		err         error
		took        time.Duration
	}
	results := make([]outcome, submits)
	var wg sync.WaitGroup
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := range submits {
		<-tick.C
		if i == 50 {
			leader.Kill()
			t.Logf("killed the leader %s before submit %d", leader.ID, i)
		}
		servers := all
		if i%2 == 0 {
			servers = followers[0].GRPCAddr
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			var out, errOut strings.Builder
			cmd := exec.Command(c.Bin, "submit", "--server", servers, "--tenant", "acme", "--size", "sm", "--cost", "1s",
				"--key", fmt.Sprintf("k-%03d", i), "--json", "--", "true")
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err := cmd.Run()
			results[i] = outcome{out.String(), errOut.String(), err, time.Since(start)}
		}()
	}
	wg.Wait()
	ids := map[uint64]int{}
	var slowest time.Duration
	for i, r := range results {
		if r.err != nil {
			t.Errorf("submit %d failed on its first invocation: %v\n%s", i, r.err, r.errOut)
			continue
		}
		var got struct {
			JobID uint64 `json:"job_id"`
		}
		if err := json.Unmarshal([]byte(r.out), &got); err != nil || got.JobID == 0 {
			t.Errorf("submit %d printed %q", i, r.out)
			continue
		}
		if prev, dup := ids[got.JobID]; dup {
			t.Errorf("submits %d and %d got the same job %d", prev, i, got.JobID)
		}
		ids[got.JobID] = i
		slowest = max(slowest, r.took)
	}
	t.Logf("%d submits, %d distinct jobs, slowest invocation %s", submits, len(ids), slowest)
	// Every key made exactly one job: the tenant holds 200 jobs.
	st, err := followers[0].Status()
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, err := c.Run("jobs", "--server", followers[0].GRPCAddr, "--tenant", "acme", "--limit", "1000", "--json")
	if err != nil {
		t.Fatalf("jobs: %v %s", err, errOut)
	}
	if n := strings.Count(out, `"job_id"`); n != submits {
		t.Fatalf("the tenant holds %d jobs, want %d (cluster at index %d)", n, submits, st.AppliedIndex)
	}

	// The dead member, as a live follower tells it.
	newLeader := c.WaitLeader(10 * time.Second)
	var live *cluster.Node
	for _, n := range c.Followers(newLeader) {
		if n.Running() {
			live = n
		}
	}
	var peers struct {
		Peers []struct {
			ID            string  `json:"id"`
			State         string  `json:"state"`
			LastContactMs int64   `json:"last_contact_ms"`
			Lag           *uint64 `json:"lag"`
			AppliedIndex  *uint64 `json:"applied_index"`
		} `json:"peers"`
	}
	waitFor(t, 20*time.Second, "list-peers shows the dead leader unreachable", func() (bool, string) {
		out, errOut, err := c.Run("operator", "raft", "list-peers", "--server", live.GRPCAddr, "--json")
		if err != nil {
			return false, errOut
		}
		if err := json.Unmarshal([]byte(out), &peers); err != nil {
			return false, out
		}
		states := map[string]string{}
		for _, p := range peers.Peers {
			states[p.ID] = p.State
			if p.ID == leader.ID && p.LastContactMs < 500 {
				return false, out
			}
		}
		return states[leader.ID] == "unreachable" && states[newLeader.ID] == "leader" && states[live.ID] == "follower", out
	})
	// The dead member's applied index and lag cannot be learned: they are
	// unknown, not 0; the live members' applied indexes are asked of them.
	for _, p := range peers.Peers {
		switch {
		case p.ID == leader.ID && (p.AppliedIndex != nil || p.Lag != nil):
			t.Fatalf("list-peers --json gives the dead member an applied index or lag: %+v", p)
		case p.ID != leader.ID && (p.AppliedIndex == nil || *p.AppliedIndex == 0):
			t.Fatalf("list-peers --json gives live member %s no applied index: %+v", p.ID, p)
		}
	}
	out, _, err = c.Run("operator", "raft", "list-peers", "--server", live.GRPCAddr)
	if err != nil || !strings.Contains(out, "unreachable") || !strings.Contains(out, "LAST CONTACT") || !strings.Contains(out, "APPLIED") {
		t.Fatalf("list-peers table: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == leader.ID && (f[5] != "unknown" || f[len(f)-1] != "unknown") {
			t.Fatalf("list-peers shows the dead member's applied index and lag as %q and %q, want unknown:\n%s", f[5], f[len(f)-1], out)
		}
	}
	var members struct {
		Peers []struct {
			ID           string `json:"id"`
			AppliedIndex string `json:"applied_index"`
			AppliedKnown bool   `json:"applied_known"`
		} `json:"peers"`
	}
	mresp, err := http.Get("http://" + live.HTTPAddr + "/v1/admin/members")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(mresp.Body).Decode(&members)
	mresp.Body.Close()
	if err != nil || len(members.Peers) != 3 {
		t.Fatalf("GET /v1/admin/members: %v %+v", err, members)
	}
	for _, p := range members.Peers {
		if known := p.ID != leader.ID; p.AppliedKnown != known || (known && (p.AppliedIndex == "0" || p.AppliedIndex == "")) {
			t.Fatalf("GET /v1/admin/members: %+v (the dead member %s: unknown; the others: their applied index)", p, leader.ID)
		}
	}
	t.Logf("list-peers:\n%s", out)
	out, _, err = c.Run("status", "--server", live.GRPCAddr)
	if err != nil || !strings.Contains(out, "last heard from") {
		t.Fatalf("status on a follower: %v\n%s", err, out)
	}
	resp, err := http.Get("http://" + live.HTTPAddr + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `<td class="l">`+leader.ID+`</td>`) || !strings.Contains(string(page), "unreachable") {
		t.Fatalf("the follower's web page does not show %s unreachable:\n%s", leader.ID, page)
	}
	// The console's members table is the same view: the dead member's
	// applied index and lag are unknown, each live member's its own.
	rows, cell := map[string][]string{}, regexp.MustCompile(`<td[^>]*>.*?</td>`)
	for _, row := range regexp.MustCompile(`<tr><td class="l">(n\d)</td>(.*?)</tr>`).FindAllStringSubmatch(string(page), -1) {
		rows[row[1]] = cell.FindAllString(row[2], -1)
	}
	for _, n := range c.Nodes {
		cells := rows[n.ID]
		if len(cells) != 7 {
			t.Fatalf("the web page's row of member %s: %q\n%s", n.ID, cells, page)
		}
		applied, lag := cells[4], cells[6]
		if dead := n.ID == leader.ID; dead != (applied == "<td>unknown</td>") || dead && lag != "<td>unknown</td>" {
			t.Fatalf("the web page's row of member %s (dead: %v): applied %s, lag %s", n.ID, dead, applied, lag)
		}
	}
}
