package snapshot

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/hashicorp/raft"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/fsm/fairness"
	"github.com/baristahq/barista/internal/evidence"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Statement replays the window spec of src and returns the usage
// statement of the tenant named tenant over it (SPEC §3 "Evidence of
// fairness"; docs/fairness.md says what each figure is).
func Statement(src Source, tenant string, spec WindowSpec) (*evidence.Statement, error) {
	c := &statementCollector{tenant: tenant, st: &evidence.Statement{Tenant: tenant}, rows: map[usageKey]int{}, since: map[sfq.JobID]sfq.Time{}}
	w, err := replayWindow(src, spec, c)
	if err != nil {
		return nil, err
	}
	c.st.Window = w
	c.st.Finish()
	return c.st, nil
}

// Certificate replays the window spec of src and returns the certificate
// of fairness of the tenant named tenant over it. The window ends before
// an entry that changes the steal policy or the clamp (a certificate
// states one of each); its end says where.
func Certificate(src Source, tenant string, spec WindowSpec) (*evidence.Certificate, error) {
	c := &certCollector{tenant: tenant, cert: &evidence.Certificate{Tenant: tenant}, ids: map[uint32]string{}}
	w, err := replayWindow(src, spec, c)
	if err != nil {
		return nil, err
	}
	c.cert.Window = w
	c.cert.Seal()
	return c.cert, nil
}

type usageKey struct {
	pool        string
	size        sfq.Size
	class       sfq.Class
	defaultPool bool
}

// statementCollector builds a statement entry by entry: runs and CPU from
// the Finished and Expire commands, dispatches and waits from the events
// each entry appends, shares from the fairness ledgers restarted at the
// window's start.
type statementCollector struct {
	tenant string
	st     *evidence.Statement
	rows   map[usageKey]int
	keys   []usageKey
	since  map[sfq.JobID]sfq.Time // when each of the tenant's queued jobs entered its queue
	seq    uint64                 // the next event to read
}

// jobKey is where a job's usage goes, and whether it is the tenant's.
func (c *statementCollector) jobKey(s *sfq.Scheduler, j *sfq.Job) (usageKey, bool) {
	if s.TenantName(j.Tenant) != c.tenant {
		return usageKey{}, false
	}
	k := usageKey{pool: sfq.DefaultPoolName, size: j.Size, class: j.Class, defaultPool: true}
	if p := s.LanePool(j.Tenant); p != sfq.DefaultPool {
		k.pool, k.defaultPool = s.PoolName(p), false
	}
	return k, true
}

func (c *statementCollector) row(k usageKey) *evidence.Usage {
	i, ok := c.rows[k]
	if !ok {
		i = len(c.st.CPU)
		c.rows[k] = i
		c.keys = append(c.keys, k)
		c.st.CPU = append(c.st.CPU, evidence.Usage{Pool: k.pool, Size: k.size.String(), Class: k.class.String()})
	}
	return &c.st.CPU[i]
}

func (c *statementCollector) begin(f *fsm.FSM, at sfq.Time) error {
	f.RestartFairness(at)
	_, c.seq = f.Events(0, func(ev *fsm.Event) bool {
		c.event(ev, nil)
		return true
	})
	return nil
}

// event follows one event of the tenant's: when its jobs enter a queue,
// and (with waited) each dispatch.
func (c *statementCollector) event(ev *fsm.Event, waited func(job sfq.JobID, ms int64)) {
	switch ev.Kind {
	case fsm.EvQueued, fsm.EvReleased, fsm.EvRequeued:
		c.since[ev.Job] = ev.At
	case fsm.EvAssigned:
		if since, ok := c.since[ev.Job]; ok && waited != nil {
			waited(ev.Job, int64(ev.At-since))
		} else if waited != nil {
			waited(ev.Job, -1)
		}
		delete(c.since, ev.Job)
	}
}

