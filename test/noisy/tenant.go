package noisy

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
)

// tenantB is the quiet tenant: through every node, a submit, a read over
// gRPC and a read over HTTP/JSON every period, and a watch of its events
// from seq 1; its worker runs its jobs. Every call is timed and counted
// in the phase it began in.
type tenantB struct {
	nodes  []endpoint
	conns  []*grpc.ClientConn
	https  []*http.Client
	token  string
	period time.Duration

	mu    sync.Mutex
	phase string
	ops   []opRecord
	jobs  []bJob // every job submitted, in order
	// seen[node][job] is when node's watch delivered the job's queued
	// event; done[job] when any watch delivered its completion.
	seen []map[uint64]time.Time
	done map[uint64]time.Time
	lost []string // watches refused OUT_OF_RANGE: events lost to retention
	wg   sync.WaitGroup
}

type opRecord struct {
	phase, kind string
	took        time.Duration
	err         string // "" = success
}

type bJob struct {
	id     uint64
	phase  string
	acked  time.Time
	viaIdx int
}

func codeName(err error) string {
	if err == nil {
		return "OK"
	}
	return status.Code(err).String()
}

func newTenantB(nodes []endpoint, tlsCfg func(ip string) *tls.Config, token string, period time.Duration) (*tenantB, error) {
	b := &tenantB{nodes: nodes, token: token, period: period, phase: "baseline", done: map[uint64]time.Time{}}
	for _, e := range nodes {
		cc, err := grpc.NewClient(e.grpc4(), grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg(e.V4))), grpc.WithPerRPCCredentials(bearer(token)))
		if err != nil {
			return nil, err
		}
		b.conns = append(b.conns, cc)
		b.https = append(b.https, &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg(e.V4), MaxIdleConnsPerHost: 4}})
		b.seen = append(b.seen, map[uint64]time.Time{})
	}
	return b, nil
}

func (b *tenantB) setPhase(p string) {
	b.mu.Lock()
	b.phase = p
	b.mu.Unlock()
}

func (b *tenantB) curPhase() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.phase
}

// timed runs one call and records it in the phase it began in.
func (b *tenantB) timed(kind string, call func() error) error {
	phase := b.curPhase()
	start := time.Now()
	err := call()
	r := opRecord{phase: phase, kind: kind, took: time.Since(start)}
	if err != nil {
		r.err = err.Error()
	}
	b.mu.Lock()
	b.ops = append(b.ops, r)
	b.mu.Unlock()
	return err
}

func (b *tenantB) lastJob() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.jobs) == 0 {
		return 0
	}
	return b.jobs[len(b.jobs)-1].id
}

// run drives the load until ctx ends.
func (b *tenantB) run(ctx context.Context) {
	every := func(fn func()) {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			t := time.NewTicker(b.period)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					fn()
				}
			}
		}()
	}
	for i := range b.nodes {
		cl := pb.NewClientClient(b.conns[i])
		seq := 0
		every(func() {
			seq++
			key := fmt.Sprintf("b-%d-%d-%d", i, time.Now().UnixNano(), seq)
			var id uint64
			phase := b.curPhase()
			err := b.timed("submit", func() error {
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				r, err := cl.Submit(cctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 100, IdempotencyKey: &key, Payload: []byte(`{"argv":["true"]}`)})
				id = r.GetJobId()
				return err
			})
			if err == nil {
				b.mu.Lock()
				b.jobs = append(b.jobs, bJob{id: id, phase: phase, acked: time.Now(), viaIdx: i})
				b.mu.Unlock()
			}
		})
		every(func() {
			id := b.lastJob()
			if id == 0 {
				return
			}
			b.timed("read-grpc", func() error {
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				_, err := cl.GetJob(cctx, &pb.GetJobRequest{JobId: id})
				return err
			})
		})
		every(func() {
			id := b.lastJob()
			if id == 0 {
				return
			}
			b.timed("read-http", func() error {
				req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("https://%s/v1/jobs/%d", b.nodes[i].http4(), id), nil)
				req.Header.Set("Authorization", "Bearer "+b.token)
				resp, err := b.https[i].Do(req)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 {
					return fmt.Errorf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
				}
				return nil
			})
		})
		b.wg.Add(1)
		go func() { defer b.wg.Done(); b.watch(ctx, i) }()
	}
}

