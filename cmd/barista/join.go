package main

import (
	"flag"
	"fmt"

	"google.golang.org/grpc/metadata"

	"github.com/baristahq/barista/proto/clusterpb"
)

type joinOpts struct {
	clientFlags
	id, raft, grpcAddr, http string
}

func init() {
	register("join", typed(&spec[joinOpts]{
		synopsis: "Add a server to the cluster as a voter (through any member)",
		usage:    "--node-id ID --raft-addr HOST:PORT --grpc-addr HOST:PORT [--http-addr HOST:PORT] [--server MEMBER]",
		help: `Asks a member (--server; a follower forwards to the leader) to add the
server as a voter and record its addresses. Idempotent: joining a server
already present with the same address changes nothing; a known ID with a
new address is replaced. "barista server --join" does the same at start.`,
		flags: func(fs *flag.FlagSet, o *joinOpts) {
			o.register(fs)
			fs.StringVar(&o.id, "node-id", "", "the joining server's `ID`")
			fs.StringVar(&o.raft, "raft-addr", "", "its Raft `HOST:PORT`")
			fs.StringVar(&o.grpcAddr, "grpc-addr", "", "its gRPC `HOST:PORT`")
			fs.StringVar(&o.http, "http-addr", "", "its HTTP `HOST:PORT`")
		},
		run: func(env *cmdEnv, opts *joinOpts, args []string) error {
			if opts.id == "" || opts.raft == "" || opts.grpcAddr == "" {
				return usageError("join needs --node-id, --raft-addr and --grpc-addr")
			}
			resp, err := ask(opts.call, clusterpb.NewNodeClient, clusterpb.NodeClient.Join, &clusterpb.JoinRequest{Id: opts.id, RaftAddr: opts.raft, GrpcAddr: opts.grpcAddr, HttpAddr: opts.http})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(env.stdout, map[string]any{"id": opts.id, "leader_id": resp.LeaderId, "index": resp.Index})
			}
			fmt.Fprintf(env.stdout, "%s is a voter (leader %s)\n", opts.id, resp.LeaderId)
			return nil
		},
	}))
}

func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}
