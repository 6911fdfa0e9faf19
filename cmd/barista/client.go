package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "barista/proto"
	"barista/raftnode"
	"barista/rpc"
)

// defaultServer is the --server default: $BARISTA_ADDR, else the default
// gRPC address.
func defaultServer() string {
	if a := os.Getenv("BARISTA_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:7400"
}

// clientFlags are the connection flags every client command shares.
type clientFlags struct {
	servers string
	token   string
	json    bool
	timeout time.Duration
	tlsCA   string
	tlsCert string
	tlsKey  string
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.servers, "server", defaultServer(), "gRPC `ADDR[,ADDR...]` of any node; on failure the next is tried ($BARISTA_ADDR)")
	fs.StringVar(&c.token, "token", os.Getenv("BARISTA_TOKEN"), "bearer `TOKEN` ($BARISTA_TOKEN)")
	fs.BoolVar(&c.json, "json", false, "print JSON")
	durFlag(fs, &c.timeout, "rpc-timeout", 15*time.Second, time.Millisecond, 24*time.Hour, "", "give up on the server after this `DURATION`")
	fs.StringVar(&c.tlsCA, "tls-ca", os.Getenv("BARISTA_TLS_CA"), "verify the server with this CA `FILE` (enables TLS; $BARISTA_TLS_CA)")
	fs.StringVar(&c.tlsCert, "tls-cert", os.Getenv("BARISTA_TLS_CERT"), "client certificate `FILE` ($BARISTA_TLS_CERT)")
	fs.StringVar(&c.tlsKey, "tls-key", os.Getenv("BARISTA_TLS_KEY"), "client key `FILE` ($BARISTA_TLS_KEY)")
}

// dialOptions returns the transport credentials and the bearer token.
func (c *clientFlags) dialOptions() ([]grpc.DialOption, error) {
	creds := insecure.NewCredentials()
	if c.tlsCA != "" {
		pool, err := raftnode.LoadCAPool(c.tlsCA)
		if err != nil {
			return nil, usageError("--tls-ca: %v", err)
		}
		cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if c.tlsCert != "" || c.tlsKey != "" {
			cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
			if err != nil {
				return nil, usageError("--tls-cert/--tls-key: %v", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		creds = credentials.NewTLS(cfg)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds), rpc.ClientKeepalive, rpc.MessageLimits, grpc.WithChainUnaryInterceptor(trackCall, staleNotice)}
	if c.token != "" {
		opts = append(opts, grpc.WithDefaultCallOptions(rpc.Bearer(c.token, false)))
	}
	return opts, nil
}

// staleNotice tells the user, on stderr, how far behind the leader the
// node that served a --stale read was (the server's stale-read headers).
func staleNotice(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var md metadata.MD
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Header(&md))...)
	if err == nil && len(md.Get(rpc.HeaderBehindMs)) > 0 {
		entries, ms := first(md, rpc.HeaderBehindEntries), first(md, rpc.HeaderBehindMs)
		if entries != "0" || ms != "0" {
			fmt.Fprintf(os.Stderr, "stale read from %s (applied index %s): up to %s entries, %s ms behind the leader\n",
				first(md, rpc.HeaderNode), first(md, rpc.HeaderAppliedIndex), entries, ms)
		}
	}
	return err
}

// retryable reports whether another server may succeed where one failed.
func retryable(err error) bool {
	s, ok := status.FromError(err)
	return !ok || s.Code() == codes.Unavailable || s.Code() == codes.DeadlineExceeded
}

// call runs fn against the servers (see callCtx).
func (c *clientFlags) call(fn func(ctx context.Context, cc *grpc.ClientConn) error) error {
	return c.callCtx(context.Background(), true, fn)
}

// connectTimeout bounds the wait for one server's connection.
const connectTimeout = 2 * time.Second

