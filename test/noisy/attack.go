package noisy

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	pb "github.com/baristahq/barista/proto"
)

// The attacker: this test binary run again, in the attacker's network
// namespace, with attackEnv naming one flood (attackSpec, as JSON). It
// floods until it is killed, and prints what it did each few seconds.

const attackEnv = "BARISTA_NOISY_ATTACK"

// endpoint is a server as the attacker reaches it.
type endpoint struct {
	V4, V6     string // its addresses
	GRPC, HTTP int    // its ports
}

func (e endpoint) grpc4() string { return net.JoinHostPort(e.V4, fmt.Sprint(e.GRPC)) }
func (e endpoint) grpc6() string { return net.JoinHostPort(e.V6, fmt.Sprint(e.GRPC)) }
func (e endpoint) http4() string { return net.JoinHostPort(e.V4, fmt.Sprint(e.HTTP)) }

type attackSpec struct {
	Flood     string
	Leader    endpoint
	Followers []endpoint
	CAFile    string
	// Token is the attacking tenant's client token; WorkerToken its
	// worker token (bound to "atk-*").
	Token, WorkerToken string
	Addrs              map[string][]string
}

type attacker struct {
	spec  attackSpec
	roots *x509.CertPool
	ctx   context.Context
	// counts of what happened, by name, printed as it goes.
	mu     sync.Mutex
	counts map[string]int64
}

func (a *attacker) count(what string) {
	a.mu.Lock()
	a.counts[what]++
	a.mu.Unlock()
}

// runAttack runs the flood of spec until SIGTERM.
func runAttack(specJSON string) int {
	var spec attackSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "attack spec:", err)
		return 2
	}
	pem, err := os.ReadFile(spec.CAFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	a := &attacker{spec: spec, roots: roots, ctx: ctx, counts: map[string]int64{}}
	floods := map[string]func(){
		"health-watches":  a.healthWatches,
		"connections":     a.connections,
		"stalled-forward": a.stalledForward,
		"held-reads":      a.heldReads,
		"bulk-storm":      a.bulkStorm,
		"drain-loop":      a.drainLoop,
	}
	f, ok := floods[spec.Flood]
	if !ok {
		fmt.Fprintln(os.Stderr, "unknown flood", spec.Flood)
		return 2
	}
	go f()
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			a.report()
			return 0
		case <-t.C:
			a.report()
		}
	}
}

func (a *attacker) report() {
	a.mu.Lock()
	b, _ := json.Marshal(a.counts)
	a.mu.Unlock()
	fmt.Printf("attack %s: %s\n", a.spec.Flood, b)
}

// pause waits d unless the attack ends; it reports whether it goes on.
func (a *attacker) pause(d time.Duration) bool {
	select {
	case <-a.ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// forever runs n copies of fn, each again as soon as it returns, until
// the attack ends.
func (a *attacker) forever(n int, fn func(i int)) {
	for i := range n {
		go func() {
			for a.ctx.Err() == nil {
				fn(i)
			}
		}()
	}
}

func (a *attacker) tlsConfig(serverIP string) *tls.Config {
	return &tls.Config{RootCAs: a.roots, ServerName: serverIP, MinVersion: tls.VersionTLS12}
}

// dialer binds a connection's source address.
func dialer(src string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
}

// grpcFrom is a gRPC connection from src to target over TLS, with token
// ("" none).
func (a *attacker) grpcFrom(src, target, serverIP, token string) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(a.tlsConfig(serverIP))),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dialer(src).DialContext(ctx, "tcp", addr)
		})}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(token)))
	}
	return grpc.NewClient(target, opts...)
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return true }

// healthWatches holds health watches without a token on the leader: 41
// from each of the 100 IPv4 networks (4,100, the attack that filled a
// node), and 16 from each /64 of one IPv6 /48 (4,096); each reconnects
// as soon as the server ends it.
func (a *attacker) healthWatches() {
	l := a.spec.Leader
	watch := func(src, target string) {
		cc, err := a.grpcFrom(src, target, l.V4, "")
		if err != nil {
			a.count("dial_error")
			a.pause(time.Second)
			return
		}
		defer cc.Close()
		w, err := healthpb.NewHealthClient(cc).Watch(a.ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			a.count("refused")
			a.pause(time.Second)
			return
		}
		if _, err := w.Recv(); err != nil {
			a.count("refused")
			a.pause(time.Second)
			return
		}
		a.count("held")
		for {
			if _, err := w.Recv(); err != nil {
				a.count("ended")
				a.pause(100 * time.Millisecond)
				return
			}
		}
	}
	v4, site := a.spec.Addrs["v4"], a.spec.Addrs["site"]
	a.forever(len(v4)*41, func(i int) { watch(v4[i%len(v4)], l.grpc4()) })
	a.forever(len(site)*16, func(i int) { watch(site[i%len(site)], l.grpc6()) })
}

