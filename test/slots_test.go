package test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/test/cluster"
	"github.com/baristahq/barista/worker"
)

// connCounter counts the connections a worker holds, by address.
type connCounter struct {
	mu   sync.Mutex
	open map[string]int
}

func (c *connCounter) dial(ctx context.Context, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.open[addr]++
	c.mu.Unlock()
	return &countedConn{Conn: conn, c: c, addr: addr}, nil
}

// held returns the open connections: how many in all, and to addr.
func (c *connCounter) held(addr string) (all, to int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for a, n := range c.open {
		all += n
		if a == addr {
			to += n
		}
	}
	return all, to
}

type countedConn struct {
	net.Conn
	c    *connCounter
	addr string
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.c.mu.Lock()
		c.c.open[c.addr]--
		c.c.mu.Unlock()
	})
	return c.Conn.Close()
}

// startCountedWorker runs a worker of slots slots of size size named id
// against every node of addrs, its connections counted.
func startCountedWorker(t *testing.T, addrs []string, id string, size worker.Size, slots int, runner worker.Runner) (*worker.Worker, *connCounter) {
	t.Helper()
	cc := &connCounter{open: map[string]int{}}
	w, err := worker.NewWorker(worker.Config{ID: id, Size: size, Servers: addrs, MaxConcurrent: slots, Runner: runner,
		Dial:   []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(cc.dial)},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() { w.Run(ctx); close(finished) }()
	t.Cleanup(func() { cancel(); <-finished })
	return w, cc
}

// waitHeld waits until the worker holds exactly one connection, to addr.
func waitHeld(t *testing.T, cc *connCounter, addr string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		all, to := cc.held(addr)
		if all == 1 && to == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker holds %d connections, %d to the leader %s; want 1, to the leader", all, to, addr)
		}
	}
}

// busySessions counts the worker sessions of the leader at addr that run
// a job, and all of them.
func busySessions(t *testing.T, n *cluster.Node) (busy, all int) {
	t.Helper()
	resp, err := pb.NewWorkerClient(n.Conn()).ListWorkers(context.Background(), &pb.ListWorkersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range resp.Workers {
		if w.Connected {
			all++
			if w.State == "busy" {
				busy++
			}
		}
	}
	return busy, all
}

// insertHolds inserts n hold jobs and returns their IDs.
func insertHolds(t *testing.T, ctx context.Context, cl *client.Client, n int) []uint64 {
	t.Helper()
	var jobs []client.InsertManyParams
	for i := range n {
		jobs = append(jobs, client.InsertManyParams{Args: holdArgs{i}, Opts: &client.InsertOpts{Tenant: "acme", Cost: time.Second}})
	}
	res, err := cl.InsertMany(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint64, 0, n)
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("job %d: %v", i, r.Err)
		}
		ids = append(ids, r.ID)
	}
	return ids
}