// callCtx runs fn against each server in turn until one answers. A call
// goes out only once its connection is ready, so a server that is down
// costs nothing but the attempt to connect. A call that failed after it
// went out (UNAVAILABLE, DEADLINE_EXCEEDED) is sent again — to the next
// server, in rounds with backoff until --rpc-timeout — only when repeating
// it is safe: reads, keyed submits, upserts (see idempotentCall). timed
// applies --rpc-timeout; an untimed call (a watch) makes one round.
func (c *clientFlags) callCtx(parent context.Context, timed bool, fn func(ctx context.Context, cc *grpc.ClientConn) error) error {
	ctx, cancel := context.WithCancel(parent)
	if timed {
		ctx, cancel = context.WithTimeout(parent, c.timeout)
	}
	defer cancel()
	dial, err := c.dialOptions()
	if err != nil {
		return err
	}
	var addrs []string
	for _, addr := range strings.Split(c.servers, ",") {
		if addr = strings.TrimSpace(addr); addr != "" {
			addrs = append(addrs, addr)
		}
	}
	if len(addrs) == 0 {
		return usageError("no server given")
	}
	var last error
	pause := 100 * time.Millisecond
	for {
		for _, addr := range addrs {
			cc, err := grpc.NewClient(addr, dial...)
			if err != nil {
				return usageError("server %q: %v", addr, err)
			}
			if !waitReady(ctx, cc) {
				cc.Close()
				if ctx.Err() != nil {
					break
				}
				last = status.Errorf(codes.Unavailable, "cannot connect to %s", addr)
				continue
			}
			info := &callInfo{}
			err = fn(context.WithValue(ctx, callInfoKey{}, info), cc)
			cc.Close()
			if err == nil || !retryable(err) {
				return statusErr(err)
			}
			last = err
			if info.sent && !info.idempotent && !rpc.IsNotLeader(err) {
				// It may have been served: repeating it could do it twice.
				return statusErr(err)
			}
		}
		if !timed || ctx.Err() != nil {
			return statusErr(last)
		}
		select {
		case <-ctx.Done():
			return statusErr(last)
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// waitReady connects cc and waits up to connectTimeout for it to be
// ready; a refused connection returns false at once.
func waitReady(ctx context.Context, cc *grpc.ClientConn) bool {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	cc.Connect()
	for {
		switch st := cc.GetState(); st {
		case connectivity.Ready:
			return true
		case connectivity.TransientFailure, connectivity.Shutdown:
			return false
		default:
			if !cc.WaitForStateChange(ctx, st) {
				return false
			}
		}
	}
}

// callInfo records what the call through one server did (set by
// trackCall): whether a request went out, and whether it may be repeated.
type callInfo struct{ sent, idempotent bool }

type callInfoKey struct{}

// trackCall notes each unary request before it goes out.
func trackCall(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if info, ok := ctx.Value(callInfoKey{}).(*callInfo); ok {
		info.sent = true
		info.idempotent = idempotentCall(method, req)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// idempotentCall reports whether sending a request twice has the effect
// of sending it once: reads, submits with an idempotency key (every job of
// a batch keyed), upserts of tenants and configuration, drains, joins. A submit
// without a key, a cancel or a delete is not (the second answer differs,
// or a second job is made).
func idempotentCall(method string, req any) bool {
	name := method[strings.LastIndexByte(method, '/')+1:]
	switch r := req.(type) {
	case *pb.SubmitRequest:
		return r.GetIdempotencyKey() != ""
	case *pb.SubmitBatchRequest:
		for _, j := range r.Jobs {
			if j.GetIdempotencyKey() == "" {
				return false
			}
		}
		return len(r.Jobs) > 0
	}
	for _, p := range []string{"Get", "List", "Status", "TenantUsage", "Top", "ExplainJob", "UpsertTenant", "SetConfig", "Drain", "Join"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// statusErr formats an RPC error as one line starting with the gRPC code
// name ("NOT_FOUND: job 7 not found"). The code stays readable by
// status.Code.
func statusErr(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	s, ok := status.FromError(err)
	if !ok {
		return err
	}
	return &rpcError{s: s}
}

// rpcError is an RPC failure, printed with its code's name.
type rpcError struct{ s *status.Status }

func (e *rpcError) Error() string { return codeName(e.s.Code()) + ": " + e.s.Message() }

// GRPCStatus lets status.Code and status.FromError read the code.
func (e *rpcError) GRPCStatus() *status.Status { return e.s }

func codeName(c codes.Code) string {
	names := map[codes.Code]string{
		codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN", codes.InvalidArgument: "INVALID_ARGUMENT",
		codes.DeadlineExceeded: "DEADLINE_EXCEEDED", codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
		codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
		codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED", codes.OutOfRange: "OUT_OF_RANGE",
		codes.Unimplemented: "UNIMPLEMENTED", codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE",
		codes.DataLoss: "DATA_LOSS", codes.Unauthenticated: "UNAUTHENTICATED",
	}
	if n, ok := names[c]; ok {
		return n
	}
	return c.String()
}

// printJSON writes v as one JSON line.
func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// printTable writes aligned key/value lines.
func printTable(w io.Writer, rows [][2]string) {
	width := 0
	for _, r := range rows {
		width = max(width, len(r[0]))
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%-*s  %s\n", width, r[0], r[1])
	}
}
