package joblist

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// pages follows the page tokens from the start and returns every page.
func pages(t interface{ Fatalf(string, ...any) }, sc *sfq.Scheduler, tenant string, state sfq.State, size int, payload bool, maxBytes int) []*pb.ListJobsResponse {
	var out []*pb.ListJobsResponse
	var from sfq.JobID
	for {
		page, ok := Page(sc, tenant, state, "", from, false, size, payload, maxBytes)
		if !ok {
			t.Fatalf("tenant %q not found", tenant)
		}
		out = append(out, page)
		if page.NextPageToken == "" {
			return out
		}
		next, err := ParsePageToken(page.NextPageToken)
		if err != nil || next <= from {
			t.Fatalf("token %q after %d: %v", page.NextPageToken, from, err)
		}
		from = next
		if len(out) > 10_000 {
			t.Fatalf("paging does not end")
		}
	}
}

func TestPageBoundedByBytes(t *testing.T) {
	sc, _ := sfq.New(sfq.DefaultConfig())
	for _, n := range []string{"acme", "beta"} {
		sc.UpsertTenant(sfq.TenantSpec{Name: n, Tier: sfq.Gold})
	}
	// acme: jobs 1, 3, 5, 7 with payloads of 400 bytes; beta: 2, 4, 6.
	for i := range 7 {
		tenant := []string{"acme", "beta"}[i%2]
		if _, err := sc.Submit(1000, sfq.Submission{Tenant: tenant, Size: sfq.SM, EstCostMs: 10, Payload: strings.Repeat("x", 400)}); err != nil {
			t.Fatal(err)
		}
	}
	show := func(ps []*pb.ListJobsResponse) string {
		var b strings.Builder
		for _, p := range ps {
			fmt.Fprint(&b, "[")
			for i, j := range p.Jobs {
				if i > 0 {
					b.WriteString(" ")
				}
				fmt.Fprintf(&b, "%d:%d", j.JobId, len(j.Payload))
			}
			fmt.Fprintf(&b, "]%s ", p.NextPageToken)
		}
		return strings.TrimSpace(b.String())
	}
	for _, c := range []struct {
		tenant   string
		size     int
		payload  bool
		maxBytes int
		want     string
	}{
		// Without payloads every job is small: bounded by the count.
		{"acme", 100, false, 1000, "[1:0 3:0 5:0 7:0]"},
		{"acme", 3, false, 1000, "[1:0 3:0 5:0]p7 [7:0]"},
		// With: two jobs (about 450 bytes each) fit 1000 bytes, three do not.
		{"acme", 100, true, 1000, "[1:400 3:400]p5 [5:400 7:400]"},
		{"", 100, true, 1000, "[1:400 2:400]p3 [3:400 4:400]p5 [5:400 6:400]p7 [7:400]"},
		// A job larger than the whole budget comes alone.
		{"beta", 100, true, 100, "[2:400]p4 [4:400]p6 [6:400]"},
	} {
		if got := show(pages(t, sc, c.tenant, 0, c.size, c.payload, c.maxBytes)); got != c.want {
			t.Errorf("tenant %q size %d payload %v max %d: %s, want %s", c.tenant, c.size, c.payload, c.maxBytes, got, c.want)
		}
	}
	if _, ok := Page(sc, "nobody", 0, "", 0, false, 10, false, 1000); ok {
		t.Error("an unknown tenant was listed")
	}
}

// TestPageProperty: whatever the payload sizes, states, page size and
// byte budget, following the tokens returns each of the tenant's jobs (of
// the state asked) exactly once, in ID order; every page holds at most
// page-size jobs and, unless it holds one, encodes within the budget.
func TestPageProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sc, _ := sfq.New(sfq.DefaultConfig())
		for _, n := range []string{"a", "b"} {
			sc.UpsertTenant(sfq.TenantSpec{Name: n, Tier: sfq.Gold})
		}
		want := map[string][]sfq.JobID{}
		for i := range rapid.IntRange(0, 60).Draw(t, "jobs") {
			tenant := rapid.SampledFrom([]string{"a", "b"}).Draw(t, "tenant")
			id, err := sc.Submit(sfq.Time(1000+i), sfq.Submission{Tenant: tenant, Size: sfq.SM, EstCostMs: 10,
				Payload: strings.Repeat("p", rapid.IntRange(0, 3000).Draw(t, "payload"))})
			if err != nil {
				t.Fatal(err)
			}
			if rapid.Bool().Draw(t, "cancel") {
				sc.Cancel(sfq.Time(1000+i), id)
			}
		}
		state := rapid.SampledFrom([]sfq.State{0, sfq.Queued, sfq.Cancelled}).Draw(t, "state")
		tenant := rapid.SampledFrom([]string{"", "a", "b"}).Draw(t, "scope")
		sc.TenantJobs(tenant, 0, func(j *sfq.Job) bool {
			if state == 0 || j.State == state {
				want[tenant] = append(want[tenant], j.ID)
			}
			return true
		})
		size := rapid.IntRange(1, 20).Draw(t, "page_size")
		maxBytes := rapid.IntRange(1, 20_000).Draw(t, "max_bytes")
		payload := rapid.Bool().Draw(t, "include_payload")
		var got []sfq.JobID
		for _, p := range pages(t, sc, tenant, state, size, payload, maxBytes) {
			if len(p.Jobs) > size {
				t.Fatalf("page of %d jobs over page size %d", len(p.Jobs), size)
			}
			if n := proto.Size(p) - proto.Size(&pb.ListJobsResponse{NextPageToken: p.NextPageToken}); len(p.Jobs) > 1 && n > maxBytes {
				t.Fatalf("page of %d jobs encodes to %d bytes, over %d", len(p.Jobs), n, maxBytes)
			}
			for _, j := range p.Jobs {
				got = append(got, sfq.JobID(j.JobId))
				if !payload && len(j.Payload) > 0 {
					t.Fatalf("job %d came with its payload unasked", j.JobId)
				}
			}
			if p.NextPageToken != "" && len(p.Jobs) == 0 {
				t.Fatal("an empty page with a next token")
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want[tenant]) {
			t.Fatalf("pages returned %v, want %v", got, want[tenant])
		}
	})
}
