package web

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"strings"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// TestTopFairness: Top, /api/top and the web page show the fairness
// report: gold (8) and free (1) queue two jobs each in one entry, one of
// each runs (gold 3 s of a 2 s estimate, free 0.5 s of 1 s), and both keep
// a job queued. Gold's share of the CPU charged is 3/3.5, its entitlement
// 8/9 (both eligible all along), its ratio 27/28; free's 1/7, 1/9 and
// 9/7. virtual_now is 0; gold's tag is 250 + 125 virtual ms (3 CPU s at
// weight 8 ahead), free's 500 (0.5 s ahead).
func TestTopFairness(t *testing.T) {
	n := startTestNode(t, nil, nil)
	job := func(tenant string, cost int64) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant, Size: pb.Size_MD, EstCostMs: cost}}}
	}
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "gold", Tier: pb.Tier_GOLD}}},
		&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "free", Tier: pb.Tier_FREE}}},
		job("gold", 2000), job("gold", 2000), job("free", 1000), job("free", 1000))
	for _, w := range []string{"w1", "w2"} {
		n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: w, Size: pb.Size_MD, Credit: 1}}})
	}
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: 1, Attempt: 1, WorkerId: "w1", Outcome: pb.Outcome_OK, CpuMs: 3000}}},
		&clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: 3, Attempt: 1, WorkerId: "w2", Outcome: pb.Outcome_OK, CpuMs: 500}}})
	n.clockMoves()

	top, err := pb.NewAdminClient(n.dial("")).Top(context.Background(), &pb.TopRequest{})
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		name                   string
		charged                int64
		share, entitled, ratio float64
		lagMs                  int64
	}
	wants := []want{{"gold", 3000, 6.0 / 7, 8.0 / 9, 27.0 / 28, -3000}, {"free", 500, 1.0 / 7, 1.0 / 9, 9.0 / 7, -500}}
	if len(top.Tenants) != 2 {
		t.Fatalf("tenants: %v", top.Tenants)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
	for i, w := range wants {
		r := top.Tenants[i]
		if r.Name != w.name || r.JobClass != pb.Class_NORMAL || !r.Eligible || r.LagCpuMs != w.lagMs || r.Dispatches != 1 || len(r.Windows) != 3 ||
			!near(r.Share, w.share) || !near(r.EntitledShare, w.entitled) {
			t.Errorf("%s: %v", w.name, r)
			continue
		}
		for g, name := range []string{"1m", "10m", "1h"} {
			f := r.Windows[g]
			if f.Window != name || f.ChargedMs != w.charged || f.ClassChargedMs != 3500 || f.Share == nil || f.Entitled == nil || f.Ratio == nil ||
				!near(*f.Share, w.share) || !near(*f.Entitled, w.entitled) || !near(*f.Ratio, w.ratio) || f.BusyMs <= 0 || f.SpanMs < f.BusyMs {
				t.Errorf("%s %s: %v", w.name, name, f)
			}
		}
	}

	ts := n.serve()
	resp, err := ts.Client().Get(ts.URL + "/api/top")
	if err != nil {
		t.Fatal(err)
	}
	var j TopJSON
	err = json.NewDecoder(resp.Body).Decode(&j)
	resp.Body.Close()
	if err != nil || len(j.Tenants) != 2 {
		t.Fatalf("/api/top: %v %+v", err, j)
	}
	gold := j.Tenants[0]
	if gold.Class != "normal" || gold.Ratio == nil || !near(*gold.Ratio, 27.0/28) || gold.LagCPUSeconds == nil || *gold.LagCPUSeconds != -3 ||
		len(gold.Fairness) != 3 || gold.Fairness[2].Window != "1h" || !near(*gold.Fairness[2].Ratio, 27.0/28) {
		t.Errorf("/api/top gold: %+v", gold)
	}
	resp, err = ts.Client().Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page := new(strings.Builder)
	_, _ = io.Copy(page, resp.Body)
	resp.Body.Close()
	for _, s := range []string{"<th>ratio 1m</th>", `<td class="l"><a href="/tenants/gold">gold</a></td><td class="l">gold</td><td class="l">normal</td>`,
		"<td>88.9%</td><td>0.96</td><td>0.96</td><td>0.96</td><td>-3.0s</td>", "<td>11.1%</td><td>1.29</td><td>1.29</td><td>1.29</td><td>-0.5s</td>"} {
		if !strings.Contains(page.String(), s) {
			t.Errorf("the page has no %s:\n%s", s, page)
		}
	}
}
