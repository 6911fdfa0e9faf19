package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/test/cluster"
	"github.com/baristahq/barista/web"
	"github.com/baristahq/barista/worker/runner"
)

// Short runtime timeouts so that lease expiries happen within a test, yet
// longer than a leader failover with reconnects (about 1.5 s on a loaded
// two-core machine), in the ratios of the defaults.
const workerTimeouts = `[scheduler]
heartbeat_interval = "250ms"
self_kill_after = "4s"
lease_timeout = "5s"
ack_timeout = "5s"
cancel_grace = "1s"
`

func configFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "barista.toml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func payload(t *testing.T, argv ...string) []byte {
	t.Helper()
	b, err := runner.EncodePayload(runner.Spec{Argv: argv})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitJob polls a job until pred holds.
func waitJob(t *testing.T, c pb.ClientClient, id uint64, timeout time.Duration, what string, pred func(*pb.Job) bool) *pb.Job {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *pb.Job
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		j, err := c.GetJob(ctx, &pb.GetJobRequest{JobId: id})
		cancel()
		if err == nil {
			last = j
			if pred(j) {
				return j
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("job %d never got %s (last: %v)", id, what, last)
	return nil
}

// pidsWith lists processes whose command line contains marker.
func pidsWith(marker string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func setupTenants(t *testing.T, c *cluster.Cluster, tenants map[string]pb.Tier) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, tier := range tenants {
		if _, err := pb.NewAdminClient(c.Nodes[0].Conn()).UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: name, Tier: tier.Enum()}); err != nil {
			t.Fatal(err)
		}
	}
}

func submitJob(t *testing.T, c *cluster.Cluster, node int, req *pb.SubmitRequest) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := pb.NewClientClient(c.Nodes[node%len(c.Nodes)].Conn()).Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return r.JobId
}

