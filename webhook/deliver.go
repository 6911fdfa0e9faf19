package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/leader"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Node is what delivery needs of the leader it runs on: the node every
// leader loop sees (leader.Memory in tests).
type Node = leader.Node

// Defaults of Options.
const (
	DefaultTimeout        = 10 * time.Second
	DefaultWorkers        = 64
	DefaultSlowAfter      = time.Second
	DefaultCommitInterval = 500 * time.Millisecond
	DefaultMaxBatch       = 100
	DefaultMinBackoff     = time.Second
	DefaultMaxBackoff     = 5 * time.Minute
)

// Options configure delivery; zero fields take the defaults.
type Options struct {
	// Key is the cluster's webhook key; without it nothing is delivered
	// (and the leader says so).
	Key Key
	// Guard decides which addresses requests may reach (default: the
	// public internet only).
	Guard *Guard
	// Timeout bounds each request.
	Timeout time.Duration
	// Workers bounds the requests in flight over all endpoints (one per
	// endpoint at most). SlowWorkers of them (default: half) may go to
	// slow endpoints, the others only to prompt ones, so that slow
	// endpoints delay none but themselves. An endpoint is slow once a
	// request of its has been out SlowAfter, or timed out, and prompt
	// again once one is answered sooner. A prompt endpoint's request
	// that turns slow while out moves to the slow endpoints' share at
	// once; until it ends, that share may be exceeded (so at most
	// 2×Workers are ever in flight). Endpoints that have not answered
	// yet (new ones, and every one when a leader starts) take at most
	// half of the prompt share, so that those known to answer promptly
	// always find room.
	Workers, SlowWorkers int
	SlowAfter            time.Duration
	// CommitInterval is how often, at most, the delivered cursors are
	// proposed (one command for every endpoint that advanced).
	CommitInterval time.Duration
	// MaxBatch bounds the events of one request.
	MaxBatch int
	// MinBackoff doubles after each failure of an endpoint, up to
	// MaxBackoff; each wait is jittered.
	MinBackoff, MaxBackoff time.Duration
	Logger                 hclog.Logger
	// Registerer, if set, gets the deliverer's metrics.
	Registerer prometheus.Registerer

	// For tests: the HTTP client (default: the guard's), the wall clock
	// that stamps signatures, and the jitter that turns a backoff into a
	// wait (default: uniform in [d/2, d]).
	Client *http.Client
	Wall   func() time.Time
	Jitter func(time.Duration) time.Duration
}

