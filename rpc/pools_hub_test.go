package rpc

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Pools on the leader (SPEC §3 "Pools", §8 rule 11): a worker serves one
// pool, named in its Hello, and is given jobs of that pool only.

func poolSetCmd(name string) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_PoolSet{PoolSet: &clusterpb.PoolSet{Name: name}}}
}

func (m *memHub) submitIn(tenant, pool string, size pb.Size) uint64 {
	m.t.Helper()
	return uint64(m.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant, Size: size, EstCostMs: 1000, Pool: pool}}})[0].Job)
}

// readyIn opens a session for a worker of pool and says it is ready.
func (m *memHub) readyIn(id string, size sfq.Size, pool string) *session {
	m.t.Helper()
	s, err := m.h.open(id, size, pool)
	if err != nil {
		m.t.Fatal(err)
	}
	m.handle(s, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Ready{Ready: &pb.Ready{}}})
	return s
}

// dispatches names the Dispatch commands of entries as "WORKER@POOL".
func dispatches(entries [][]*clusterpb.Command) string {
	var out []string
	for _, e := range entries {
		for _, c := range e {
			if d := c.GetDispatch(); d != nil {
				out = append(out, d.WorkerId+"@"+poolName(d.Pool))
			}
		}
	}
	return strings.Join(out, " ")
}

// TestDispatchPerPool: each worker is given a job of its own pool, never
// another's, though another pool's job is older; a worker whose pool has
// nothing for it is not asked for at all; a pause of one pool holds its
// workers alone.
func TestDispatchPerPool(t *testing.T) {
	m := newMemHub(t)
	m.propose(tenant("acme", pb.Tier_GOLD), poolSetCmd("gpu"))
	g1 := m.submitIn("acme", "gpu", pb.Size_MD)
	g2 := m.submitIn("acme", "gpu", pb.Size_MD)
	d1 := m.submitIn("acme", "", pb.Size_MD)
	cpu := m.readyIn("w-cpu", sfq.MD, "")
	gpu := m.readyIn("w-gpu", sfq.MD, "gpu")
	gpuDefault := m.readyIn("w-def", sfq.LG, "default") // "default" is the pool default
	before := len(m.mem.Entries())
	if !m.h.dispatchRound() {
		t.Fatal("the round assigned nothing")
	}
	if got := dispatches(m.mem.Entries()[before:]); got != "w-cpu@default w-gpu@gpu w-def@default" {
		t.Fatalf("proposed %q", got)
	}
	for _, c := range []struct {
		s    *session
		want string
	}{{cpu, fmt.Sprintf("[assign %d/1]", d1)}, {gpu, fmt.Sprintf("[assign %d/1]", g1)}, {gpuDefault, "[]"}} {
		if got := fmt.Sprint(sent(c.s)); got != c.want {
			t.Errorf("%s (pool %q) got %s, want %s", c.s.id, c.s.pool, got, c.want)
		}
	}
	// Only gpu has a job left: the default worker still ready is not
	// asked for; a second gpu worker is.
	gpu2 := m.readyIn("w-gpu2", sfq.LG, "gpu")
	before = len(m.mem.Entries())
	m.h.dispatchRound()
	if got := dispatches(m.mem.Entries()[before:]); got != "w-gpu2@gpu" {
		t.Fatalf("proposed %q, want the gpu worker's alone", got)
	}
	if got := fmt.Sprint(sent(gpu2)); got != fmt.Sprintf("[assign %d/1]", g2) {
		t.Fatalf("w-gpu2 got %s", got)
	}
	// gpu paused: its ready worker is held, the default pool's is not.
	m.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{Pool: "gpu"}}})
	m.submitIn("acme", "gpu", pb.Size_SM)
	d2 := m.submitIn("acme", "", pb.Size_SM)
	gpu3 := m.readyIn("w-gpu3", sfq.SM, "gpu")
	before = len(m.mem.Entries())
	m.h.dispatchRound()
	if got := dispatches(m.mem.Entries()[before:]); got != "w-def@default" {
		t.Fatalf("with gpu paused: proposed %q", got)
	}
	if got := fmt.Sprint(sent(gpuDefault)); got != fmt.Sprintf("[assign %d/1]", d2) {
		t.Fatalf("w-def got %s", got)
	}
	if got := sent(gpu3); len(got) != 0 {
		t.Fatalf("a worker of a paused pool got %q", got)
	}
}