func (c *statementCollector) entry(f *fsm.FSM, l *raft.Log) (bool, error) {
	env, err := fsm.Decode(l.Data)
	if err != nil {
		return false, &fsm.FatalError{Index: l.Index, Err: err}
	}
	// What the entry's reports are about, before it moves anything.
	type about struct {
		key     usageKey
		ok      bool
		started bool // a WorkerHello's job: it was running
	}
	jobs := make([]about, len(env.Commands))
	held := make([]sfq.JobID, len(env.Commands)) // the job each WorkerHello's worker holds
	for i, cmd := range env.Commands {
		if h := cmd.GetWorkerHello(); h != nil {
			if w, ok := f.Worker(h.WorkerId); ok {
				held[i] = w.Job
			}
		}
	}
	f.Read(func(s *sfq.Scheduler) {
		for i, cmd := range env.Commands {
			if held[i] != 0 {
				if j, ok := s.Job(held[i]); ok {
					jobs[i].key, jobs[i].ok = c.jobKey(s, &j)
					jobs[i].started = j.State == sfq.Running
				}
			}
			if id := commandJob(cmd); id != 0 && (cmd.GetFinished() != nil || cmd.GetExpire() != nil) {
				if j, ok := s.Job(sfq.JobID(id)); ok {
					jobs[i].key, jobs[i].ok = c.jobKey(s, &j)
				}
			}
		}
	})
	out := f.Apply(l)
	if err, ok := out.(error); ok {
		return false, err
	}
	results, _ := out.([]fsm.Result)
	for i, cmd := range env.Commands {
		if !jobs[i].ok || i >= len(results) {
			continue
		}
		r := results[i]
		u := c.row(jobs[i].key)
		switch x := cmd.Cmd.(type) {
		case *clusterpb.Command_Finished:
			switch r.Outcome {
			case sfq.Changed:
				u.Runs.Add(outcomeName(x.Finished.Outcome))
				u.CPUMs += x.Finished.CpuMs
			case sfq.Zombie:
				u.Runs.Add("zombie")
				u.CPUMs += x.Finished.CpuMs
			}
		case *clusterpb.Command_WorkerHello:
			// Its worker's new session did not list the job it held.
			if r.Code != fsm.OK || r.Outcome != sfq.Changed || r.Job != held[i] {
				continue
			}
			if jobs[i].started {
				u.Runs.Add("lost")
			} else {
				u.Runs.Add("unstarted")
			}
		case *clusterpb.Command_Expire:
			if r.Code != fsm.OK || r.Outcome != sfq.Changed {
				continue
			}
			switch x.Expire.Kind {
			case clusterpb.ExpireKind_LEASE:
				u.Runs.Add("lost")
			case clusterpb.ExpireKind_ACK:
				u.Runs.Add("unstarted")
			}
		}
	}
	// Dispatches and waits from the events the entry appended.
	var evs []fsm.Event
	_, c.seq = f.Events(c.seq, func(ev *fsm.Event) bool {
		evs = append(evs, *ev)
		return true
	})
	for i := range evs {
		ev := &evs[i]
		c.event(ev, func(id sfq.JobID, ms int64) {
			f.Read(func(s *sfq.Scheduler) {
				j, ok := s.Job(id)
				if !ok {
					return
				}
				k, mine := c.jobKey(s, &j)
				if !mine {
					return
				}
				if ms < 0 { // entered its queue before the window, event no longer retained
					ms = int64(ev.At - j.SubmittedAt)
				}
				c.row(k).AddWait(ms)
			})
		})
	}
	return false, nil
}

// outcomeName is a reported outcome's name in a statement.
func outcomeName(o pb.Outcome) string {
	switch o {
	case pb.Outcome_OK:
		return "ok"
	case pb.Outcome_FAILED:
		return "failed"
	case pb.Outcome_CANCELLED:
		return "cancelled"
	case pb.Outcome_SNOOZED:
		return "snoozed"
	case pb.Outcome_UNKNOWN_KIND:
		return "unstarted" // handed to a worker that does not run its kind: never run
	}
	return "failed"
}

