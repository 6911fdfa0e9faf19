package test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
)

// readRounds is how many times each read follows a write.
const readRounds = 100

// TestReadYourWritesOnAFollower: right after a write through a follower,
// every read that names what the write made — by gRPC, by HTTP/JSON and
// through the Go client, which carries its last write's index — finds it
// on that follower, 100 times each. The watch of a job just submitted is
// the read a follower serves from its own state (after asking the leader
// how far to catch up); a stale read that names the write's index waits
// for it.
func TestReadYourWritesOnAFollower(t *testing.T) {
	c, ctx := startWithAcme(t, 3, 4*time.Minute)
	leader := c.WaitLeader(20 * time.Second)
	f := c.Followers(leader)[0]
	cc := f.Conn()
	cl := pb.NewClientClient(cc)
	admin := pb.NewAdminClient(cc)

	// gRPC, no index named: the follower alone must make it right.
	for i := range readRounds {
		group := fmt.Sprintf("g%d", i)
		var hdr metadata.MD
		sub, err := cl.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, Group: group, Payload: []byte("true")}, grpc.Header(&hdr))
		if err != nil {
			t.Fatalf("round %d: submit: %v", i, err)
		}
		id := sub.JobId
		if v := hdr.Get(client.HeaderIndex); len(v) != 1 {
			t.Fatalf("round %d: the submit's answer names no index: %v", i, hdr)
		}
		index := hdr.Get(client.HeaderIndex)[0]
		reads := []struct {
			name string
			read func() error
		}{
			{"GetJob", func() error { _, err := cl.GetJob(ctx, &pb.GetJobRequest{Tenant: "acme", JobId: id}); return err }},
			{"ListJobs", func() error {
				page, err := cl.ListJobs(ctx, &pb.ListJobsRequest{Tenant: "acme", State: "queued", PageSize: 1000})
				if err == nil && !hasJob(page.Jobs, id) {
					err = fmt.Errorf("job %d is not listed", id)
				}
				return err
			}},
			{"ExplainJob", func() error {
				_, err := cl.ExplainJob(ctx, &pb.ExplainJobRequest{Tenant: "acme", JobId: id})
				return err
			}},
			{"TenantUsage", func() error {
				u, err := cl.TenantUsage(ctx, &pb.TenantUsageRequest{Tenant: "acme"})
				if err == nil && u.Queued != uint32(i+1) {
					err = fmt.Errorf("queued %d, want %d", u.Queued, i+1)
				}
				return err
			}},
			{"GetGroup", func() error {
				_, err := cl.GetGroup(ctx, &pb.GetGroupRequest{Tenant: "acme", Group: group})
				return err
			}},
			{"WatchEvents", func() error { return firstEvent(ctx, cl, id, nil) }},
			{"stale GetJob naming the index", func() error {
				mctx := metadata.AppendToOutgoingContext(ctx, client.HeaderMinIndex, index)
				_, err := cl.GetJob(mctx, &pb.GetJobRequest{Tenant: "acme", JobId: id, Read: &pb.ReadOptions{Stale: true}})
				return err
			}},
		}
		for _, r := range reads {
			if err := r.read(); err != nil {
				t.Fatalf("round %d: %s on follower %s right after the submit of job %d: %v", i, r.name, f.ID, id, err)
			}
		}
		// An admin write, then its read.
		name := fmt.Sprintf("t%d", i)
		if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: name, Tier: pb.Tier_FREE.Enum()}); err != nil {
			t.Fatalf("round %d: upsert: %v", i, err)
		}
		if _, err := admin.GetTenant(ctx, &pb.GetTenantRequest{Name: name}); err != nil {
			t.Fatalf("round %d: GetTenant right after the upsert: %v", i, err)
		}
	}

	// HTTP/JSON on the follower's HTTP port.
	base := "http://" + f.HTTPAddr
	hc := &http.Client{Timeout: 20 * time.Second}
	for i := range readRounds {
		var sub struct {
			JobID string `json:"job_id"`
		}
		group := fmt.Sprintf("h%d", i)
		body := fmt.Sprintf(`{"tenant":"acme","size":"SM","est_cost_ms":"1000","group":%q,"payload":"dHJ1ZQ=="}`, group)
		resp, err := hc.Post(base+"/v1/jobs", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&sub)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || resp.Header.Get("X-Barista-Index") == "" {
			t.Fatalf("round %d: POST /v1/jobs: %d %v, X-Barista-Index %q", i, resp.StatusCode, err, resp.Header.Get("X-Barista-Index"))
		}
		for _, path := range []string{
			"/v1/jobs/" + sub.JobID + "?tenant=acme",
			"/v1/jobs?tenant=acme&state=queued&page_size=1000",
			"/v1/jobs/" + sub.JobID + ":explain?tenant=acme",
			"/v1/usage?tenant=acme",
			"/v1/groups/" + group + "?tenant=acme",
			"/v1/groups?tenant=acme&page_size=1000",
		} {
			resp, err := hc.Get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || (strings.Contains(path, "/v1/jobs?") && !strings.Contains(string(b), `"job_id":"`+sub.JobID+`"`)) {
				t.Fatalf("round %d: GET %s on follower %s right after the submit: %d %s", i, path, f.ID, resp.StatusCode, b)
			}
		}
		// The console's job page reads the job from the leader and its
		// events from this node: they show the submit too.
		page := httpGet(t, hc, base+"/jobs/"+sub.JobID)
		if !strings.Contains(page, `<span class="ev queued">queued</span>`) {
			t.Fatalf("round %d: the console's page of job %s on follower %s right after the submit shows no queued event:\n%s", i, sub.JobID, f.ID, page)
		}
		if err := firstHTTPEvent(ctx, base+"/v1/events?tenant=acme&job_id="+sub.JobID+"&from_oldest=true", sub.JobID); err != nil {
			t.Fatalf("round %d: GET /v1/events on follower %s right after the submit: %v", i, f.ID, err)
		}
	}

	// The Go client, the follower first in its list: Submit then Watch.
	gc, err := client.New([]string{f.GRPCAddr, leader.GRPCAddr}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	for i := range readRounds {
		sub, err := gc.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, Payload: []byte("true")})
		if err != nil {
			t.Fatal(err)
		}
		if gc.LastIndex() == 0 {
			t.Fatal("the client keeps no index of its write")
		}
		if err := firstEvent(ctx, nil, sub.JobId, gc); err != nil {
			t.Fatalf("round %d: the Go client's watch of job %d through the follower: %v", i, sub.JobId, err)
		}
	}
}

