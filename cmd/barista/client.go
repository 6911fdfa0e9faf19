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
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

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
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds), rpc.ClientKeepalive}
	if c.token != "" {
		opts = append(opts, grpc.WithDefaultCallOptions(rpc.Bearer(c.token, false)))
	}
	return opts, nil
}

// retryable reports whether another server may succeed where one failed.
func retryable(err error) bool {
	s, ok := status.FromError(err)
	return !ok || s.Code() == codes.Unavailable || s.Code() == codes.DeadlineExceeded
}

// call runs fn against each server in turn until one does not fail with
// a connection-level error.
func (c *clientFlags) call(fn func(ctx context.Context, cc *grpc.ClientConn) error) error {
	return c.callCtx(context.Background(), true, fn)
}

// callCtx is call with a parent context; timed applies --timeout (a watch
// runs until interrupted).
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
	var last error
	for _, addr := range strings.Split(c.servers, ",") {
		addr = strings.TrimSpace(addr)
		if addr == "" {
			continue
		}
		cc, err := grpc.NewClient(addr, dial...)
		if err != nil {
			last = status.Errorf(codes.InvalidArgument, "server %q: %v", addr, err)
			continue
		}
		err = fn(ctx, cc)
		cc.Close()
		if err == nil || !retryable(err) {
			return statusErr(err)
		}
		last = err
	}
	if last == nil {
		return usageError("no server given")
	}
	return statusErr(last)
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
