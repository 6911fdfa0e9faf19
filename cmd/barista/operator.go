package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"google.golang.org/grpc"

	pb "barista/proto"
	"barista/rpc"
)

func init() {
	register("operator raft list-peers", &command{
		synopsis: "List the Raft configuration: addresses, state, last contact and lag of each member",
		usage:    "[--server ADDR] [--json]",
		flags:    func(fs *flag.FlagSet) any { o := &clientFlags{}; o.register(fs); return o },
		run: func(env *cmdEnv, o any, args []string) error {
			opts := o.(*clientFlags)
			var resp *pb.ListPeersResponse
			err := opts.call(func(ctx context.Context, cc grpc.ClientConnInterface) (err error) {
				resp, err = pb.NewNodeClient(cc).ListPeers(ctx, &pb.ListPeersRequest{})
				return err
			})
			if err != nil {
				return err
			}
			if opts.json {
				var peers []map[string]any
				for _, p := range resp.Peers {
					m := map[string]any{"id": p.Id, "raft_addr": p.RaftAddr, "grpc_addr": p.GrpcAddr,
						"http_addr": p.HttpAddr, "voter": p.Voter, "leader": p.Leader, "applied_index": p.AppliedIndex,
						"state": rpc.PeerState(p)}
					if p.Known {
						m["last_contact_ms"], m["lag"], m["reachable"] = p.LastContactMs, p.Lag, p.Reachable
					}
					peers = append(peers, m)
				}
				return printJSON(env.stdout, map[string]any{"peers": peers, "index": resp.Index})
			}
			fmt.Fprintf(env.stdout, "%-12s %-22s %-22s %-6s %-12s %-14s %s\n", "ID", "RAFT", "GRPC", "VOTER", "STATE", "LAST CONTACT", "LAG")
			for _, p := range resp.Peers {
				contact, lag := "-", "-"
				if p.Known && !p.Leader {
					contact = (time.Duration(p.LastContactMs) * time.Millisecond).String() + " ago"
					lag = fmt.Sprint(p.Lag)
				}
				fmt.Fprintf(env.stdout, "%-12s %-22s %-22s %-6v %-12s %-14s %s\n", p.Id, p.RaftAddr, p.GrpcAddr, p.Voter, rpc.PeerState(p), contact, lag)
			}
			return nil
		},
	})
}

func init() {
	register("operator raft remove-peer", &command{
		synopsis: "Remove a server from the Raft configuration",
		usage:    "ID",
		help: `Removes the server with this ID through the leader, and its member
record. Use it for a dead server before replacing it: a three-node cluster
with a dead member has no fault tolerance left.`,
		flags: func(fs *flag.FlagSet) any { o := &clientFlags{}; o.register(fs); return o },
		run: func(env *cmdEnv, o any, args []string) error {
			opts := o.(*clientFlags)
			if len(args) != 1 {
				return usageError("remove-peer needs one ID")
			}
			if err := opts.call(func(ctx context.Context, cc grpc.ClientConnInterface) error {
				_, err := pb.NewNodeClient(cc).RemovePeer(ctx, &pb.RemovePeerRequest{Id: args[0]})
				return err
			}); err != nil {
				return err
			}
			fmt.Fprintf(env.stdout, "removed %s\n", args[0])
			return nil
		},
	})
	register("operator raft transfer-leader", &command{
		synopsis: "Hand leadership to another voter",
		usage:    "[ID]",
		flags:    func(fs *flag.FlagSet) any { o := &clientFlags{}; o.register(fs); return o },
		run: func(env *cmdEnv, o any, args []string) error {
			opts := o.(*clientFlags)
			if len(args) > 1 {
				return usageError("transfer-leader takes at most one ID")
			}
			req := &pb.TransferLeadershipRequest{}
			if len(args) == 1 {
				req.Id = args[0]
			}
			var resp *pb.TransferLeadershipResponse
			if err := opts.call(func(ctx context.Context, cc grpc.ClientConnInterface) (err error) {
				resp, err = pb.NewNodeClient(cc).TransferLeadership(ctx, req)
				return err
			}); err != nil {
				return err
			}
			if opts.json {
				return printJSON(env.stdout, map[string]any{"leader_id": resp.LeaderId})
			}
			fmt.Fprintf(env.stdout, "leader is now %s\n", resp.LeaderId)
			return nil
		},
	})
}