// TestWorkersEndToEnd: three tenants of different tiers submit jobs that
// burn CPU or sleep; real workers of every size run them all; every job's
// events are queued, assigned, started, completed; the CPU charged equals
// the CPU each job measured itself within 5 %.
func TestWorkersEndToEnd(t *testing.T) {
	burn := cluster.Helper(t, "./test/testdata/burn")
	c := cluster.Start(t, 3, "--config", configFile(t, workerTimeouts))
	setupTenants(t, c, map[string]pb.Tier{"gold": pb.Tier_GOLD, "silver": pb.Tier_SILVER, "free": pb.Tier_FREE})
	for i, size := range []string{"sm", "md", "lg"} {
		c.AddWorker(fmt.Sprintf("w%d", i), size).Start("")
	}
	out := t.TempDir()
	type sub struct {
		id   uint64
		file string
	}
	var subs []sub
	for i, tenant := range []string{"gold", "silver", "free", "gold", "silver", "free", "gold", "silver", "free"} {
		file := filepath.Join(out, fmt.Sprintf("job-%d.cpu", i))
		p := payload(t, burn, "-ms", "400", "-out", file)
		size := pb.Size(1 + i%3)
		if i%3 == 2 {
			p, file = payload(t, "sleep", "0.3"), ""
		}
		id := submitJob(t, c, i, &pb.SubmitRequest{Tenant: tenant, Size: size, EstCostMs: 500, Payload: p})
		subs = append(subs, sub{id, file})
	}
	client := pb.NewClientClient(c.Nodes[1].Conn())
	for _, s := range subs {
		j := waitJob(t, client, s.id, 60*time.Second, "completed", func(j *pb.Job) bool { return j.State == "completed" })
		if j.Attempt != 1 || j.ExitCode != 0 {
			t.Errorf("job %d: attempt %d exit %d", j.JobId, j.Attempt, j.ExitCode)
		}
		if s.file == "" {
			continue
		}
		b, err := os.ReadFile(s.file)
		if err != nil {
			t.Fatal(err)
		}
		self, _ := strconv.ParseInt(string(b), 10, 64)
		if diff := float64(j.CpuMs-self) / float64(self); diff < -0.05 || diff > 0.05 {
			t.Errorf("job %d charged %d ms CPU, measured itself %d ms (%.1f%%)", j.JobId, j.CpuMs, self, 100*diff)
		} else {
			t.Logf("job %d charged %d ms CPU, measured itself %d ms", j.JobId, j.CpuMs, self)
		}
		if !strings.Contains(j.StderrTail, "burned") {
			t.Errorf("job %d stderr tail %q", j.JobId, j.StderrTail)
		}
	}
	// Events of every job, in order.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := client.WatchEvents(ctx, &pb.WatchEventsRequest{FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[uint64][]string{}
	for n := 0; n < 4*len(subs); n++ {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		kinds[ev.JobId] = append(kinds[ev.JobId], ev.Kind)
	}
	for _, s := range subs {
		if got := strings.Join(kinds[s.id], " "); got != "queued assigned started completed" {
			t.Errorf("job %d events: %s", s.id, got)
		}
	}
	// Billing equals the jobs' CPU.
	for _, tenant := range []string{"gold", "silver", "free"} {
		u, err := client.TenantUsage(ctx, &pb.TenantUsageRequest{Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		list, _ := client.ListJobs(ctx, &pb.ListJobsRequest{Tenant: tenant})
		var sum int64
		for _, j := range list.Jobs {
			sum += j.CpuMs
		}
		if u.CpuBilledMs != sum || u.Completed != 3 {
			t.Errorf("%s billed %d ms for jobs of %d ms; %d completed", tenant, u.CpuBilledMs, sum, u.Completed)
		}
	}
}

// TestWorkerKilledMidJob: kill -9 the worker running a job; the job's
// process dies with it, the lease expires, the job is rerun on another
// worker and completes exactly once, and the tenant's failures count is 1.
func TestWorkerKilledMidJob(t *testing.T) {
	c := cluster.Start(t, 3, "--config", configFile(t, workerTimeouts))
	setupTenants(t, c, map[string]pb.Tier{"acme": pb.Tier_GOLD})
	a := c.AddWorker("wa", "md")
	a.Start("")
	marker := "2.0301"
	id := submitJob(t, c, 0, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_MD, EstCostMs: 1000, Payload: payload(t, "sleep", marker)})
	client := pb.NewClientClient(c.Nodes[2].Conn())
	waitJob(t, client, id, 30*time.Second, "running on wa", func(j *pb.Job) bool { return j.State == "running" && j.WorkerId == "wa" })
	b := c.AddWorker("wb", "md")
	b.Start("")
	a.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for len(pidsWith(marker)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if pids := pidsWith(marker); len(pids) > 0 {
		t.Errorf("the job outlived its killed worker: %v", pids)
	}
	j := waitJob(t, client, id, 40*time.Second, "completed on wb", func(j *pb.Job) bool { return j.State == "completed" })
	if j.Attempt != 2 || j.Failures != 1 {
		t.Errorf("job %d: attempt %d failures %d, want 2 and 1", id, j.Attempt, j.Failures)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := client.TenantUsage(ctx, &pb.TenantUsageRequest{Tenant: "acme"})
	if err != nil || u.Failures != 1 || u.Completed != 1 || u.Requeues != 1 {
		t.Errorf("usage: %v %v", u, err)
	}
	events := collectEvents(t, client, id)
	if strings.Count(events, "completed") != 1 || !strings.Contains(events, "requeued(lease_expired)") {
		t.Errorf("events of job %d: %s", id, events)
	}
}

// collectEvents returns one job's events as "kind(reason)" words: it
// reads the event log from the start until it is idle for 300 ms.
func collectEvents(t *testing.T, client pb.ClientClient, job uint64) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := client.WatchEvents(ctx, &pb.WatchEventsRequest{FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	evs := make(chan *pb.Event)
	go func() {
		defer close(evs)
		for {
			ev, err := s.Recv()
			if err != nil {
				return
			}
			select {
			case evs <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	var words []string
	for {
		select {
		case ev, ok := <-evs:
			if !ok {
				return strings.Join(words, " ")
			}
			if ev.JobId == job {
				w := ev.Kind
				if ev.Reason != "" {
					w += "(" + ev.Reason + ")"
				}
				words = append(words, w)
			}
		case <-time.After(300 * time.Millisecond):
			return strings.Join(words, " ")
		}
	}
}

// TestWorkerPausedPastLease: SIGSTOP the worker running a job past its
// lease; the job runs again elsewhere; on SIGCONT the paused worker reports
// its run, which is fenced off: the job's result is the second attempt's,
// and the zombie's CPU is billed.
func TestWorkerPausedPastLease(t *testing.T) {
	burn := cluster.Helper(t, "./test/testdata/burn")
	c := cluster.Start(t, 3, "--config", configFile(t, workerTimeouts))
	setupTenants(t, c, map[string]pb.Tier{"acme": pb.Tier_GOLD})
	a := c.AddWorker("wa", "md")
	a.Start("")
	id := submitJob(t, c, 0, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_MD, EstCostMs: 1000, Payload: payload(t, burn, "-ms", "1200")})
	client := pb.NewClientClient(c.Nodes[1].Conn())
	waitJob(t, client, id, 30*time.Second, "running on wa", func(j *pb.Job) bool { return j.State == "running" && j.WorkerId == "wa" })
	a.Signal(syscall.SIGSTOP)
	b := c.AddWorker("wb", "md")
	b.Start("")
	j := waitJob(t, client, id, 40*time.Second, "completed by its second attempt", func(j *pb.Job) bool { return j.State == "completed" })
	if j.Attempt != 2 {
		t.Fatalf("completed by attempt %d", j.Attempt)
	}
	a.Signal(syscall.SIGCONT)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var u *pb.TenantUsageResponse
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var err error
		if u, err = client.TenantUsage(ctx, &pb.TenantUsageRequest{Tenant: "acme"}); err == nil && u.ZombieCpuMs > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if u == nil || u.ZombieCpuMs < 1000 {
		t.Fatalf("the zombie's CPU was not billed: %v\n%s", u, a.Log())
	}
	if u.CpuBilledMs != u.ZombieCpuMs+j.CpuMs || u.Completed != 1 {
		t.Errorf("billed %d = zombie %d + final %d? completed %d", u.CpuBilledMs, u.ZombieCpuMs, j.CpuMs, u.Completed)
	}
	final, _ := client.GetJob(ctx, &pb.GetJobRequest{JobId: id})
	if final.Attempt != 2 || final.CpuMs != j.CpuMs || final.State != "completed" {
		t.Errorf("the late report changed the job: %v", final)
	}
	if !strings.Contains(a.Log(), "the leader rejected this run's result") {
		t.Errorf("the paused worker was not told its report was stale:\n%s", cluster.Tail(a.LogPath, 20))
	}
	t.Logf("zombie CPU %d ms billed; final result from attempt 2 (%d ms)", u.ZombieCpuMs, j.CpuMs)
}

// TestLeaderKilledWhileJobsRun: kill -9 the leader while workers run
// jobs; the workers reconnect to the new leader, their leases resume, and
// every job completes once, on its first attempt.
func TestLeaderKilledWhileJobsRun(t *testing.T) {
	c := cluster.Start(t, 3, "--config", configFile(t, workerTimeouts))
	setupTenants(t, c, map[string]pb.Tier{"acme": pb.Tier_GOLD, "beta": pb.Tier_FREE})
	for i := range 3 {
		c.AddWorker(fmt.Sprintf("w%d", i), "md").Start("")
	}
	var ids []uint64
	for i := range 6 {
		ids = append(ids, submitJob(t, c, i, &pb.SubmitRequest{Tenant: []string{"acme", "beta"}[i%2], Size: pb.Size_MD, EstCostMs: 3000, Payload: payload(t, "sleep", "3")}))
	}
	leader := c.WaitLeader(10 * time.Second)
	follower := c.Followers(leader)[0]
	client := pb.NewClientClient(follower.Conn())
	for _, id := range ids[:3] {
		waitJob(t, client, id, 30*time.Second, "running", func(j *pb.Job) bool { return j.State == "running" })
	}
	t.Logf("kill -9 leader %s while 3 jobs run", leader.ID)
	leader.Kill()
	for _, id := range ids {
		j := waitJob(t, client, id, 60*time.Second, "completed", func(j *pb.Job) bool { return j.State == "completed" })
		if j.Attempt != 1 || j.Failures != 0 {
			t.Errorf("job %d completed on attempt %d with %d failures: a lease was lost in the failover", id, j.Attempt, j.Failures)
		}
	}
	for _, id := range ids {
		if ev := collectEvents(t, client, id); ev != "queued assigned started completed" {
			t.Errorf("job %d events: %s", id, ev)
		}
	}
}

// TestLeaderStopsCleanlyWhileJobsRun: SIGTERM to the leader while
// workers hold jobs: it hands leadership over first, so its worker streams
// close at once (it exits well within the 5 s stream grace) and the jobs
// finish on their first attempt under the next leader.
func TestLeaderStopsCleanlyWhileJobsRun(t *testing.T) {
	c := cluster.Start(t, 3, "--config", configFile(t, workerTimeouts))
	setupTenants(t, c, map[string]pb.Tier{"acme": pb.Tier_GOLD})
	for i := range 2 {
		c.AddWorker(fmt.Sprintf("w%d", i), "md").Start("")
	}
	var ids []uint64
	for i := range 4 {
		ids = append(ids, submitJob(t, c, i, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_MD, EstCostMs: 2000, Payload: payload(t, "sleep", "2")}))
	}
	leader := c.WaitLeader(10 * time.Second)
	follower := c.Followers(leader)[0]
	client := pb.NewClientClient(follower.Conn())
	for _, id := range ids[:2] {
		waitJob(t, client, id, 30*time.Second, "running", func(j *pb.Job) bool { return j.State == "running" })
	}
	// A watcher on the stopping node is told to move on at once.
	watch, err := pb.NewClientClient(leader.Conn()).WatchEvents(context.Background(), &pb.WatchEventsRequest{FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	watchEnd := make(chan error, 1)
	go func() {
		for {
			if _, err := watch.Recv(); err != nil {
				watchEnd <- err
				return
			}
		}
	}()
	start := time.Now()
	if err := leader.Stop(); err != nil {
		t.Fatalf("clean stop: %v", err)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("the leader took %s to stop: its worker or watch streams waited out the grace", took.Round(time.Millisecond))
	}
	select {
	case err := <-watchEnd:
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "resume the watch on another node") {
			t.Errorf("the watch on the stopped node ended with %v, want UNAVAILABLE naming where to resume", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the watch on the stopped node did not end")
	}
	if !strings.Contains(leader.Log(), "leadership lost") {
		t.Error("the leader did not hand leadership over before stopping")
	}
	for _, id := range ids {
		j := waitJob(t, client, id, 60*time.Second, "completed", func(j *pb.Job) bool { return j.State == "completed" })
		if j.Attempt != 1 || j.Failures != 0 {
			t.Errorf("job %d completed on attempt %d with %d failures", id, j.Attempt, j.Failures)
		}
	}
}

// TestCancelAndTimeout: cancelling a running job stops its whole process
// tree within the grace and ends it cancelled; a job past its timeout ends
// timed_out and is not retried.
func TestCancelAndTimeout(t *testing.T) {
	c := cluster.Start(t, 3, "--config", configFile(t, workerTimeouts))
	setupTenants(t, c, map[string]pb.Tier{"acme": pb.Tier_GOLD})
	c.AddWorker("w0", "md").Start("")
	marker := "9.0417"
	id := submitJob(t, c, 1, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_MD, EstCostMs: 1000,
		Payload: payload(t, "sh", "-c", "sleep "+marker+" & sleep "+marker+"; wait")})
	client := pb.NewClientClient(c.Nodes[0].Conn())
	waitJob(t, client, id, 30*time.Second, "running", func(j *pb.Job) bool { return j.State == "running" })
	deadline := time.Now().Add(5 * time.Second)
	for len(pidsWith(marker)) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(pidsWith(marker)); n < 2 {
		t.Fatalf("the job's tree has %d sleeps", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := client.CancelJob(ctx, &pb.CancelJobRequest{JobId: id}); err != nil {
		t.Fatal(err)
	}
	for len(pidsWith(marker)) > 0 {
		if time.Since(start) > 1500*time.Millisecond { // the grace is 1 s
			t.Fatalf("the job's processes outlived the grace: %v", pidsWith(marker))
		}
		time.Sleep(20 * time.Millisecond)
	}
	gone := time.Since(start)
	j := waitJob(t, client, id, 10*time.Second, "cancelled", func(j *pb.Job) bool { return j.State == "cancelled" })
	t.Logf("process tree gone %s after the cancel; job %s", gone.Round(time.Millisecond), j.State)

	tid := submitJob(t, c, 2, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_MD, EstCostMs: 1000, TimeoutMs: 800, MaxAttempts: 3, Payload: payload(t, "sleep", "30")})
	waitJob(t, client, tid, 30*time.Second, "timed_out", func(j *pb.Job) bool { return j.State == "timed_out" })
	time.Sleep(2 * time.Second)
	j, _ = client.GetJob(ctx, &pb.GetJobRequest{JobId: tid})
	if j.State != "timed_out" || j.Attempt != 1 || j.Cancel != "timeout" {
		t.Errorf("timed-out job: %v", j)
	}
	if ev := collectEvents(t, client, tid); ev != "queued assigned started cancel_requested(timeout) timed_out(timeout)" {
		t.Errorf("timed-out job events: %s", ev)
	}
}

// TestWorkerPartitionedKillsItsJob: a worker cut off from the cluster (a
// black-holing proxy) kills its own job after self_kill_after, before the
// job's lease expires and the job runs elsewhere.
func TestWorkerPartitionedKillsItsJob(t *testing.T) {
	c := cluster.Start(t, 3, "--config", configFile(t, workerTimeouts))
	setupTenants(t, c, map[string]pb.Tier{"acme": pb.Tier_GOLD})
	var proxies []*cluster.Proxy
	var addrs []string
	for _, n := range c.Nodes {
		p := cluster.NewProxy(t, n.GRPCAddr)
		proxies = append(proxies, p)
		addrs = append(addrs, p.Addr)
	}
	w := c.AddWorker("wp", "md")
	w.Start(strings.Join(addrs, ","))
	marker := "8.0923"
	id := submitJob(t, c, 0, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_MD, EstCostMs: 1000, Payload: payload(t, "sleep", marker)})
	client := pb.NewClientClient(c.Nodes[0].Conn())
	waitJob(t, client, id, 30*time.Second, "running", func(j *pb.Job) bool { return j.State == "running" })
	cut := time.Now()
	for _, p := range proxies {
		p.Block()
	}
	var killedAt, requeuedAt time.Duration
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && (killedAt == 0 || requeuedAt == 0) {
		if killedAt == 0 && len(pidsWith(marker)) == 0 {
			killedAt = time.Since(cut)
		}
		if requeuedAt == 0 {
			if j, err := client.GetJob(context.Background(), &pb.GetJobRequest{JobId: id}); err == nil && j.State == "queued" {
				requeuedAt = time.Since(cut)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if killedAt == 0 || requeuedAt == 0 {
		t.Fatalf("killed after %s, requeued after %s", killedAt, requeuedAt)
	}
	if killedAt >= requeuedAt {
		t.Fatalf("the partitioned worker killed its job %s after the cut, after the lease expired (%s)", killedAt, requeuedAt)
	}
	if !strings.Contains(w.Log(), "no contact with the cluster") {
		t.Errorf("the worker log does not say why it killed the job")
	}
	t.Logf("job killed by its partitioned worker %s after the cut; lease expired at %s", killedAt.Round(time.Millisecond), requeuedAt.Round(time.Millisecond))
}

// TestWorkerIdentity, with real worker processes against three nodes with
// tokens: a second worker process started with the shared worker token
// and the victim's ID while the victim runs a job is refused (ABORTED,
// retried) and never connects, and the victim's job completes with the
// CPU it measured itself; a worker whose bound token does not cover its
// ID exits with PERMISSION_DENIED while one inside the binding runs a
// job; drain is refused to a worker token that is not the worker's own.
func TestWorkerIdentity(t *testing.T) {
	const gpuToken = "gpu-worker-secret-0001"
	burn := cluster.Helper(t, "./test/testdata/burn")
	c := startWithTokens(t, 3, fmt.Sprintf("[[auth.tokens]]\nrole = \"worker\"\nworker_id = \"gpu-*\"\ntoken = %q\n%s", gpuToken, workerTimeouts))
	setupTenants(t, c, map[string]pb.Tier{"acme": pb.Tier_GOLD})
	client := pb.NewClientClient(c.Nodes[0].Conn())

	victim := c.AddWorker("victim", "md")
	victim.Token = workerToken
	victim.Start("")
	self := filepath.Join(t.TempDir(), "victim.cpu")
	job := submitJob(t, c, 1, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_MD, EstCostMs: 500,
		Payload: payload(t, burn, "-ms", "400", "-sleep", "3s", "-out", self)})
	waitJob(t, client, job, 30*time.Second, "running on the victim", func(j *pb.Job) bool { return j.State == "running" && j.WorkerId == "victim" })

	attacker := c.AddWorker("attacker", "md")
	attacker.Args = []string{"--id", "victim"}
	attacker.Token = workerToken
	attacker.Start("")
	waitLogged(t, 30*time.Second, "the second worker with the victim's ID to be refused ABORTED", attacker, "code = Aborted")
	j := waitJob(t, client, job, 60*time.Second, "completed", func(j *pb.Job) bool { return j.State == "completed" })
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	measured, _ := strconv.ParseInt(string(b), 10, 64)
	if diff := float64(j.CpuMs-measured) / float64(measured); j.Attempt != 1 || diff < -0.05 || diff > 0.05 {
		t.Errorf("job %d: attempt %d charged %d ms CPU, measured itself %d ms", job, j.Attempt, j.CpuMs, measured)
	}
	if log := attacker.Log(); strings.Contains(log, "connected") || !strings.Contains(log, `has a live session`) {
		t.Errorf("the second worker with the victim's ID:\n%s", cluster.Tail(attacker.LogPath, 20))
	}
	if log := victim.Log(); strings.Contains(log, "reconnecting") {
		t.Errorf("the victim lost its session:\n%s", cluster.Tail(victim.LogPath, 20))
	}

	// A bound token: outside its binding the worker exits; inside, it works.
	outside := c.AddWorker("cpu-1", "lg")
	outside.Token = gpuToken
	outside.Start("")
	if !outside.Wait(30 * time.Second) {
		t.Fatal("a worker outside its token's binding still runs")
	}
	if log := outside.Log(); !strings.Contains(log, "(PERMISSION_DENIED)") || !strings.Contains(log, `outside this token's binding`) {
		t.Errorf("worker outside its binding:\n%s", cluster.Tail(outside.LogPath, 10))
	}
	inside := c.AddWorker("gpu-1", "lg")
	inside.Token = gpuToken
	inside.Start("")
	lg := submitJob(t, c, 2, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_LG, EstCostMs: 10, Payload: payload(t, "true")})
	waitJob(t, client, lg, 60*time.Second, "completed", func(j *pb.Job) bool { return j.State == "completed" })
	if !strings.Contains(inside.Log(), fmt.Sprintf("job started: job=%d attempt=1", lg)) {
		t.Errorf("the lg job did not run on gpu-1:\n%s", cluster.Tail(inside.LogPath, 10))
	}

	// Drain: the worker's own token, or an admin's.
	for _, d := range []struct {
		id, token, want string
	}{
		{"victim", workerToken, `PERMISSION_DENIED: worker_id: draining worker "victim" needs an admin token or that worker's own token`},
		{"victim", gpuToken, `PERMISSION_DENIED: worker_id: draining worker "victim" needs an admin token or that worker's own token`},
		{"gpu-1", gpuToken, "worker gpu-1 drained"},
		{"victim", adminToken, "worker victim drained"},
	} {
		out, errOut, err := c.Run("worker", "drain", d.id, "--server", c.Nodes[2].GRPCAddr, "--token", d.token)
		if !strings.Contains(out+errOut, d.want) || (err == nil) != strings.HasSuffix(d.want, "drained") {
			t.Errorf("drain %s: %q %q %v, want %q", d.id, out, errOut, err, d.want)
		}
	}
}

// TestWorkersOfBothProtocols: a worker of this build (it folds its next
// Ready into each Finished, and reports a run that ends before its
// Started is due by the Finished alone) and one of an older build (all
// of them apart, played with --test-separate-ready and
// --test-started-at-once) share a leader; each says which it does when it
// connects, both keep taking jobs until all are done, and every job's
// events are the same: queued, assigned, started, completed.
func TestWorkersOfBothProtocols(t *testing.T) {
	// A heartbeat of a second lets a Started wait 100 ms: longer than a
	// run of true takes, shorter than one of sleep 0.2.
	c := cluster.Start(t, 1, "--config", configFile(t, `[scheduler]
heartbeat_interval = "1s"
self_kill_after = "4s"
lease_timeout = "5s"
ack_timeout = "5s"
`))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := pb.NewAdminClient(c.Nodes[0].Conn()).UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "acme", Tier: pb.Tier_GOLD.Enum()}); err != nil {
		t.Fatal(err)
	}
	older := c.AddWorker("w-older", "sm")
	older.Args = []string{"--test-separate-ready", "--test-started-at-once"}
	older.Start("")
	newer := c.AddWorker("w-newer", "sm")
	newer.Start("")
	for w, says := range map[*cluster.Worker]string{older: "ready_with_finished=false started_delay=0s", newer: "ready_with_finished=true started_delay=100ms"} {
		waitFor(t, 30*time.Second, w.ID+" to connect", func() (bool, string) {
			return strings.Contains(w.Log(), says), w.Log()
		})
	}
	const n = 40
	batch := &pb.SubmitBatchRequest{}
	for i := range n {
		argv := []string{"true"}
		if i%2 == 1 {
			argv = []string{"sleep", "0.2"}
		}
		batch.Jobs = append(batch.Jobs, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 100, Payload: payload(t, argv...)})
	}
	cl := pb.NewClientClient(c.Nodes[0].Conn())
	resp, err := cl.SubmitBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]int{}
	for _, r := range resp.Results {
		j := waitJob(t, cl, r.JobId, time.Minute, "completed", func(j *pb.Job) bool { return j.State == "completed" })
		ran[j.WorkerId]++
	}
	if ran[older.ID] < 5 || ran[newer.ID] < 5 || ran[older.ID]+ran[newer.ID] != n {
		t.Fatalf("jobs run by each worker: %v; want all %d, at least 5 each", ran, n)
	}

	events := map[uint64][]string{}
	watch, err := cl.WatchEvents(ctx, &pb.WatchEventsRequest{Tenant: "acme", FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	for seen := 0; seen < 4*n; seen++ {
		ev, err := watch.Recv()
		if err != nil {
			t.Fatalf("after %d events: %v", seen, err)
		}
		events[ev.JobId] = append(events[ev.JobId], ev.Kind)
	}
	for _, r := range resp.Results {
		if got := strings.Join(events[r.JobId], " "); got != "queued assigned started completed" {
			t.Errorf("job %d: events %q", r.JobId, got)
		}
	}
	m, err := web.Scrape(ctx, "http://"+c.Nodes[0].HTTPAddr+"/metrics", "")
	if err != nil {
		t.Fatal(err)
	}
	folded := m["barista_worker_starts_with_finished_total"]
	t.Logf("runs by worker %v; Started replicated with the Finished for %.0f", ran, folded)
	if folded < 1 || folded > float64(ran[newer.ID]) {
		t.Fatalf("%.0f Started replicated with their Finished; want at least one, and at most the %d runs of %s", folded, ran[newer.ID], newer.ID)
	}
}
