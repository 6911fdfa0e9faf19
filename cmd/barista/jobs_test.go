package main

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
)

// oneJob is a Client service that answers every GetJob and ListJobs with
// one job.
type oneJob struct {
	pb.UnimplementedClientServer
	job *pb.Job
}

func (o oneJob) GetJob(context.Context, *pb.GetJobRequest) (*pb.Job, error) { return o.job, nil }

func (o oneJob) ListJobs(context.Context, *pb.ListJobsRequest) (*pb.ListJobsResponse, error) {
	return &pb.ListJobsResponse{Jobs: []*pb.Job{o.job}}, nil
}

// WatchEvents sends the job's queued event, then ends the watch for good.
func (o oneJob) WatchEvents(_ *pb.WatchEventsRequest, s grpc.ServerStreamingServer[pb.Event]) error {
	ev := &pb.Event{Seq: 3, JobId: o.job.JobId, Tenant: o.job.Tenant, Kind: "queued", AtMs: o.job.SubmittedAtMs, WallMs: o.job.SubmittedWallMs}
	if err := s.Send(ev); err != nil {
		return err
	}
	return status.Error(codes.PermissionDenied, "done")
}

func serveJob(t *testing.T, j *pb.Job) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterClientServer(srv, oneJob{job: j})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// TestJobShowsWallTimeWorkerAndOutput: "barista job" shows wall times,
// with the cluster time beside when it lags by a second or more; the
// worker the job ran on and where its log is; both tails, with control
// characters the job printed escaped. --json has both clocks. A job from
// a server that sends no wall time shows its cluster time.
func TestJobShowsWallTimeWorkerAndOutput(t *testing.T) {
	const cluster = 1_796_094_000_000 // 2026-12-01T03:00:00Z
	j := &pb.Job{JobId: 7, Tenant: "acme", State: "completed", Attempt: 1, MaxAttempts: 3, Size: pb.Size_MD, EstCostMs: 2000, CpuMs: 1500,
		JobType: "render\x1b[2J", SubmittedAtMs: cluster, EndedAtMs: cluster + 2500, SubmittedWallMs: cluster + 68_321, EndedWallMs: cluster + 68_821,
		WorkerId: "w-7", Cancel: "none", HasResult: true, StdoutTail: "frame 1\n\x1b]0;pwned\x07done\n", StderrTail: "warn"}
	addr := serveJob(t, j)
	var out, errb strings.Builder
	if code := Run([]string{"job", "7", "--server", addr, "--tenant", "acme"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	want := `job        7
tenant     acme
state      completed
size       md
class      normal
attempt    1 (failures 0 of max 3)
estimated  2s
cpu        1.5s
submitted  2026-12-01T03:01:08.321Z (cluster time 2026-12-01T03:00:00.000Z)
type       render\x1b[2J
worker     w-7
ended      2026-12-01T03:01:08.821Z (cluster time 2026-12-01T03:00:02.500Z)
exit code  0
output     job-7-attempt-1.log in the --log-dir of worker w-7
stdout (tail):
frame 1
\x1b]0;pwned\adone
stderr (tail):
warn
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}

	out.Reset()
	if code := Run([]string{"job", "7", "--server", addr, "--tenant", "acme", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, kv := range []string{`"submitted_at":"2026-12-01T03:01:08.321Z"`, `"cluster_submitted_at_ms":1796094000000`,
		`"ended_at":"2026-12-01T03:01:08.821Z"`, `"cluster_ended_at_ms":1796094002500`, `"worker_id":"w-7"`,
		`"stdout_tail":"frame 1\n\u001b]0;pwned\u0007done\n"`, `"stderr_tail":"warn"`} {
		if !strings.Contains(out.String(), kv) {
			t.Errorf("--json lacks %s:\n%s", kv, out.String())
		}
	}

	out.Reset()
	if code := Run([]string{"jobs", "--server", addr, "--tenant", "acme"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	wantList := "ID       STATE      SIZE ATTEMPT        EST        CPU SUBMITTED                TYPE\n" +
		"7        completed  md         1         2s       1.5s 2026-12-01T03:01:08.321Z render\\x1b[2J\n"
	if out.String() != wantList {
		t.Errorf("jobs:\n%s\nwant:\n%s", out.String(), wantList)
	}

	// watch shows the event's wall time; --json both clocks.
	for _, c := range []struct {
		json bool
		want string
	}{
		{false, "3        2026-12-01T03:01:08.321Z job=7 attempt=0 queued\n"},
		{true, `{"at":"2026-12-01T03:01:08.321Z","attempt":0,"cluster_at_ms":1796094000000,"job_id":7,"kind":"queued","seq":3,"tenant":"acme"}` + "\n"},
	} {
		out.Reset()
		args := []string{"watch", "--server", addr, "--tenant", "acme"}
		if c.json {
			args = append(args, "--json")
		}
		if code := Run(args, &out, &errb); code != 1 || out.String() != c.want {
			t.Errorf("watch (json %v): exit %d\n%s\nwant:\n%s", c.json, code, out.String(), c.want)
		}
	}

	// A server before wall times: the cluster time, alone.
	j.SubmittedWallMs, j.EndedWallMs = 0, 0
	out.Reset()
	Run([]string{"job", "7", "--server", addr, "--tenant", "acme"}, &out, &errb)
	if !strings.Contains(out.String(), "submitted  2026-12-01T03:00:00.000Z\n") || !strings.Contains(out.String(), "ended      2026-12-01T03:00:02.500Z\n") {
		t.Errorf("without wall times:\n%s", out.String())
	}
}
