package chaos

// The run's faults: the seeded schedule of kills, pauses, restarts and
// partitions, and the failover times they cause.

import (
	"context"
	"syscall"
	"time"
)

// Fault is one injected fault.
type Fault struct {
	Kind   string        `json:"kind"`
	Target string        `json:"target"`
	At     time.Time     `json:"at"`
	For    time.Duration `json:"for"`
	// Failover is, for a fault that removed the leader, the time from the
	// fault to the next dispatch a watcher saw committed.
	Failover time.Duration `json:"failover,omitempty"`
}

// leader returns the index of the node that leads now (-1 if none).
func (r *Run) leader() int {
	for i, n := range r.c.Nodes {
		if !n.Running() {
			continue
		}
		if st, err := n.Status(); err == nil && st.State == "leader" {
			return i
		}
	}
	return -1
}

func (r *Run) record(f Fault) *Fault {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	r.faults = append(r.faults, f)
	return &r.faults[len(r.faults)-1]
}

// term returns the highest term any running node reports.
func (r *Run) term() uint64 {
	var t uint64
	for _, n := range r.c.Nodes {
		if st, err := n.Status(); err == nil {
			t = max(t, st.Term)
		}
	}
	return t
}

// failoverAfter waits (up to 30 s) for a leader of a term above old, then
// for a dispatch a watcher receives after that, and returns the time from
// at to it (never less than the real failover: events committed before
// the fault are excluded by the term change).
func (r *Run) failoverAfter(at time.Time, old uint64) time.Duration {
	deadline := time.Now().Add(30 * time.Second)
	var elected time.Time
	for time.Now().Before(deadline) {
		if elected.IsZero() {
			if l := r.leader(); l >= 0 {
				if st, err := r.c.Nodes[l].Status(); err == nil && st.Term > old {
					elected = time.Now()
				}
			}
		} else if t := time.Unix(0, r.lastAssign.Load()); t.After(elected) {
			return t.Sub(at)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0
}

// faultKinds is the fault mix; the partition kinds need namespaces.
var faultKinds = []string{"kill-leader", "kill-follower", "kill-worker", "pause-worker", "pause-leader", "restart-node",
	"partition-node", "partition-worker", "cut-leader-out"}

// inject runs the seeded fault schedule until ctx ends: one fault at a
// time, each healed before the next.
func (r *Run) inject(ctx context.Context) {
	kinds := faultKinds
	if r.net == nil {
		kinds = kinds[:6]
	}
	for ctx.Err() == nil {
		sleepCtx(ctx, time.Duration(2000+r.rng.IntN(3000))*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		kind := kinds[r.rng.IntN(len(kinds))]
		hold := time.Duration(1000+r.rng.IntN(3000)) * time.Millisecond
		switch kind {
		case "kill-leader", "pause-leader", "cut-leader-out":
			l := r.leader()
			if l < 0 {
				continue
			}
			n := r.c.Nodes[l]
			old := r.term()
			at := time.Now()
			f := r.record(Fault{Kind: kind, Target: n.ID, At: at, For: hold})
			switch kind {
			case "kill-leader":
				n.Kill()
			case "pause-leader":
				n.Signal(syscall.SIGSTOP)
			case "cut-leader-out":
				for _, m := range append(r.net.Members(), "host") {
					if m != n.ID {
						r.net.Cut(n.ID, m)
					}
				}
			}
			f.Failover = r.failoverAfter(at, old)
			sleepCtx(context.Background(), max(0, hold-time.Since(at)))
			switch kind {
			case "kill-leader":
				n.Start()
			case "pause-leader":
				n.Signal(syscall.SIGCONT)
			case "cut-leader-out":
				r.net.Heal()
			}
		case "kill-follower", "restart-node", "partition-node":
			l := r.leader()
			var cands []int
			for i, n := range r.c.Nodes {
				if i != l && n.Running() {
					cands = append(cands, i)
				}
			}
			if kind != "kill-follower" && l >= 0 && r.rng.IntN(3) == 0 {
				cands = []int{l} // sometimes the leader
			}
			if len(cands) == 0 {
				continue
			}
			n := r.c.Nodes[cands[r.rng.IntN(len(cands))]]
			old := r.term()
			at := time.Now()
			f := r.record(Fault{Kind: kind, Target: n.ID, At: at, For: hold})
			wasLeader := l >= 0 && r.c.Nodes[l] == n
			stopped := make(chan struct{})
			switch kind {
			case "kill-follower":
				n.Kill()
			case "restart-node":
				// The failover clock runs while the node stops.
				go func() { n.Stop(); close(stopped) }()
			case "partition-node":
				r.isolate(n.ID)
			}
			if wasLeader {
				f.Failover = r.failoverAfter(at, old)
			}
			if kind == "restart-node" {
				<-stopped
			}
			sleepCtx(context.Background(), max(0, hold-time.Since(at)))
			if kind == "partition-node" {
				r.net.Heal()
			} else {
				n.Start()
			}
		case "kill-worker", "pause-worker", "partition-worker":
			w := r.c.Workers[r.rng.IntN(len(r.c.Workers))]
			if kind != "kill-worker" {
				hold = leaseTimeout + time.Duration(500+r.rng.IntN(2500))*time.Millisecond
			}
			r.record(Fault{Kind: kind, Target: w.ID, At: time.Now(), For: hold})
			switch kind {
			case "kill-worker":
				w.Kill()
				sleepCtx(context.Background(), hold)
				w.Start("")
			case "pause-worker":
				w.Signal(syscall.SIGSTOP)
				sleepCtx(context.Background(), hold)
				w.Signal(syscall.SIGCONT)
			case "partition-worker":
				r.isolate(w.ID)
				sleepCtx(context.Background(), hold)
				r.net.Heal()
			}
		}
	}
}

// isolate cuts every link of member, both ways.
func (r *Run) isolate(member string) {
	for _, m := range append(r.net.Members(), "host") {
		if m != member {
			r.net.Cut(member, m)
			r.net.Cut(m, member)
		}
	}
}
