package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/rpc"
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
	// insecureGRPC sends the token in plaintext to a server that is not
	// on this machine (refused otherwise).
	insecureGRPC bool
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.servers, "server", defaultServer(), "gRPC `ADDR[,ADDR...]` of any node; on failure the next is tried ($BARISTA_ADDR)")
	fs.StringVar(&c.token, "token", os.Getenv("BARISTA_TOKEN"), "bearer `TOKEN` ($BARISTA_TOKEN)")
	fs.BoolVar(&c.json, "json", false, "print JSON")
	durFlag(fs, &c.timeout, "rpc-timeout", 15*time.Second, time.Millisecond, 24*time.Hour, "", "give up on the server after this `DURATION`")
	fs.StringVar(&c.tlsCA, "tls-ca", os.Getenv("BARISTA_TLS_CA"), "verify the server with this CA `FILE` (enables TLS; $BARISTA_TLS_CA)")
	fs.StringVar(&c.tlsCert, "tls-cert", os.Getenv("BARISTA_TLS_CERT"), "client certificate `FILE` ($BARISTA_TLS_CERT)")
	fs.StringVar(&c.tlsKey, "tls-key", os.Getenv("BARISTA_TLS_KEY"), "client key `FILE` ($BARISTA_TLS_KEY)")
	fs.BoolVar(&c.insecureGRPC, "insecure-grpc", false, "send the token without TLS to a --server that is not on this machine (it then crosses the network in clear; refused without this)")
}

// options are the client package's settings of the flags.
func (c *clientFlags) options() (client.Options, error) {
	o := client.Options{
		Token:        c.token,
		InsecureGRPC: c.insecureGRPC,
		CallTimeout:  c.timeout,
		WatchBackoff: client.Backoff{First: watchBackoff.first, Max: watchBackoff.most},
		DialOptions:  []grpc.DialOption{grpc.WithChainUnaryInterceptor(staleNotice)},
	}
	if c.tlsCA != "" {
		if _, err := client.TLSConfig(c.tlsCA, "", ""); err != nil {
			return o, usageError("--tls-ca: %v", err)
		}
		cfg, err := client.TLSConfig(c.tlsCA, c.tlsCert, c.tlsKey)
		if err != nil {
			return o, usageError("--tls-cert/--tls-key: %v", err)
		}
		o.TLS = cfg
	}
	return o, nil
}

// newClient returns a client of the --server nodes with options o.
func (c *clientFlags) newClient(o client.Options) (*client.Client, error) {
	var addrs []string
	for _, addr := range strings.Split(c.servers, ",") {
		if addr = strings.TrimSpace(addr); addr != "" {
			addrs = append(addrs, addr)
		}
	}
	if len(addrs) == 0 {
		return nil, usageError("no server given")
	}
	if a := client.TokenInClear(addrs, o.Token, o.TLS); a != "" && !o.InsecureGRPC {
		return nil, tokenInClearError(a)
	}
	cl, err := client.New(addrs, o)
	if err != nil {
		return nil, usageError("--server: %v", err)
	}
	return cl, nil
}

// tokenInClearError refuses to send a token in plaintext to a server
// that is not on this machine, naming the flags that fix it.
func tokenInClearError(addr string) error {
	return usageError("--server %s is not on this machine and --tls-ca is not set: the token would cross the network in clear; give --tls-ca FILE (the servers' CA), or --insecure-grpc to send it anyway", addr)
}

// with runs fn with a client of the --server nodes (see the client
// package: failover, and retries of the calls that are safe to repeat
// until --rpc-timeout).
func (c *clientFlags) with(fn func(cl *client.Client) error) error {
	o, err := c.options()
	if err != nil {
		return err
	}
	cl, err := c.newClient(o)
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(cl)
}

// withJob runs one call about the job whose ID is the one argument of
// args (usage, the usage error without it), and returns the ID and the
// call's answer.
func withJob[T any](c *clientFlags, args []string, usage string, call func(cl *client.Client, id uint64) (T, error)) (uint64, T, error) {
	var out T
	if len(args) != 1 {
		return 0, out, usageError("%s", usage)
	}
	id, err := parseJobID(args[0])
	if err != nil {
		return 0, out, err
	}
	err = c.with(func(cl *client.Client) (err error) {
		out, err = call(cl, id)
		return err
	})
	return id, out, err
}

// withCall makes one call of the client package with req through with (a
// clientFlags' with) and returns its answer; method is the call, a method
// expression such as (*client.Client).GetJob.
func withCall[Req, Resp any](with func(func(*client.Client) error) error, method func(*client.Client, context.Context, Req) (Resp, error), req Req) (Resp, error) {
	var resp Resp
	err := with(func(cl *client.Client) (err error) {
		resp, err = method(cl, context.Background(), req)
		return err
	})
	return resp, err
}

// raw is a call of the client's protobuf API (client.Raw) as withCall
// takes it.
func raw[Req, Resp any](method func(client.Raw, context.Context, Req) (Resp, error)) func(*client.Client, context.Context, Req) (Resp, error) {
	return func(cl *client.Client, ctx context.Context, req Req) (Resp, error) { return method(cl.Raw(), ctx, req) }
}

// call runs a unary call of any service through the nodes (client.Call).
func (c *clientFlags) call(fn func(ctx context.Context, cc grpc.ClientConnInterface) error) error {
	return c.with(func(cl *client.Client) error { return cl.Call(context.Background(), fn) })
}

// ask makes one unary call through call (a clientFlags' call) and returns
// its answer: newClient makes the service's client and method is the call,
// a method expression such as pb.NodeClient.Status.
func ask[C, Req, Resp any](call func(func(context.Context, grpc.ClientConnInterface) error) error,
	newClient func(grpc.ClientConnInterface) C, method func(C, context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	var resp Resp
	err := call(func(ctx context.Context, cc grpc.ClientConnInterface) (err error) {
		resp, err = method(newClient(cc), ctx, req)
		return err
	})
	return resp, err
}

// stream runs a streaming call on the first node that takes it
// (client.Stream); only the stream's end bounds it.
func (c *clientFlags) stream(fn func(ctx context.Context, cc grpc.ClientConnInterface) error) error {
	return c.with(func(cl *client.Client) error { return cl.Stream(context.Background(), fn) })
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