func hasJob(jobs []*pb.Job, id uint64) bool {
	for _, j := range jobs {
		if j.JobId == id {
			return true
		}
	}
	return false
}

var errFirstEvent = errors.New("first event read")

// firstEvent watches job id (through cl, or the Go client gc) and
// requires its first event to be its queued.
func firstEvent(ctx context.Context, cl pb.ClientClient, id uint64, gc *client.Client) error {
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req := &pb.WatchEventsRequest{Tenant: "acme", JobId: id, FromOldest: true}
	check := func(ev *pb.Event) error {
		if ev.JobId != id || ev.Kind != "queued" {
			return fmt.Errorf("first event %v", ev)
		}
		return errFirstEvent
	}
	if gc != nil {
		if err := gc.Watch(wctx, req, check); !errors.Is(err, errFirstEvent) {
			return err
		}
		return nil
	}
	st, err := cl.WatchEvents(wctx, req)
	if err != nil {
		return err
	}
	ev, err := st.Recv()
	if err != nil {
		return err
	}
	if err := check(ev); !errors.Is(err, errFirstEvent) {
		return err
	}
	return nil
}

// firstHTTPEvent reads the first line of an HTTP/JSON watch and requires
// it to be job id's queued event.
func firstHTTPEvent(ctx context.Context, url, id string) error {
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(wctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		return fmt.Errorf("status %d: %v", resp.StatusCode, err)
	}
	var msg struct {
		JobID string `json:"job_id"`
		Kind  string `json:"kind"`
	}
	if err := json.Unmarshal([]byte(line), &msg); err != nil || msg.JobID != id || msg.Kind != "queued" {
		return fmt.Errorf("status %d, first line %q", resp.StatusCode, line)
	}
	return nil
}

// httpGet returns the body of a GET of url that answers 200.
func httpGet(t *testing.T, hc *http.Client, url string) string {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", url, resp.StatusCode, err, b)
	}
	return string(b)
}
