package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	pb "barista/proto"
	"barista/snapshot"
)

type joinOpts struct {
	clientFlags
	id, raft, grpcAddr, http string
}

func init() {
	register("join", &command{
		synopsis: "Add a server to the cluster as a voter (through any member)",
		usage:    "--node-id ID --raft-addr HOST:PORT --grpc-addr HOST:PORT [--http-addr HOST:PORT] [--server MEMBER]",
		help: `Asks a member (--server; a follower forwards to the leader) to add the
server as a voter and record its addresses. Idempotent: joining a server
already present with the same address changes nothing; a known ID with a
new address is replaced. "barista server --join" does the same at start.`,
		flags: func(fs *flag.FlagSet) any {
			o := &joinOpts{}
			o.register(fs)
			fs.StringVar(&o.id, "node-id", "", "the joining server's `ID`")
			fs.StringVar(&o.raft, "raft-addr", "", "its Raft `HOST:PORT`")
			fs.StringVar(&o.grpcAddr, "grpc-addr", "", "its gRPC `HOST:PORT`")
			fs.StringVar(&o.http, "http-addr", "", "its HTTP `HOST:PORT`")
			return o
		},
		run: func(env *cmdEnv, o any, args []string) error {
			opts := o.(*joinOpts)
			if opts.id == "" || opts.raft == "" || opts.grpcAddr == "" {
				return usageError("join needs --node-id, --raft-addr and --grpc-addr")
			}
			var resp *pb.JoinResponse
			if err := opts.call(func(ctx context.Context, cc grpc.ClientConnInterface) (err error) {
				resp, err = pb.NewNodeClient(cc).Join(ctx, &pb.JoinRequest{Id: opts.id, RaftAddr: opts.raft, GrpcAddr: opts.grpcAddr, HttpAddr: opts.http})
				return err
			}); err != nil {
				return err
			}
			if opts.json {
				return printJSON(env.stdout, map[string]any{"id": opts.id, "leader_id": resp.LeaderId, "index": resp.Index})
			}
			fmt.Fprintf(env.stdout, "%s is a voter (leader %s)\n", opts.id, resp.LeaderId)
			return nil
		},
	})
	register("operator snapshot save", &command{
		synopsis: "Save a snapshot of the cluster's state to a file (a backup)",
		usage:    "FILE [--server ADDR]",
		help: `Streams a consistent snapshot of a node's state (at its applied index) into
FILE, checksummed; prints the index and state hash. Restore it into the
same or a fresh cluster with "barista operator snapshot restore FILE".`,
		flags: func(fs *flag.FlagSet) any { o := &clientFlags{}; o.register(fs); return o },
		run:   runSnapshotSave,
	})
	register("operator snapshot restore", &command{
		synopsis: "Replace the cluster's state with a saved snapshot (disaster recovery)",
		usage:    "FILE [--server ADDR]",
		help: `Checks FILE's checksum, sends it to the leader, which installs it through
Raft (followers and later members receive it by InstallSnapshot). Every
job, tenant and setting of the cluster is replaced by the snapshot's.`,
		flags: func(fs *flag.FlagSet) any { o := &clientFlags{}; o.register(fs); return o },
		run:   runSnapshotRestore,
	})
}

func runSnapshotSave(env *cmdEnv, o any, args []string) error {
	opts := o.(*clientFlags)
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
		stream, err := pb.NewNodeClient(cc).SnapshotSave(ctx, &pb.SnapshotSaveRequest{})
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

func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func runSnapshotRestore(env *cmdEnv, o any, args []string) error {
	opts := o.(*clientFlags)
	if len(args) != 1 {
		return usageError("snapshot restore needs one FILE")
	}
	if err := snapshot.VerifyFile(args[0]); err != nil {
		return err
	}
	// Find the leader, then send it the file.
	var leader string
	if err := opts.call(func(ctx context.Context, cc grpc.ClientConnInterface) error {
		st, err := pb.NewNodeClient(cc).Status(ctx, &pb.StatusRequest{})
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
	var resp *pb.SnapshotRestoreResponse
	err := target.stream(func(ctx context.Context, cc grpc.ClientConnInterface) error {
		f, err := os.Open(args[0])
		if err != nil {
			return err
		}
		defer f.Close()
		stream, err := pb.NewNodeClient(cc).SnapshotRestore(ctx)
		if err != nil {
			return err
		}
		buf := make([]byte, 256<<10)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				if err := stream.Send(&pb.SnapshotChunk{Data: append([]byte(nil), buf[:n]...)}); err != nil {
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
