package rpc

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	pb "barista/proto"
)

// addTenants creates tenants t-000000 .. t-(n-1), tiers in turn, each with
// one queued md job, in batches of commands per log entry.
func (n *testNode) addTenants(count int) {
	n.t.Helper()
	const batch = 500
	for lo := 0; lo < count; lo += batch {
		var cmds []*pb.Command
		for i := lo; i < min(lo+batch, count); i++ {
			cmds = append(cmds, &pb.Command{Cmd: &pb.Command_TenantUpsert{TenantUpsert: &pb.TenantUpsert{Name: fmt.Sprintf("t-%06d", i), Tier: pb.Tier(1 + i%5)}}})
		}
		n.propose(cmds...)
		cmds = cmds[:0]
		for i := lo; i < min(lo+batch, count); i++ {
			cmds = append(cmds, &pb.Command{Cmd: &pb.Command_Submit{Submit: &pb.SubmitJob{Tenant: fmt.Sprintf("t-%06d", i), Size: pb.Size_MD, EstCostMs: 1000}}})
		}
		n.propose(cmds...)
	}
}

// scrape returns one /metrics response body.
func scrape(tb testing.TB, h http.Handler, gzip bool) []byte {
	tb.Helper()
	req := httptest.NewRequest("GET", "/metrics", nil)
	if gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		tb.Fatalf("/metrics: %d %s", rec.Code, rec.Body.String())
	}
	body, _ := io.ReadAll(rec.Body)
	return body
}

// samples counts the sample lines of a text exposition.
func samples(body []byte) int {
	n := 0
	for _, line := range bytes.Split(body, []byte("\n")) {
		if len(line) > 0 && line[0] != '#' {
			n++
		}
	}
	return n
}

// BenchmarkMetricsScrape10kTenants measures one /metrics scrape of a node
// holding 10,000 tenants: its time, and its size plain and gzipped.
func BenchmarkMetricsScrape10kTenants(b *testing.B) {
	n := startTestNode(b, nil, nil)
	n.addTenants(10_000)
	h := n.srv.HTTPHandler(HTTPOptions{})
	for _, gz := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "gzip"}[gz], func(b *testing.B) {
			var body []byte
			for b.Loop() {
				body = scrape(b, h, gz)
			}
			b.ReportMetric(float64(len(body)), "bytes/scrape")
			if !gz {
				b.ReportMetric(float64(samples(body)), "samples/scrape")
			}
		})
	}
}