// connections holds TLS connections that make no call, to the leader's
// gRPC and HTTP ports: 20 from each IPv4 network, 20 from each IPv6
// /48, 4 from each /64 of one /48; each is opened again once the server
// closes it.
func (a *attacker) connections() {
	l := a.spec.Leader
	hold := func(src, target string) {
		c, err := dialer(src).DialContext(a.ctx, "tcp", target)
		if err != nil {
			a.count("dial_error")
			a.pause(500 * time.Millisecond)
			return
		}
		defer c.Close()
		tc := tls.Client(c, a.tlsConfig(l.V4))
		if err := tc.HandshakeContext(a.ctx); err != nil {
			a.count("closed_in_handshake")
			a.pause(100 * time.Millisecond)
			return
		}
		a.count("held")
		go func() { <-a.ctx.Done(); c.Close() }()
		io.Copy(io.Discard, tc)
		a.count("closed")
		a.pause(100 * time.Millisecond)
	}
	grpc6 := net.JoinHostPort(l.V6, fmt.Sprint(l.GRPC))
	http6 := net.JoinHostPort(l.V6, fmt.Sprint(l.HTTP))
	v4, v6, site := a.spec.Addrs["v4"], a.spec.Addrs["v6"], a.spec.Addrs["site"]
	a.forever(len(v4)*20, func(i int) {
		if i%2 == 0 {
			hold(v4[i%len(v4)], l.grpc4())
		} else {
			hold(v4[i%len(v4)], l.http4())
		}
	})
	a.forever(len(v6)*20, func(i int) {
		if i%2 == 0 {
			hold(v6[i%len(v6)], grpc6)
		} else {
			hold(v6[i%len(v6)], http6)
		}
	})
	a.forever(len(site)*4, func(i int) { hold(site[i%len(site)], grpc6) })
}

// stalledForward holds the attacking tenant's request budget on the
// leader with stalled calls (20 of 4 MB, each sent but for its last
// byte; the leader closes them after its read timeout, and they are
// opened again), while 64 callers of the tenant submit through the
// followers as fast as they are answered.
func (a *attacker) stalledForward() {
	l := a.spec.Leader
	src := a.spec.Addrs["v4"][0]
	a.forever(1, func(int) {
		if err := a.stall(src, l, "/barista.v1.Client/GetJob", 20, 4_000_000); err != nil {
			a.count("stall_error")
		}
		a.pause(200 * time.Millisecond)
	})
	var conns []*grpc.ClientConn
	for i, f := range a.spec.Followers {
		cc, err := a.grpcFrom(a.spec.Addrs["v4"][1+i], f.grpc4(), f.V4, a.spec.Token)
		if err != nil {
			a.count("dial_error")
			continue
		}
		conns = append(conns, cc)
	}
	if len(conns) == 0 {
		return
	}
	a.forever(64, func(i int) {
		_, err := pb.NewClientClient(conns[i%len(conns)]).Submit(a.ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000})
		if err != nil {
			a.count("submit_refused")
			a.pause(20 * time.Millisecond)
		} else {
			a.count("submit_ok")
		}
	})
}

// stall opens n unary calls of method on e (TLS, HTTP/2) whose requests
// declare size bytes and sends all but the last byte of each, then waits
// until the server closes the connection.
func (a *attacker) stall(src string, e endpoint, method string, n, size int) error {
	raw, err := dialer(src).DialContext(a.ctx, "tcp", e.grpc4())
	if err != nil {
		return err
	}
	cfg := a.tlsConfig(e.V4)
	cfg.NextProtos = []string{"h2"}
	c := tls.Client(raw, cfg)
	defer c.Close()
	if err := c.HandshakeContext(a.ctx); err != nil {
		return err
	}
	go func() { <-a.ctx.Done(); c.Close() }()
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		return err
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var mu sync.Mutex
	if err := fr.WriteSettings(); err != nil {
		return err
	}
	windows := map[uint32]int64{}
	left := map[uint32][]byte{}
	connWindow := int64(65535)
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			mu.Lock()
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					fr.WriteSettingsAck()
				}
			case *http2.WindowUpdateFrame:
				if f.StreamID == 0 {
					connWindow += int64(f.Increment)
				} else {
					windows[f.StreamID] += int64(f.Increment)
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					fr.WritePing(true, f.Data)
				}
			case *http2.MetaHeadersFrame:
				if f.StreamEnded() {
					delete(left, f.StreamID)
				}
			case *http2.RSTStreamFrame:
				delete(left, f.StreamID)
			}
			mu.Unlock()
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for i := range n {
		id := uint32(2*i + 1)
		hb.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", method}, {":authority", e.grpc4()},
			{"content-type", "application/grpc"}, {"te", "trailers"}, {"authorization", "Bearer " + a.spec.Token}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		msg := make([]byte, 5+size-1)
		binary.BigEndian.PutUint32(msg[1:5], uint32(size))
		mu.Lock()
		windows[id], left[id] = 65535, msg
		err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
		mu.Unlock()
		if err != nil {
			return err
		}
	}
	a.count("stalled_calls")
	for {
		mu.Lock()
		for id, rest := range left {
			k := min(int64(len(rest)), windows[id], connWindow, 16<<10)
			if k <= 0 {
				continue
			}
			if fr.WriteData(id, false, rest[:k]) != nil {
				mu.Unlock()
				return nil
			}
			left[id], windows[id], connWindow = rest[k:], windows[id]-k, connWindow-k
		}
		mu.Unlock()
		select {
		case <-done:
			return nil
		case <-wake:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// heldReads holds reads naming a log index no node will reach: 2,900
// over HTTP (each on a connection of its own, spread over the 100
// networks and the three nodes) and 10,000 over gRPC (on 10 connections
// to the nodes); each is asked again a second after it is answered.
func (a *attacker) heldReads() {
	nodes := append([]endpoint{a.spec.Leader}, a.spec.Followers...)
	v4 := a.spec.Addrs["v4"]
	a.forever(2900, func(i int) {
		e := nodes[i%len(nodes)]
		c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: a.tlsConfig(e.V4),
			DialContext: dialer(v4[i%len(v4)]).DialContext}}
		req, _ := http.NewRequestWithContext(a.ctx, "GET", "https://"+e.http4()+"/v1/jobs?stale=true", nil)
		req.Header.Set("Authorization", "Bearer "+a.spec.Token)
		req.Header.Set("X-Barista-Min-Index", "1000000000")
		resp, err := c.Do(req)
		if err != nil {
			a.count("http_error")
		} else {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			a.count(fmt.Sprintf("http_%d", resp.StatusCode))
		}
		c.CloseIdleConnections()
		a.pause(time.Second)
	})
	var conns []*grpc.ClientConn
	for k := range 10 {
		e := nodes[k%len(nodes)]
		cc, err := a.grpcFrom(v4[(k*7)%len(v4)], e.grpc4(), e.V4, a.spec.Token)
		if err == nil {
			conns = append(conns, cc)
		}
	}
	held := metadata.AppendToOutgoingContext(a.ctx, "x-barista-min-index", "1000000000")
	a.forever(10_000, func(i int) {
		_, err := pb.NewClientClient(conns[i%len(conns)]).ListJobs(held, &pb.ListJobsRequest{Read: &pb.ReadOptions{Stale: true}})
		a.count("grpc_" + codeName(err))
		a.pause(time.Second)
	})
}