// TestFinishedDispatchInPool: a Finished that carries the worker's next
// Ready is replicated with a Dispatch of the worker's pool only when that
// pool has a job it fits, whatever the other pools hold.
func TestFinishedDispatchInPool(t *testing.T) {
	m := newMemHub(t)
	m.propose(tenant("acme", pb.Tier_GOLD), poolSetCmd("gpu"))
	g1 := m.submitIn("acme", "gpu", pb.Size_MD)
	w := m.readyIn("w-gpu", sfq.MD, "gpu")
	m.h.dispatchRound()
	if got := fmt.Sprint(sent(w)); got != fmt.Sprintf("[assign %d/1]", g1) {
		t.Fatalf("w-gpu got %s", got)
	}
	m.submitIn("acme", "", pb.Size_MD) // the pool default's: not for w-gpu
	m.handle(w, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Started{Started: &pb.JobStarted{Job: g1, Attempt: 1}}})
	finish := func(job uint64) string {
		before := len(m.mem.Entries())
		m.handle(w, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Finished{Finished: &pb.JobFinished{Job: job, Attempt: 1,
			Outcome: pb.Outcome_OK, CpuMs: 10, ReadyCredit: 7}}})
		return commandKinds(m.mem.Entries()[before])
	}
	if got := finish(g1); got != fmt.Sprintf("finished %d/1 w-gpu", g1) {
		t.Fatalf("with nothing in gpu the Finished's entry is %q", got)
	}
	sent(w)
	g3 := m.submitIn("acme", "gpu", pb.Size_MD)
	m.h.dispatchRound()
	if got := fmt.Sprint(sent(w)); got != fmt.Sprintf("[assign %d/1]", g3) {
		t.Fatalf("w-gpu got %s", got)
	}
	m.handle(w, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Started{Started: &pb.JobStarted{Job: g3, Attempt: 1}}})
	m.submitIn("acme", "gpu", pb.Size_MD)
	if got := finish(g3); got != fmt.Sprintf("finished %d/1 w-gpu, dispatch w-gpu credit 7", g3) {
		t.Fatalf("with a job in gpu the Finished's entry is %q", got)
	}
	if d := m.mem.Entries()[len(m.mem.Entries())-1][1].GetDispatch(); d.Pool != "gpu" {
		t.Fatalf("the folded Dispatch names pool %q", d.Pool)
	}
}

// TestHelloPool: a worker naming a pool the state does not hold is
// refused with NOT_FOUND naming it; once the pool exists it connects.
func TestHelloPool(t *testing.T) {
	m := newMemHub(t)
	_, err := m.h.open("w1", sfq.MD, "gpu")
	if want := `rpc error: code = NotFound desc = hello.pool: unknown pool "gpu" (an admin creates it: barista pool set gpu)`; err == nil || err.Error() != want {
		t.Fatalf("unknown pool: %v, want %s", err, want)
	}
	m.propose(poolSetCmd("gpu"))
	if _, err := m.h.open("w1", sfq.MD, "gpu"); err != nil {
		t.Fatalf("a worker of pool gpu once it exists: %v", err)
	}
}

