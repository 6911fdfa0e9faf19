// Package chaos runs barista under faults (kills, pauses, restarts,
// network partitions, clock offsets) with real server and worker
// processes and client load, records a history of what every client,
// watcher and job process saw, and checks it against the invariants of
// the design (SPEC §8).
package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baristahq/barista/snapshot"
)

// Op is one client operation, from its invocation to its last answer.
type Op struct {
	Kind   string    `json:"kind"` // submit, cancel, tenant
	Client int       `json:"client"`
	Key    string    `json:"key,omitempty"` // a submit's idempotency key
	Tenant string    `json:"tenant,omitempty"`
	Job    uint64    `json:"job,omitempty"` // the acknowledged job (submit) or the job (cancel)
	Invoke time.Time `json:"invoke"`
	Ack    time.Time `json:"ack,omitzero"` // zero: never acknowledged
	Result string    `json:"result"`       // "ok" or the last error
	Tries  int       `json:"tries"`
}

// Acked reports whether the operation was acknowledged.
func (o *Op) Acked() bool { return !o.Ack.IsZero() }

// WatchEvent is one event a watcher received.
type WatchEvent struct {
	Watcher int    `json:"watcher"`
	Seq     uint64 `json:"seq"`
	Job     uint64 `json:"job"`
	Kind    string `json:"kind"`
	Attempt uint32 `json:"attempt"`
}

// Attempt is one run of a job process, from its journal: Start at its
// "S" line, End at its "E" line, or, for a process killed without one,
// its last tick plus one tick interval (Ended false).
type Attempt struct {
	Job     uint64    `json:"job"`
	Attempt uint32    `json:"attempt"`
	Worker  string    `json:"worker"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Ended   bool      `json:"ended"`
}

// NodeFinal is a node's applied index and state hash at the end.
type NodeFinal struct {
	ID    string `json:"id"`
	Index uint64 `json:"index"`
	Hash  string `json:"hash"`
}

// History is everything a run observed, and what the checker reads.
type History struct {
	Ops      []Op         `json:"ops"`
	Events   []WatchEvent `json:"events"`
	Attempts []Attempt    `json:"attempts"`
	Nodes    []NodeFinal  `json:"nodes"`
	// Audit is the final leader's whole log, audited by barista replay
	// --audit; AuditIndex and AuditHash are where the audit ended.
	Audit      []snapshot.AuditFact `json:"-"`
	AuditIndex uint64               `json:"audit_index"`
	AuditHash  string               `json:"audit_hash"`
	// Fair lists the tenants of the fairness check in the pool default:
	// one job size, no caps, constant weight; PoolFair those of other
	// pools, by pool (rule 6 holds inside each pool).
	Fair     []string            `json:"fair"`
	PoolFair map[string][]string `json:"pool_fair,omitempty"`
	// Overlap is the longest two attempts of one job may overlap: the
	// journal's tick (an attempt killed by SIGKILL ends within one tick of
	// its last line).
	Overlap time.Duration `json:"overlap"`
}

// recorder collects a history from many goroutines.
type recorder struct {
	mu     sync.Mutex
	ops    []Op
	events []WatchEvent
}

func (r *recorder) op(o Op) {
	r.mu.Lock()
	r.ops = append(r.ops, o)
	r.mu.Unlock()
}

func (r *recorder) event(e WatchEvent) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// ReadJournal parses the job processes' journal ("S|T|E job attempt
// worker unixnano" lines) into attempts; tick bounds the end of an
// attempt killed without an "E".
func ReadJournal(path string, tick time.Duration) ([]Attempt, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	type key struct {
		job     uint64
		attempt uint32
		worker  string
	}
	runs := map[key]*Attempt{}
	var order []key
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		if len(fields) != 5 {
			return nil, fmt.Errorf("%s:%d: malformed journal line %q", path, line, sc.Text())
		}
		job, err1 := strconv.ParseUint(fields[1], 10, 64)
		attempt, err2 := strconv.ParseUint(fields[2], 10, 32)
		ns, err3 := strconv.ParseInt(fields[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("%s:%d: malformed journal line %q", path, line, sc.Text())
		}
		k := key{job, uint32(attempt), fields[3]}
		at := time.Unix(0, ns)
		a := runs[k]
		if a == nil {
			a = &Attempt{Job: job, Attempt: uint32(attempt), Worker: fields[3], Start: at, End: at}
			runs[k] = a
			order = append(order, k)
		}
		switch fields[0] {
		case "S":
			a.Start = at
		case "E":
			a.End, a.Ended = at, true
		case "T":
			if !a.Ended && at.After(a.End) {
				a.End = at
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := make([]Attempt, 0, len(order))
	for _, k := range order {
		a := *runs[k]
		if !a.Ended {
			a.End = a.End.Add(tick)
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out, nil
}

// Save writes the history (without the audit) as JSON, for a failed
// run's report.
func (h *History) Save(path string) error {
	b, err := json.MarshalIndent(h, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