// TestManySlotsOneConnection: a worker of 500 slots holds one connection
// to the leader of a three-node cluster (its slots' streams are one),
// the leader counts one more gRPC connection for it, and it runs 500
// jobs at once, one per slot (500 busy sessions); every job completes
// once.
func TestManySlotsOneConnection(t *testing.T) {
	const slots = 500
	c, cl, addrs, ctx := sdkCluster(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	ids := insertHolds(t, ctx, cl, slots)
	metrics := "http://" + leader.HTTPAddr + "/metrics"
	before, err := cluster.Scrape(metrics)
	if err != nil {
		t.Fatal(err)
	}
	h := newHolder()
	kinds := worker.NewKinds()
	h.register(kinds)
	w, cc := startCountedWorker(t, addrs, "many", worker.SizeMD, slots, kinds)
	waitRunning(t, h, slots)
	waitHeld(t, cc, leader.GRPCAddr)
	if busy, all := busySessions(t, leader); busy != slots || all != slots || w.Busy() != slots {
		t.Fatalf("the leader has %d sessions, %d busy; the worker %d busy; want %d of each", all, busy, w.Busy(), slots)
	}
	after, err := cluster.Scrape(metrics)
	if err != nil {
		t.Fatal(err)
	}
	const conns = `barista_connections{listener="grpc"}`
	if got, want := after[conns], before[conns]+1; got != want {
		t.Fatalf("the leader holds %v gRPC connections, want %v (%v before the worker, and its one)", got, want, before[conns])
	}
	h.releaseAll()
	for _, id := range ids {
		j := waitState(t, ctx, cl, id, "completed", func(j *client.Job) bool { return j.State == "completed" || j.State == "failed" })
		if j.State != "completed" || j.Attempt != 1 {
			t.Fatalf("job %d: %s at attempt %d, want completed at 1", id, j.State, j.Attempt)
		}
	}
	if most := h.most.Load(); most != slots {
		t.Fatalf("at most %d jobs ran at once, want %d", most, slots)
	}
}

// TestManySlotsFailover: a worker of 100 slots runs 100 jobs on one
// stream when the leader is killed (SIGKILL); the slots follow the new
// leader on one new connection, their leases resume, and every job
// completes once: one run each, at attempt 1, none lost.
func TestManySlotsFailover(t *testing.T) {
	const slots = 100
	c, cl, addrs, ctx := sdkCluster(t, 3)
	old := c.WaitLeader(10 * time.Second)
	ids := insertHolds(t, ctx, cl, slots)
	var mu sync.Mutex
	runs := map[uint64]int{}
	var running atomic.Int32
	release := make(chan struct{})
	kinds := worker.NewKinds()
	worker.Register(kinds, func(ctx context.Context, j *worker.Job[holdArgs]) error {
		mu.Lock()
		runs[j.ID]++
		mu.Unlock()
		running.Add(1)
		select {
		case <-release:
			j.Output(fmt.Sprint("held ", j.Args.N))
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	_, cc := startCountedWorker(t, addrs, "fo", worker.SizeMD, slots, kinds)
	for deadline := time.Now().Add(30 * time.Second); running.Load() != slots; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d runs started, want %d", running.Load(), slots)
		}
	}
	waitHeld(t, cc, old.GRPCAddr)
	old.Kill()
	var leader *cluster.Node
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if leader = c.WaitLeader(20 * time.Second); leader != old {
			if busy, _ := busySessions(t, leader); busy == slots {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the slots did not resume their jobs at the new leader within 30s")
		}
	}
	waitHeld(t, cc, leader.GRPCAddr)
	close(release)
	for _, id := range ids {
		j := waitState(t, ctx, cl, id, "completed", func(j *client.Job) bool { return j.State == "completed" || j.State == "failed" })
		if j.State != "completed" || j.Attempt != 1 || j.Stdout == "" {
			t.Fatalf("job %d: %s at attempt %d, output %q; want completed at 1", id, j.State, j.Attempt, j.Stdout)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if runs[id] != 1 {
			t.Fatalf("job %d ran %d times, want once", id, runs[id])
		}
	}
}

// TestWorkerSlotsCLI: barista worker --slots 4 runs four command jobs at
// once, as workers cli-1 .. cli-4, on one gRPC connection to the leader.
func TestWorkerSlotsCLI(t *testing.T) {
	c := cluster.Start(t, 1)
	setupTenants(t, c, map[string]pb.Tier{"acme": pb.Tier_GOLD})
	leader := c.WaitLeader(10 * time.Second)
	metrics := "http://" + leader.HTTPAddr + "/metrics"
	var ids []uint64
	for range 4 {
		ids = append(ids, submitJob(t, c, 0, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 100, Payload: payload(t, "sleep", "3")}))
	}
	before, err := cluster.Scrape(metrics)
	if err != nil {
		t.Fatal(err)
	}
	w := c.AddWorker("cli", "sm")
	w.Args = []string{"--slots", "4"}
	w.Start(leader.GRPCAddr)
	var resp *pb.ListWorkersResponse
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err = pb.NewWorkerClient(leader.Conn()).ListWorkers(context.Background(), &pb.ListWorkersRequest{}); err != nil {
			t.Fatal(err)
		}
		var busy []string
		for _, wi := range resp.Workers {
			if wi.State == "busy" {
				busy = append(busy, wi.WorkerId)
			}
		}
		if fmt.Sprint(busy) == "[cli-1 cli-2 cli-3 cli-4]" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("busy workers %v, want [cli-1 cli-2 cli-3 cli-4]", busy)
		}
	}
	after, err := cluster.Scrape(metrics)
	if err != nil {
		t.Fatal(err)
	}
	const conns = `barista_connections{listener="grpc"}`
	if got, want := after[conns], before[conns]+1; got != want {
		t.Fatalf("the leader holds %v gRPC connections, want %v (%v before the worker, and its one)", got, want, before[conns])
	}
	cl := pb.NewClientClient(leader.Conn())
	for _, id := range ids {
		if j := waitJob(t, cl, id, time.Minute, "completed", func(j *pb.Job) bool { return j.State == "completed" || j.State == "failed" }); j.State != "completed" || j.Attempt != 1 {
			t.Fatalf("job %d: %s at attempt %d, want completed at 1", id, j.State, j.Attempt)
		}
	}
}