// TestGuardPoolDelete: a pool is not deleted while a worker of it is
// connected (FAILED_PRECONDITION naming the pool and the count); while a
// delete is being proposed, no worker of the pool connects; a worker
// whose pool was deleted under it anyway loses its session with
// NOT_FOUND at the next round.
func TestGuardPoolDelete(t *testing.T) {
	m := newMemHub(t)
	m.propose(poolSetCmd("gpu"), poolSetCmd("eu"))
	for i := range 4 {
		if _, err := m.h.open(fmt.Sprintf("g%d", i), sfq.MD, "gpu"); err != nil {
			t.Fatal(err)
		}
	}
	m.h.open("d1", sfq.MD, "")
	if n := m.h.connected("gpu"); n != 4 {
		t.Fatalf("connected(gpu) = %d", n)
	}
	_, err := m.h.guardPoolDelete("gpu")
	if want := "rpc error: code = FailedPrecondition desc = pool gpu has 4 connected workers (g0, g1, g2, ...): stop them, or start them in another pool, before deleting it"; err == nil || err.Error() != want {
		t.Fatalf("delete of a pool with workers: %v\nwant %s", err, want)
	}
	for i := range 3 {
		m.h.close(m.h.sessions[fmt.Sprintf("g%d", i)])
	}
	_, err = m.h.guardPoolDelete("gpu")
	if want := "rpc error: code = FailedPrecondition desc = pool gpu has 1 connected worker (g3): stop them, or start them in another pool, before deleting it"; err == nil || err.Error() != want {
		t.Fatalf("delete of a pool with a worker: %v\nwant %s", err, want)
	}
	release, err := m.h.guardPoolDelete("eu")
	if err != nil {
		t.Fatalf("delete of a pool without workers: %v", err)
	}
	if _, err := m.h.open("e1", sfq.MD, "eu"); status.Code(err) != codes.Unavailable {
		t.Fatalf("a worker of a pool being deleted: %v", err)
	}
	if _, err := m.h.open("g9", sfq.MD, "gpu"); err != nil {
		t.Fatalf("a worker of another pool meanwhile: %v", err)
	}
	release()
	release() // a second call changes nothing
	if len(m.h.deleting) != 0 {
		t.Fatalf("deleting after release: %v", m.h.deleting)
	}
	// The delete of eu failed (say): its workers connect again.
	e1, err := m.h.open("e1", sfq.MD, "eu")
	if err != nil {
		t.Fatal(err)
	}
	// eu is deleted under e1 (a delete the guard did not see: proposed
	// by a former leader): e1's session ends with NOT_FOUND.
	m.propose(&clusterpb.Command{Cmd: &clusterpb.Command_PoolDelete{PoolDelete: &clusterpb.PoolDelete{Name: "eu"}}})
	m.handle(e1, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Ready{Ready: &pb.Ready{}}})
	m.h.dispatchRound()
	select {
	case <-e1.done:
	default:
		t.Fatal("the session of a worker of a deleted pool is still open")
	}
	if err := m.h.failed(e1); err == nil || err.Error() != `rpc error: code = NotFound desc = hello.pool: unknown pool "eu" (an admin creates it: barista pool set eu)` {
		t.Fatalf("the session ended with %v", err)
	}
}

// TestDispatchRoundManyPools: a round with more (pool, size) pairs than
// it keeps budgets of still gives every worker its own pool's job.
func TestDispatchRoundManyPools(t *testing.T) {
	m := newMemHub(t)
	m.propose(tenant("acme", pb.Tier_GOLD))
	jobs := map[string]string{} // worker -> the assignment it must get
	var sessions []*session
	for i := range budgetSlots + 4 {
		pool := fmt.Sprintf("p%02d", i)
		m.propose(poolSetCmd(pool))
		job := m.submitIn("acme", pool, pb.Size_SM)
		id := fmt.Sprintf("w%02d", i)
		jobs[id] = fmt.Sprintf("[assign %d/1]", job)
		sessions = append(sessions, m.readyIn(id, []sfq.Size{sfq.SM, sfq.MD, sfq.LG}[i%3], pool))
	}
	if !m.h.dispatchRound() {
		t.Fatal("the round assigned nothing")
	}
	for _, s := range sessions {
		if got := fmt.Sprint(sent(s)); got != jobs[s.id] {
			t.Errorf("%s (pool %s) got %s, want %s", s.id, s.pool, got, jobs[s.id])
		}
	}
}