func (c *statementCollector) end(f *fsm.FSM, at sfq.Time) error {
	// Rows by pool (default first, then by name), size, class (service
	// order).
	order := make([]int, len(c.keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		ka, kb := c.keys[a], c.keys[b]
		if ka.defaultPool != kb.defaultPool {
			if ka.defaultPool {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(ka.pool, kb.pool), cmp.Compare(ka.size, kb.size), cmp.Compare(classRank(ka.class), classRank(kb.class)))
	})
	rows := make([]evidence.Usage, len(order))
	for i, o := range order {
		rows[i] = c.st.CPU[o]
	}
	c.st.CPU = rows
	type shareKey struct{ pool, class string }
	at2 := map[shareKey]int{}
	f.TenantShares(c.tenant, at, func(l *fairness.Line) {
		k := shareKey{cmp.Or(l.Pool, sfq.DefaultPoolName), l.Class.String()}
		i, ok := at2[k]
		if !ok {
			i = len(c.st.Shares)
			at2[k] = i
			c.st.Shares = append(c.st.Shares, evidence.Share{Pool: k.pool, Class: k.class, ClassChargedMs: l.Whole.ClassChargedMs,
				ClassBilledMs: l.Whole.ClassBilledMs, BusyMs: l.Whole.BusyMs})
		}
		sh := &c.st.Shares[i]
		sh.ChargedMs += l.Whole.ChargedMs
		sh.BilledMs += l.Whole.BilledMs
		sh.EntitledQ24 += l.Whole.EntitledQ24
	})
	return nil
}

// classRank orders classes as service does: critical, high, normal, low.
func classRank(c sfq.Class) int {
	classes := sfq.Classes()
	return slices.Index(classes[:], c)
}

// certCollector builds a certificate command by command: at each
// Dispatch's pick (the state machine's pick observer) it notes the
// tenant's candidates in the worker's pool; after the Dispatch it writes
// the line, with the chosen job's key.
type certCollector struct {
	tenant string
	cert   *evidence.Certificate
	ids    map[uint32]string // other tenants (own index) by opaque name
	policy sfq.StealPolicy
	clamp  sfq.ClampMode
	// picked is what the observer saw at the current command's pick.
	picked *pickSeen
}

type pickSeen struct {
	pool  string
	ws    sfq.Size
	cands []sfq.Candidate
}

func (c *certCollector) begin(f *fsm.FSM, at sfq.Time) error {
	cfg := f.Config().Sched
	c.policy, c.clamp = cfg.Policy, cfg.Clamp
	c.cert.Policy, c.cert.MarginUs = policyOf(cfg.Policy)
	c.cert.Clamp = cfg.Clamp.String()
	f.SetPickObserver(func(s *sfq.Scheduler, pid sfq.PoolID, ws sfq.Size, w *sfq.Runs) {
		own, ok := s.TenantIndex(c.tenant)
		if !ok {
			return
		}
		for _, lane := range s.Lanes(own) {
			if s.LanePool(lane) != pid {
				continue
			}
			seen := &pickSeen{pool: sfq.DefaultPoolName, ws: ws}
			if pid != sfq.DefaultPool {
				seen.pool = s.PoolName(pid)
			}
			if s.LaneCandidatesFor(lane, w, func(cd sfq.Candidate) { seen.cands = append(seen.cands, cd) }) > 0 {
				c.picked = seen
			}
		}
	})
	return nil
}

// policyOf names a steal policy as a certificate does, with its margin.
func policyOf(p sfq.StealPolicy) (name string, marginUs int64) {
	if r, ok := p.(sfq.Reserve); ok {
		return "reserve", int64(r.Margin)
	}
	return "prefer-fit", 0
}

func (c *certCollector) entry(f *fsm.FSM, l *raft.Log) (bool, error) {
	env, err := fsm.Decode(l.Data)
	if err != nil {
		return false, &fsm.FatalError{Index: l.Index, Err: err}
	}
	for _, cmd := range env.Commands {
		if sc := cmd.GetSetConfig(); sc != nil && sc.Config != nil {
			if cfg, err := fsm.ConfigFromPB(sc.Config); err == nil && (cfg.Sched.Clamp != c.clamp || cfg.Sched.Policy != c.policy) {
				return true, nil // the window ends before the change
			}
		}
	}
	if len(env.Commands) == 0 {
		_, err := f.ApplyEnvelope(l.Index, env)
		return false, err
	}
	// One command at a time (a coalesced entry applies alike): the state
	// before each Dispatch is the one its pick saw.
	for _, cmd := range env.Commands {
		c.picked = nil
		one := &clusterpb.Envelope{Version: env.Version, StampMs: env.StampMs, WallMs: env.WallMs, Commands: []*clusterpb.Command{cmd}}
		out, err := f.ApplyEnvelope(l.Index, one)
		if err != nil {
			return false, err
		}
		if cmd.GetDispatch() == nil || !out[0].Assigned || c.picked == nil {
			continue
		}
		clock, _ := f.Clock()
		c.line(f, l.Index, clock, out[0].Job)
	}
	c.picked = nil
	return false, nil
}

// line writes the line of a dispatch that gave job id, the tenant having
// had the candidates c.picked.
func (c *certCollector) line(f *fsm.FSM, index uint64, at sfq.Time, id sfq.JobID) {
	p := c.picked
	ln := evidence.Line{Index: index, AtMs: int64(at), Pool: p.pool, WorkerSize: p.ws.String(), Mine: []evidence.Key{}}
	f.Read(func(s *sfq.Scheduler) {
		j, _ := s.Job(id)
		lane, _ := s.TenantAt(j.Tenant)
		ln.Chosen = evidence.Key{Tenant: evidence.Self, Job: uint64(id), Class: j.Class.String(), Size: j.Size.String(), DeadlineAtMs: int64(j.DeadlineAt()),
			Start: strconv.FormatInt(int64(j.StartTag), 10), Tier: int(lane.Tier)}
		if lane.Name != c.tenant {
			own := s.Owner(j.Tenant)
			name, ok := c.ids[own]
			if !ok {
				name = fmt.Sprintf("t%d", len(c.ids)+1)
				c.ids[own] = name
			}
			ln.Chosen.Tenant = name
		}
	})
	for _, cd := range p.cands {
		if cd.Job == id {
			continue
		}
		k := evidence.Key{Job: uint64(cd.Job), Class: cd.Class.String(), Size: cd.Size.String(), DeadlineAtMs: int64(cd.DeadlineAt),
			Start: strconv.FormatInt(int64(cd.Start), 10), Tier: int(cd.Tier)}
		k.Reason = c.cert.ReasonFor(ln.WorkerSize, &ln.Chosen, &k)
		ln.Mine = append(ln.Mine, k)
	}
	c.cert.Lines = append(c.cert.Lines, ln)
}

func (c *certCollector) end(f *fsm.FSM, at sfq.Time) error {
	f.SetPickObserver(nil)
	return nil
}
