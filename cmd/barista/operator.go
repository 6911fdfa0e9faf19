package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"google.golang.org/grpc"

	"github.com/baristahq/barista/internal/peertext"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/snapshot"
)

func init() {
	register("operator raft list-peers", typed(&spec[clientFlags]{
		synopsis: "List the Raft configuration: addresses, state, applied index, last contact and lag of each member",
		usage:    "[--server ADDR] [--json]",
		run: func(env *cmdEnv, opts *clientFlags, args []string) error {
			resp, err := ask(opts.call, clusterpb.NewNodeClient, clusterpb.NodeClient.ListPeers, &clusterpb.ListPeersRequest{})
			if err != nil {
				return err
			}
			if opts.json {
				var peers []map[string]any
				for _, p := range resp.Peers {
					m := map[string]any{"id": p.Id, "raft_addr": p.RaftAddr, "grpc_addr": p.GrpcAddr,
						"http_addr": p.HttpAddr, "voter": p.Voter, "leader": p.Leader, "state": peertext.State(p)}
					if p.AppliedKnown {
						m["applied_index"] = p.AppliedIndex
					}
					if p.Known {
						m["last_contact_ms"], m["reachable"] = p.LastContactMs, p.Reachable
					}
					if p.LagKnown {
						m["lag"] = p.Lag
					}
					peers = append(peers, m)
				}
				return printJSON(env.stdout, map[string]any{"peers": peers, "index": resp.Index})
			}
			fmt.Fprintf(env.stdout, "%-12s %-22s %-22s %-6s %-12s %-10s %-14s %s\n", "ID", "RAFT", "GRPC", "VOTER", "STATE", "APPLIED", "LAST CONTACT", "LAG")
			for _, p := range resp.Peers {
				f := peertext.Facts(p)
				fmt.Fprintf(env.stdout, "%-12s %-22s %-22s %-6v %-12s %-10s %-14s %s\n", p.Id, p.RaftAddr, p.GrpcAddr, p.Voter, peertext.State(p), f.Applied, f.Contact, f.Lag)
			}
			return nil
		},
	}))
}

func init() {
	register("operator raft remove-peer", typed(&spec[clientFlags]{
		synopsis: "Remove a server from the Raft configuration",
		usage:    "ID",
		help: `Removes the server with this ID through the leader, and its member
record. Use it for a dead server before replacing it: a three-node cluster
with a dead member has no fault tolerance left.`,
		run: func(env *cmdEnv, opts *clientFlags, args []string) error {
			if len(args) != 1 {
				return usageError("remove-peer needs one ID")
			}
			if _, err := ask(opts.call, clusterpb.NewNodeClient, clusterpb.NodeClient.RemovePeer, &clusterpb.RemovePeerRequest{Id: args[0]}); err != nil {
				return err
			}
			fmt.Fprintf(env.stdout, "removed %s\n", args[0])
			return nil
		},
	}))
	register("operator raft transfer-leader", typed(&spec[clientFlags]{
		synopsis: "Hand leadership to another voter",
		usage:    "[ID]",
		run: func(env *cmdEnv, opts *clientFlags, args []string) error {
			if len(args) > 1 {
				return usageError("transfer-leader takes at most one ID")
			}
			req := &clusterpb.TransferLeadershipRequest{}
			if len(args) == 1 {
				req.Id = args[0]
			}
			resp, err := ask(opts.call, clusterpb.NewNodeClient, clusterpb.NodeClient.TransferLeadership, req)
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(env.stdout, map[string]any{"leader_id": resp.LeaderId})
			}
			fmt.Fprintf(env.stdout, "leader is now %s\n", resp.LeaderId)
			return nil
		},
	}))
}

func init() {
	register("operator snapshot save", typed(&spec[clientFlags]{
		synopsis: "Save a snapshot of the cluster's state to a file (a backup)",
		usage:    "FILE [--server ADDR]",
		help: `Streams a consistent snapshot of a node's state (at its applied index) into
FILE, checksummed; prints the index and state hash. Restore it into the
same or a fresh cluster with "barista operator snapshot restore FILE".`,
		run: runSnapshotSave,
	}))
}

func init() {
	register("operator snapshot restore", typed(&spec[clientFlags]{
		synopsis: "Replace the cluster's state with a saved snapshot (disaster recovery)",
		usage:    "FILE [--server ADDR]",
		help: `Checks FILE's checksum, sends it to the leader, which installs it through
Raft (followers and later members receive it by InstallSnapshot). Every
job, tenant and setting of the cluster is replaced by the snapshot's.`,
		run: runSnapshotRestore,
	}))
}

func runSnapshotSave(env *cmdEnv, opts *clientFlags, args []string) error {
	if len(args) != 1 {
		return usageError("snapshot save needs one FILE")
	}
	path := args[0]
	tmp := path + ".partial"
	var index, hash string
	err := opts.stream(func(ctx context.Context, cc grpc.ClientConnInterface) error {
		f, err := os.Create(tmp)
		if err != nil {
			return err
		}
		defer f.Close()
		stream, err := clusterpb.NewNodeClient(cc).SnapshotSave(ctx, &clusterpb.SnapshotSaveRequest{})
		if err != nil {
			return err
		}
		for {
			c, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			if _, err := f.Write(c.Data); err != nil {
				return err
			}
		}
		tr := stream.Trailer()
		index, hash = first(tr, "index"), first(tr, "state-hash")
		return f.Sync()
	})
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := snapshot.VerifyFile(tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("the saved snapshot does not verify: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	abs, _ := filepath.Abs(path)
	if opts.json {
		return printJSON(env.stdout, map[string]any{"file": abs, "index": index, "state_hash": hash})
	}
	fmt.Fprintf(env.stdout, "saved %s (index %s, state hash %s)\n", abs, index, hash)
	return nil
}

func runSnapshotRestore(env *cmdEnv, opts *clientFlags, args []string) error {
	if len(args) != 1 {
		return usageError("snapshot restore needs one FILE")
	}
	if err := snapshot.VerifyFile(args[0]); err != nil {
		return err
	}
	// Find the leader, then send it the file.
	var leader string
	if err := opts.call(func(ctx context.Context, cc grpc.ClientConnInterface) error {
		st, err := clusterpb.NewNodeClient(cc).Status(ctx, &clusterpb.StatusRequest{})
		if err == nil {
			leader = st.LeaderAddr
		}
		return err
	}); err != nil {
		return err
	}
	if leader == "" {
		return errors.New("UNAVAILABLE: no leader known")
	}
	target := *opts
	target.servers = leader
	var resp *clusterpb.SnapshotRestoreResponse
	err := target.stream(func(ctx context.Context, cc grpc.ClientConnInterface) error {
		f, err := os.Open(args[0])
		if err != nil {
			return err
		}
		defer f.Close()
		stream, err := clusterpb.NewNodeClient(cc).SnapshotRestore(ctx)
		if err != nil {
			return err
		}
		buf := make([]byte, 256<<10)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				if err := stream.Send(&clusterpb.SnapshotChunk{Data: append([]byte(nil), buf[:n]...)}); err != nil {
					return err
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
		}
		resp, err = stream.CloseAndRecv()
		return err
	})
	if err != nil {
		return err
	}
	if opts.json {
		return printJSON(env.stdout, map[string]any{"index": resp.Index, "state_hash": resp.StateHash})
	}
	fmt.Fprintf(env.stdout, "restored: the cluster is at index %d with state hash %s\n", resp.Index, resp.StateHash)
	return nil
}