// watch follows node i's stream of B's events from seq 1, resuming after
// the last event it got; OUT_OF_RANGE is an event lost to retention.
func (b *tenantB) watch(ctx context.Context, i int) {
	cl := pb.NewClientClient(b.conns[i])
	from := uint64(1)
	for ctx.Err() == nil {
		w, err := cl.WatchEvents(ctx, &pb.WatchEventsRequest{FromSeq: from})
		for err == nil {
			var ev *pb.Event
			if ev, err = w.Recv(); err != nil {
				break
			}
			from = ev.Seq + 1
			now := time.Now()
			b.mu.Lock()
			switch ev.Kind {
			case "queued":
				if _, ok := b.seen[i][ev.JobId]; !ok {
					b.seen[i][ev.JobId] = now
				}
			case "completed":
				if _, ok := b.done[ev.JobId]; !ok {
					b.done[ev.JobId] = now
				}
			}
			b.mu.Unlock()
		}
		if ctx.Err() != nil {
			return
		}
		b.mu.Lock()
		if status.Code(err) == codes.OutOfRange {
			b.lost = append(b.lost, fmt.Sprintf("node %d from %d: %v", i, from, err))
		}
		b.ops = append(b.ops, opRecord{phase: b.phase, kind: "watch-break", err: err.Error()})
		b.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stats is one phase's figures of one kind of call.
type stats struct {
	Phase, Kind   string
	N, OK         int
	P50, P99      time.Duration
	Errors        map[string]int `json:",omitempty"`
	BaselineP99   time.Duration  `json:",omitempty"`
	SuccessRatio  float64
	P99OfBaseline float64 `json:",omitempty"`
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[min(len(d)-1, int(q*float64(len(d))))]
}

// summary computes every phase's stats: the calls, and the watches'
// delivery of each job's queued event (from its submit's answer; within
// 10 s, on every node) and the worker's completion of it (within 30 s),
// as calls of kinds "watch" and "run".
func (b *tenantB) summary(phases []string) []stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	type key struct{ phase, kind string }
	took := map[key][]time.Duration{}
	errs := map[key]map[string]int{}
	n := map[key]int{}
	add := func(k key, d time.Duration, err string) {
		n[k]++
		if err != "" {
			if errs[k] == nil {
				errs[k] = map[string]int{}
			}
			if len(err) > 120 {
				err = err[:120]
			}
			errs[k][err]++
			return
		}
		took[k] = append(took[k], d)
	}
	for _, o := range b.ops {
		if o.kind == "watch-break" {
			continue
		}
		add(key{o.phase, o.kind}, o.took, o.err)
	}
	for _, j := range b.jobs {
		for i := range b.nodes {
			at, ok := b.seen[i][j.id]
			switch {
			case !ok:
				add(key{j.phase, "watch"}, 0, fmt.Sprintf("node %d never delivered job %d", i, j.id))
			case at.Sub(j.acked) > 10*time.Second:
				add(key{j.phase, "watch"}, 0, fmt.Sprintf("node %d delivered job %d after %s", i, j.id, at.Sub(j.acked).Round(time.Millisecond)))
			default:
				add(key{j.phase, "watch"}, max(at.Sub(j.acked), 0), "")
			}
		}
		at, ok := b.done[j.id]
		switch {
		case !ok:
			add(key{j.phase, "run"}, 0, "not completed")
		case at.Sub(j.acked) > 30*time.Second:
			add(key{j.phase, "run"}, 0, "completed after 30s")
		default:
			add(key{j.phase, "run"}, max(at.Sub(j.acked), 0), "")
		}
	}
	var out []stats
	base := map[string]time.Duration{}
	for _, p := range phases {
		for _, kind := range []string{"submit", "read-grpc", "read-http", "watch", "run"} {
			k := key{p, kind}
			s := stats{Phase: p, Kind: kind, N: n[k], OK: len(took[k]), P50: quantile(took[k], 0.5), P99: quantile(took[k], 0.99), Errors: errs[k]}
			if s.N > 0 {
				s.SuccessRatio = float64(s.OK) / float64(s.N)
			}
			if p == "baseline" {
				base[kind] = s.P99
			} else if b := base[kind]; b > 0 {
				s.BaselineP99, s.P99OfBaseline = b, float64(s.P99)/float64(b)
			}
			out = append(out, s)
		}
	}
	return out
}