// bulkStorm submits 20,000 jobs of the attacking tenant (paused: they
// stay queued), then cancels them all and redrives them all, again and
// again, as fast as its write rate lets it: two events a job a round.
func (a *attacker) bulkStorm() {
	l := a.spec.Leader
	cc, err := a.grpcFrom(a.spec.Addrs["v4"][0], l.grpc4(), l.V4, a.spec.Token)
	if err != nil {
		a.count("dial_error")
		return
	}
	cl := pb.NewClientClient(cc)
	for range 20 {
		batch := &pb.SubmitBatchRequest{}
		for range 1000 {
			batch.Jobs = append(batch.Jobs, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000})
		}
		if _, err := cl.SubmitBatch(a.ctx, batch); err != nil {
			a.count("submit_error")
		} else {
			a.count("submitted_1000")
		}
	}
	all := func(call func(context.Context, *pb.BulkJobsRequest, ...grpc.CallOption) (*pb.BulkJobsResponse, error), name string) {
		req := &pb.BulkJobsRequest{Filter: &pb.JobFilter{}}
		for a.ctx.Err() == nil {
			resp, err := call(a.ctx, req)
			if err != nil {
				a.count(name + "_" + codeName(err))
				a.pause(20 * time.Millisecond)
				continue
			}
			a.count(name + "_jobs_x1000")
			for range resp.Done / 1000 {
				a.count(name + "_jobs_x1000")
			}
			if resp.NextPageToken == "" {
				return
			}
			req.PageToken = resp.NextPageToken
		}
	}
	a.forever(1, func(int) {
		all(cl.CancelJobs, "cancel")
		all(cl.Redrive, "redrive")
		a.count("rounds")
	})
}

// drainLoop connects as new worker IDs of its binding ("atk-N") and
// drains and undrains each, 8 at a time, as fast as it is answered.
func (a *attacker) drainLoop() {
	l := a.spec.Leader
	cc, err := a.grpcFrom(a.spec.Addrs["v4"][0], l.grpc4(), l.V4, a.spec.WorkerToken)
	if err != nil {
		a.count("dial_error")
		return
	}
	wk := pb.NewWorkerClient(cc)
	var next atomic.Int64
	a.forever(8, func(int) {
		id := fmt.Sprintf("atk-%d", next.Add(1))
		ctx, cancel := context.WithCancel(a.ctx)
		defer cancel()
		s, err := wk.Connect(ctx)
		if err == nil {
			err = s.Send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Hello{Hello: &pb.Hello{WorkerId: id, Size: pb.Size_SM}}})
		}
		if err == nil {
			_, err = s.Recv()
		}
		if err != nil {
			a.count("session_" + codeName(err))
			a.pause(50 * time.Millisecond)
			return
		}
		a.count("sessions")
		for k := range 20 {
			_, err := wk.Drain(a.ctx, &pb.DrainRequest{WorkerId: id, Undrain: k%2 == 1})
			a.count("drain_" + codeName(err))
		}
	})
}