func (o *Options) defaults() {
	if o.Guard == nil {
		o.Guard = NewGuard(nil)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	o.Workers = max(o.Workers, 2)
	if o.SlowWorkers <= 0 {
		o.SlowWorkers = o.Workers / 2
	}
	o.SlowWorkers = min(o.SlowWorkers, o.Workers-1)
	if o.SlowAfter <= 0 {
		o.SlowAfter = DefaultSlowAfter
	}
	if o.CommitInterval <= 0 {
		o.CommitInterval = DefaultCommitInterval
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(DefaultMaxBackoff, o.MinBackoff)
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Client == nil {
		o.Client = o.Guard.NewClient(ClientOptions{Timeout: o.Timeout})
	}
	if o.Wall == nil {
		o.Wall = time.Now
	}
	if o.Jitter == nil {
		o.Jitter = func(d time.Duration) time.Duration { return d/2 + rand.N(d/2+1) }
	}
}

// Status is what the leader knows of one endpoint's deliveries since it
// leads.
type Status struct {
	// Delivered: every event of the tenant up to here was delivered; the
	// replicated cursor follows within a commit interval.
	Delivered   uint64
	LastSuccess time.Time
	// LastError is a status code or a cause, never a response body.
	LastError   string
	LastErrorAt time.Time
	NextRetry   time.Time // zero: no failure pending
	Failures    uint32    // consecutive
	InFlight    bool
	// Slow: its last request was out Options.SlowAfter or more (or timed
	// out); its requests go to the slow endpoints' share.
	Slow bool
}

// Deliverer runs the delivery loop while its node leads.
type Deliverer struct {
	node    Node
	opt     Options
	log     hclog.Logger
	metrics *metrics

	mu      sync.Mutex
	leading bool
	status  map[uint32]Status
}

// New returns a deliverer; Run runs it.
func New(node Node, opt Options) *Deliverer {
	opt.defaults()
	return &Deliverer{node: node, opt: opt, log: opt.Logger, metrics: newMetrics(opt.Registerer)}
}

// Key returns the webhook key (nil: none configured).
func (d *Deliverer) Key() Key { return d.opt.Key }

// Guard returns the address guard.
func (d *Deliverer) Guard() *Guard { return d.opt.Guard }

// Status returns the delivery state of the endpoint of the tenant at
// index tenant, if this node leads and runs its deliveries.
func (d *Deliverer) Status(tenant uint32) (Status, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.leading {
		return Status{}, false
	}
	s, ok := d.status[tenant]
	return s, ok
}

// target is one endpoint as the running loop delivers to it.
type target struct {
	ep fsm.Webhook // as last read from the state
	// pos is the next seq to examine; queue holds the endpoint's events
	// before pos not yet delivered, in order.
	pos   uint64
	queue []fsm.Event
	full  bool // the queue filled during this scan
	st    Status
	gone  bool // the endpoint was deleted while a request was in flight
	// sent is when the request in flight went out; inSlow says it counts
	// in the slow endpoints' share, inNew in the share of endpoints that
	// have not answered yet (answered: one has).
	sent                    time.Time
	inSlow, inNew, answered bool
}

func (t *target) reset(w fsm.Webhook) {
	t.ep = w
	t.pos = w.Cursor + 1
	t.queue = t.queue[:0]
	t.st.Delivered = w.Cursor
	t.st.Failures, t.st.NextRetry = 0, time.Time{}
	t.gone = false
}

// request is one delivery handed to a worker.
type request struct {
	t       *target
	epoch   uint64
	gen     uint64 // the state's replacement count when it was built
	url     string
	secrets []string
	payload Payload
	cursor  uint64
}

// outcome is a request's result.
type outcome struct {
	req  *request
	code int
	err  error
	at   time.Time
	took time.Duration
}

type run struct {
	d       *Deliverer
	f       *fsm.FSM
	targets map[uint32]*target
	order   []uint32 // tenant indexes, sorted: round-robin dispatch
	rr      int

	frontier uint64 // every event before it has been offered to the targets caught up
	more     bool   // the last pass stopped at a work bound

	// Requests run in goroutines of their own (wg), under wctx; inFlight
	// counts them, slowInFlight those in the slow endpoints' share,
	// newInFlight those of endpoints that have not answered yet.
	wctx                                context.Context
	wg                                  *sync.WaitGroup
	results                             chan *outcome
	inFlight, slowInFlight, newInFlight int

	// gen is the state's replacement count (fsm.Replaced) the positions
	// above were read under.
	gen uint64

	acks       map[uint32]*clusterpb.WebhookCursor // delivered, not yet proposed
	committing map[uint32]*clusterpb.WebhookCursor // proposed, not yet applied
	commitGen  uint64                              // gen when committing was proposed
	commitDone chan error

	keyWarned time.Time
	dirty     bool
}

// Bounds of one pass of the loop, so that no read holds the state's lock
// long and a large backlog never delays the loop's other work.
const (
	scanChunk     = 4096
	passBudget    = 64 * 1024
	minPassPeriod = 20 * time.Millisecond
)

func (r *run) maxQueue() int { return max(2*r.d.opt.MaxBatch, 256) }

// Run delivers until ctx ends (the node lost leadership): a leader loop.
func (d *Deliverer) Run(ctx context.Context) {
	f := d.node.State()
	gen := f.Replaced()
	_, next := f.Events(^uint64(0), func(*fsm.Event) bool { return false })
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	r := &run{d: d, f: f, targets: map[uint32]*target{}, frontier: next, gen: gen,
		wctx: wctx, wg: &wg, results: make(chan *outcome, d.opt.Workers),
		acks: map[uint32]*clusterpb.WebhookCursor{}, commitDone: make(chan error, 1)}
	d.mu.Lock()
	d.leading, d.status = true, map[uint32]Status{}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.leading, d.status = false, nil
		d.mu.Unlock()
		d.metrics.failing.Set(0)
		d.metrics.unsignable.Set(0)
		d.metrics.slow.Set(0)
		d.metrics.inFlight.WithLabelValues("prompt").Set(0)
		d.metrics.inFlight.WithLabelValues("slow").Set(0)
	}()
	defer func() { cancel(); wg.Wait(); d.opt.Client.CloseIdleConnections() }()
	if d.opt.Key == nil && f.HasWebhooks() {
		d.log.Error("webhook endpoints are registered but this leader has no webhook key: nothing is delivered while it leads; set [webhooks] key or $BARISTA_WEBHOOK_KEY (the same on every server)")
		r.keyWarned = time.Now()
	}
	tick := time.NewTicker(d.opt.CommitInterval)
	defer tick.Stop()
	for {
		// The channel is taken before the state is read: an entry applied
		// during the pass wakes the next one.
		changed := f.Changed()
		now := time.Now()
		r.pass(now)
		var retryC, soon <-chan time.Time
		var timer *time.Timer
		if due := r.nextDue(); !due.IsZero() {
			timer = time.NewTimer(max(time.Until(due), time.Millisecond))
			retryC = timer.C
		}
		if r.more {
			soon = time.After(time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
			// At most one pass per minPassPeriod on changes alone: under
			// load an entry is applied every few hundred microseconds.
			if wait := minPassPeriod - time.Since(now); wait > 0 {
				pace := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					pace.Stop()
					return
				case <-pace.C:
				}
			}
		case o := <-r.results:
			r.handle(o)
		case <-retryC:
		case <-soon:
		case <-tick.C:
			r.commit(ctx, &wg)
		case err := <-r.commitDone:
			r.committed(err)
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// pass syncs the endpoints, reads new events, dispatches what is due and
// publishes the status.
func (r *run) pass(now time.Time) {
	// The count is read before the state: a replacement after it is seen
	// by the next pass.
	replaced := r.f.Replaced() != r.gen
	if replaced {
		r.gen = r.f.Replaced()
	}
	r.sync()
	if replaced {
		r.restart()
	}
	r.more = r.scan()
	r.turnSlow(now)
	r.dispatch(now)
	r.publish()
}

// turnSlow moves the requests of prompt endpoints that have been out
// SlowAfter to the slow endpoints' share, and marks their endpoints
// slow: the prompt share is free again for prompt endpoints.
func (r *run) turnSlow(now time.Time) {
	for _, t := range r.targets {
		if t.st.InFlight && !t.inSlow && now.Sub(t.sent) >= r.d.opt.SlowAfter {
			t.inSlow, t.st.Slow = true, true
			r.slowInFlight++
			if t.inNew {
				t.inNew = false
				r.newInFlight--
			}
			r.dirty = true
		}
	}
}

// sync follows the endpoint table: new endpoints start at their cursor,
// changed ones (another epoch: an admin's set, rotate or replay) start
// again at theirs, deleted ones go.
func (r *run) sync() {
	ws := r.f.Webhooks()
	seen := make(map[uint32]bool, len(ws))
	changedOrder := false
	for _, w := range ws {
		seen[w.Tenant] = true
		t := r.targets[w.Tenant]
		switch {
		case t == nil:
			t = &target{}
			t.reset(w)
			r.targets[w.Tenant] = t
			changedOrder = true
			r.dirty = true
		case t.gone || t.ep.Epoch != w.Epoch:
			t.reset(w)
			r.dirty = true
		default:
			if t.ep != w {
				r.dirty = true
			}
			t.ep = w
		}
	}
	for ti, t := range r.targets {
		if seen[ti] || t.gone {
			continue
		}
		if t.st.InFlight {
			t.gone = true // its outcome is dropped; it leaves then
			continue
		}
		delete(r.targets, ti)
		delete(r.acks, ti)
		changedOrder = true
		r.dirty = true
	}
	if changedOrder {
		r.order = r.order[:0]
		for ti := range r.targets {
			r.order = append(r.order, ti)
		}
		slices.Sort(r.order)
	}
}

// restart follows a replacement of the whole state (a backup restored
// under this leader): the event log may have gone back or forward, and a
// seq may name another event than before, so every endpoint starts again
// at its restored cursor and the frontier at the restored log's end.
// Cursors delivered or being proposed for the replaced state are
// dropped, and so are the outcomes of the requests in flight (handle):
// the events after the restored cursors are delivered again, at least
// once.
func (r *run) restart() {
	_, next := r.f.Events(^uint64(0), func(*fsm.Event) bool { return false })
	r.d.log.Info("the state was replaced: webhook delivery starts again from the restored cursors", "next_seq", next)
	r.frontier = next
	for _, t := range r.targets {
		if !t.gone {
			t.reset(t.ep)
		}
	}
	r.acks = map[uint32]*clusterpb.WebhookCursor{}
	r.dirty = true
}

// scan offers new events to the targets: a target behind the frontier
// reads its own range; the others share one read from the frontier on.
// It reports whether it stopped at its budget with work left.
func (r *run) scan() bool {
	budget := passBudget
	first, next := r.f.Events(^uint64(0), func(*fsm.Event) bool { return false })
	more := false
	// Targets behind: each reads up to a chunk, from its tenant's kept
	// events (those the cluster's count pruned from the log, which the
	// tenant keeps) on.
	for _, ti := range r.order {
		t := r.targets[ti]
		if t.gone || t.pos >= r.frontier || len(t.queue) >= r.maxQueue() {
			continue
		}
		if budget <= 0 {
			more = true
			break
		}
		tfirst := first
		if t.pos < first {
			tfirst, _ = r.f.TenantEvents(ti, ^uint64(0), func(*fsm.Event) bool { return false })
		}
		end := min(r.frontier, max(t.pos, tfirst)+scanChunk)
		from := max(t.pos, tfirst)
		if from >= end {
			t.pos = max(t.pos, end)
			continue
		}
		stop := end
		r.f.TenantEvents(ti, from, func(ev *fsm.Event) bool {
			if ev.Seq >= end {
				return false
			}
			budget--
			if ev.Tenant == ti && t.ep.Delivers(ev.Kind) {
				if len(t.queue) >= r.maxQueue() {
					stop = ev.Seq
					return false
				}
				t.queue = append(t.queue, *ev)
			}
			return true
		})
		t.pos = stop
		if t.pos < r.frontier && len(t.queue) < r.maxQueue() {
			more = true
		}
	}
	// The shared read.
	start := r.frontier
	readers := 0
	for _, t := range r.targets {
		// A target with a full queue waits where it is: it reads on its
		// own once it drains.
		t.full = len(t.queue) >= r.maxQueue()
		if !t.gone && !t.full && t.pos >= start {
			readers++
		}
	}
	if readers == 0 {
		r.frontier = next // nobody to offer events to
	}
	for r.frontier < next && budget > 0 {
		from := max(r.frontier, first)
		end := min(next, from+scanChunk)
		r.f.Events(from, func(ev *fsm.Event) bool {
			if ev.Seq >= end {
				return false
			}
			budget--
			t := r.targets[ev.Tenant]
			if t == nil || t.gone || t.full || t.pos > ev.Seq || t.pos < start || !t.ep.Delivers(ev.Kind) {
				return true
			}
			if len(t.queue) >= r.maxQueue() {
				t.full, t.pos = true, ev.Seq
				return true
			}
			t.queue = append(t.queue, *ev)
			return true
		})
		r.frontier = end
	}
	for _, t := range r.targets {
		if !t.full && t.pos >= start {
			t.pos = max(t.pos, r.frontier)
		}
	}
	return more || r.frontier < next
}

// nextDue is the earliest retry time of an endpoint with work, if any.
func (r *run) nextDue() time.Time {
	var due time.Time
	earliest := func(at time.Time) {
		if due.IsZero() || at.Before(due) {
			due = at
		}
	}
	for _, t := range r.targets {
		if t.st.InFlight && !t.inSlow {
			earliest(t.sent.Add(r.d.opt.SlowAfter)) // it turns slow then
		}
		if t.st.InFlight || t.st.NextRetry.IsZero() || !t.hasWork() {
			continue
		}
		earliest(t.st.NextRetry)
	}
	return due
}

// hasWork reports whether the target has something to deliver.
func (t *target) hasWork() bool {
	return !t.gone && (t.ep.GapTo > t.st.Delivered || len(t.queue) > 0)
}

// batch builds the next request's events and the cursor a 2xx moves to.
func (t *target) batch(maxEvents int, tenant string, gapAt sfq.Time) ([]Event, uint64) {
	var out []Event
	var cursor uint64
	after := t.st.Delivered
	if t.ep.GapTo > after {
		from := max(t.ep.GapFrom, after+1)
		out = append(out, Event{Seq: t.ep.GapTo, Tenant: tenant, Kind: KindGap, AtMs: int64(gapAt), FromSeq: from, ToSeq: t.ep.GapTo})
		cursor, after = t.ep.GapTo, t.ep.GapTo
	}
	i := 0
	for i < len(t.queue) && t.queue[i].Seq <= after {
		i++
	}
	for ; i < len(t.queue) && len(out) < maxEvents; i++ {
		out = append(out, eventOf(&t.queue[i], tenant))
		cursor = t.queue[i].Seq
	}
	if i == len(t.queue) && t.pos > 0 {
		// Everything examined before pos is delivered or not the
		// endpoint's: the cursor may pass it.
		cursor = max(cursor, t.pos-1)
	}
	return out, cursor
}

// dispatch sends the due endpoints' next batches, round robin from where
// the last pass stopped, each endpoint in its share: a slow endpoint
// while fewer than SlowWorkers requests count in the slow share, a
// prompt one while fewer than Workers − SlowWorkers prompt requests are
// out, and one that has not answered yet while those of such endpoints
// are fewer than half of that.
func (r *run) dispatch(now time.Time) {
	n := len(r.order)
	o := &r.d.opt
	if n == 0 || r.inFlight >= 2*o.Workers {
		return
	}
	key := o.Key
	clusterNow, _ := r.d.node.ClusterNow()
	for k := 0; k < n && r.inFlight < 2*o.Workers; k++ {
		ti := r.order[(r.rr+k)%n]
		t := r.targets[ti]
		if t.st.InFlight || !t.hasWork() || (!t.st.NextRetry.IsZero() && now.Before(t.st.NextRetry)) {
			continue
		}
		prompt := o.Workers - o.SlowWorkers
		switch {
		case t.st.Slow && r.slowInFlight >= o.SlowWorkers,
			!t.st.Slow && r.inFlight-r.slowInFlight >= prompt,
			!t.st.Slow && !t.answered && r.newInFlight >= max(prompt/2, 1):
			continue // its share is full
		}
		if why := keyProblem(key, t.ep.KeyID); why != "" {
			r.fail(t, now, why, time.Minute)
			if now.Sub(r.keyWarned) >= time.Minute {
				r.keyWarned = now
				r.d.log.Error("webhook endpoints are registered but this leader cannot sign for them: nothing is delivered while it leads", "tenant", t.ep.Name, "problem", why)
			}
			continue
		}
		events, cursor := t.batch(r.d.opt.MaxBatch, t.ep.Name, clusterNow)
		secrets := []string{key.Secret(t.ep.Tenant, t.ep.Name, t.ep.Version)}
		if t.ep.PreviousValid(clusterNow) {
			secrets = append(secrets, key.Secret(t.ep.Tenant, t.ep.Name, t.ep.PrevVersion))
		}
		req := &request{t: t, epoch: t.ep.Epoch, gen: r.gen, url: t.ep.URL, secrets: secrets, payload: Payload{Events: events}, cursor: cursor}
		t.st.InFlight, t.sent, t.inSlow, t.inNew = true, now, t.st.Slow, !t.st.Slow && !t.answered
		r.inFlight++
		if t.inSlow {
			r.slowInFlight++
		}
		if t.inNew {
			r.newInFlight++
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			o := r.d.send(r.wctx, req)
			select {
			case r.results <- o:
			case <-r.wctx.Done():
			}
		}()
		r.rr = (r.rr + k + 1) % n
		r.dirty = true
	}
}

// keyProblem says why key cannot sign for an endpoint recorded with
// keyID, or "".
func keyProblem(key Key, keyID uint64) string {
	switch {
	case key == nil:
		return "this leader has no webhook key ([webhooks] key or $BARISTA_WEBHOOK_KEY; every server needs the same)"
	case key.ID() != keyID:
		return fmt.Sprintf("this leader's webhook key (id %016x) is not the one the endpoint's secret was derived from (id %016x): give every server the same key, or rotate the secret", key.ID(), keyID)
	}
	return ""
}

// fail records a failure and when to try again.
func (r *run) fail(t *target, now time.Time, why string, wait time.Duration) {
	t.st.Failures++
	t.st.LastError, t.st.LastErrorAt = why, r.d.opt.Wall()
	t.st.NextRetry = now.Add(wait)
	r.dirty = true
}

// backoff is the wait after the n-th consecutive failure: MinBackoff
// doubling up to MaxBackoff, jittered.
func (r *run) backoff(n uint32) time.Duration {
	d := r.d.opt.MinBackoff
	for i := uint32(1); i < n && d < r.d.opt.MaxBackoff; i++ {
		d *= 2
	}
	return r.d.opt.Jitter(min(d, r.d.opt.MaxBackoff))
}

// handle records a request's outcome.
func (r *run) handle(o *outcome) {
	t := o.req.t
	r.inFlight--
	if t.inSlow {
		r.slowInFlight--
	}
	if t.inNew {
		r.newInFlight--
	}
	// A request answered (or refused) within SlowAfter makes its endpoint
	// prompt again; one out longer, or timed out, slow.
	t.st.Slow = o.took >= r.d.opt.SlowAfter || (o.err != nil && errTimeout(o.err))
	t.st.InFlight, t.inSlow, t.inNew, t.answered = false, false, false, true
	r.dirty = true
	if t.gone {
		if cur := r.targets[t.ep.Tenant]; cur == t {
			delete(r.targets, t.ep.Tenant)
			r.order = slices.DeleteFunc(r.order, func(ti uint32) bool { return ti == t.ep.Tenant })
		}
		return
	}
	if o.req.epoch != t.ep.Epoch || o.req.gen != r.gen {
		return // the endpoint or the whole state changed meanwhile: it starts over
	}
	now := time.Now()
	if o.err == nil && o.code >= 200 && o.code < 300 {
		r.d.metrics.requests.WithLabelValues("delivered").Inc()
		r.d.metrics.events.Add(float64(len(o.req.payload.Events)))
		if t.st.Failures > 0 {
			r.d.log.Info("webhook endpoint recovered", "tenant", t.ep.Name, "failures", t.st.Failures)
		}
		t.st.Delivered = max(t.st.Delivered, o.req.cursor)
		t.st.LastSuccess = o.at
		t.st.Failures, t.st.NextRetry = 0, time.Time{}
		i := 0
		for i < len(t.queue) && t.queue[i].Seq <= t.st.Delivered {
			i++
		}
		t.queue = t.queue[:copy(t.queue, t.queue[i:])]
		r.acks[t.ep.Tenant] = &clusterpb.WebhookCursor{Tenant: t.ep.Name, Epoch: t.ep.Epoch, Seq: t.st.Delivered}
		return
	}
	r.d.metrics.requests.WithLabelValues("failed").Inc()
	why := describe(o.code, o.err, r.d.opt.Timeout)
	r.fail(t, now, why, r.backoff(t.st.Failures+1))
	lvl := hclog.Debug
	if t.st.Failures == 1 || t.st.Failures%10 == 0 {
		lvl = hclog.Warn
	}
	r.d.log.Log(lvl, "webhook delivery failed", "tenant", t.ep.Name, "error", why, "failures", t.st.Failures, "retry_in", time.Until(t.st.NextRetry).Round(time.Millisecond))
}

// describe words a failed request without its response body.
func describe(code int, err error, timeout time.Duration) string {
	if err == nil {
		if code >= 300 && code < 400 {
			return fmt.Sprintf("HTTP %d (redirects are not followed)", code)
		}
		return fmt.Sprintf("HTTP %d", code)
	}
	if ae, ok := refusedAddr(err); ok {
		return "refused: " + ae.Error()
	}
	if errTimeout(err) {
		return fmt.Sprintf("timed out after %s", timeout)
	}
	// Drop the "Post URL:" prefix of url.Error: the URL is known.
	msg := err.Error()
	if i := strings.LastIndex(msg, "\": "); i >= 0 && strings.HasPrefix(msg, "Post \"") {
		msg = msg[i+3:]
	}
	return msg
}

// commit proposes the delivered cursors, one command for all, if none is
// in flight.
func (r *run) commit(ctx context.Context, wg *sync.WaitGroup) {
	if len(r.acks) == 0 || r.committing != nil {
		return
	}
	if r.f.Replaced() != r.gen {
		return // cursors of a replaced state: the next pass drops them
	}
	r.committing, r.acks, r.commitGen = r.acks, map[uint32]*clusterpb.WebhookCursor{}, r.gen
	cursors := make([]*clusterpb.WebhookCursor, 0, len(r.committing))
	for _, c := range r.committing {
		cursors = append(cursors, c)
	}
	sort.Slice(cursors, func(i, j int) bool { return cursors[i].Tenant < cursors[j].Tenant })
	cmd := &clusterpb.Command{Cmd: &clusterpb.Command_WebhookAck{WebhookAck: &clusterpb.WebhookAck{Cursors: cursors}}}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := r.d.node.Propose(ctx, []*clusterpb.Command{cmd})
		r.commitDone <- err
	}()
}

// committed ends a commit; after a failure its cursors are proposed
// again with the next (unless a newer one of the same epoch replaced
// them, or the whole state was replaced since).
func (r *run) committed(err error) {
	if err != nil && r.commitGen == r.gen {
		r.d.log.Warn("proposing webhook cursors failed", "error", err)
		for ti, c := range r.committing {
			if cur, ok := r.acks[ti]; !ok || (cur.Epoch == c.Epoch && cur.Seq < c.Seq) {
				r.acks[ti] = c
			}
		}
	}
	r.committing = nil
}

// publish copies the targets' status for Status.
func (r *run) publish() {
	if !r.dirty {
		return
	}
	r.dirty = false
	m := make(map[uint32]Status, len(r.targets))
	failing, unsignable, slow := 0, 0, 0
	for ti, t := range r.targets {
		if !t.gone {
			m[ti] = t.st
			if t.st.Failures > 0 {
				failing++
			}
			if t.st.Slow {
				slow++
			}
			if keyProblem(r.d.opt.Key, t.ep.KeyID) != "" {
				unsignable++
			}
		}
	}
	r.d.metrics.failing.Set(float64(failing))
	r.d.metrics.unsignable.Set(float64(unsignable))
	r.d.metrics.slow.Set(float64(slow))
	r.d.metrics.inFlight.WithLabelValues("prompt").Set(float64(r.inFlight - r.slowInFlight))
	r.d.metrics.inFlight.WithLabelValues("slow").Set(float64(r.slowInFlight))
	r.d.mu.Lock()
	r.d.status = m
	r.d.mu.Unlock()
}

// send makes one request and times it.
func (d *Deliverer) send(ctx context.Context, req *request) *outcome {
	start := time.Now()
	o := d.do(ctx, req)
	o.took = time.Since(start)
	return o
}

// do makes one request.
func (d *Deliverer) do(ctx context.Context, req *request) *outcome {
	body, err := req.payload.Marshal()
	if err != nil {
		return &outcome{req: req, err: err, at: d.opt.Wall()}
	}
	rctx, cancel := context.WithTimeout(ctx, d.opt.Timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(rctx, http.MethodPost, req.url, bytes.NewReader(body))
	if err != nil {
		return &outcome{req: req, err: err, at: d.opt.Wall()}
	}
	t := d.opt.Wall().UnixMilli()
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("User-Agent", "barista-webhook")
	hr.Header.Set(SignatureHeader, Header(t, body, req.secrets...))
	resp, err := d.opt.Client.Do(hr)
	if err != nil {
		return &outcome{req: req, err: err, at: d.opt.Wall()}
	}
	// The body is never shown; a little is read so the connection can be
	// reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return &outcome{req: req, code: resp.StatusCode, at: d.opt.Wall()}
}

// Backlog counts the tenant's events after the endpoint's replicated
// cursor that it delivers, reading the log in chunks (the state's lock is
// never held long).
func Backlog(f *fsm.FSM, w fsm.Webhook) uint64 {
	var n uint64
	first, next := f.TenantEvents(w.Tenant, ^uint64(0), func(*fsm.Event) bool { return false })
	for from := max(w.Cursor+1, first); from < next; from += scanChunk {
		end := from + scanChunk
		f.TenantEvents(w.Tenant, from, func(ev *fsm.Event) bool {
			if ev.Seq >= end {
				return false
			}
			if ev.Tenant == w.Tenant && w.Delivers(ev.Kind) {
				n++
			}
			return true
		})
	}
	return n
}
