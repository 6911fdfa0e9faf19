package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/internal/proc"
	"github.com/baristahq/barista/proto/clusterpb"
)

// localCluster runs barista servers as child processes of this one, on
// loopback, each with its own data directory (barista bench uses it).
type localCluster struct {
	self  string
	dir   string
	extra []string // added to every server's command line
	nodes []*localNode
}

type localNode struct {
	id, grpc, raft, http, dataDir string
	proc.Process
}

// newLocalCluster prepares n nodes on free ports under dir.
func newLocalCluster(dir string, n int, extra ...string) (*localCluster, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	lc := &localCluster{self: self, dir: dir, extra: extra}
	addrs, err := proc.FreeAddrs(3 * n)
	if err != nil {
		return nil, err
	}
	for i := 1; i <= n; i++ {
		node := &localNode{id: fmt.Sprintf("n%d", i), dataDir: filepath.Join(dir, fmt.Sprintf("n%d", i))}
		node.LogPath = filepath.Join(dir, node.id+".log")
		node.grpc, node.raft, node.http = addrs[3*i-3], addrs[3*i-2], addrs[3*i-1]
		lc.nodes = append(lc.nodes, node)
	}
	return lc, nil
}

// start boots the first node and joins the others.
func (lc *localCluster) start(ctx context.Context) error {
	for i := range lc.nodes {
		args := []string{"--bootstrap"}
		if i > 0 {
			args = []string{"--join", lc.nodes[0].grpc}
		}
		if err := lc.startNode(i, args...); err != nil {
			return err
		}
		if i == 0 {
			if err := waitLeader(ctx, lc.nodes[0].grpc); err != nil {
				return err
			}
		}
	}
	return lc.waitVoters(ctx, len(lc.nodes))
}

func (lc *localCluster) startNode(i int, args ...string) error {
	n := lc.nodes[i]
	// Every worker and client of a local cluster connects from loopback:
	// bench's thousand workers are one address.
	argv := append([]string{"server", "--node-id", n.id, "--data-dir", n.dataDir, "--raft-addr", n.raft,
		"--grpc-addr", n.grpc, "--http-addr", n.http, "--insecure-dev", "--log-level", "warn", "--max-connections-per-address", "65536"}, lc.extra...)
	argv = append(argv, args...)
	return n.Start(exec.Command(lc.self, argv...), true, nil)
}

// kill sends SIGKILL to node i and waits for it.
func (lc *localCluster) kill(i int) {
	lc.nodes[i].Signal(syscall.SIGKILL)
	lc.nodes[i].Wait(time.Minute)
}

// stop shuts every node down cleanly (SIGTERM), killing any still running
// 20 s later.
func (lc *localCluster) stop() {
	for _, n := range lc.nodes {
		n.Signal(syscall.SIGTERM)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range lc.nodes {
		if !n.Wait(time.Until(deadline)) {
			n.Stop(0)
		}
	}
}

func (lc *localCluster) servers() string {
	var s []string
	for _, n := range lc.nodes {
		s = append(s, n.grpc)
	}
	return strings.Join(s, ",")
}

func (lc *localCluster) dial(i int) (*grpc.ClientConn, error) {
	return grpc.NewClient(lc.nodes[i].grpc, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, client.StaticWindows...)...)
}

func (lc *localCluster) status(i int) (*clusterpb.StatusResponse, error) {
	cc, err := lc.dial(i)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return clusterpb.NewNodeClient(cc).Status(ctx, &clusterpb.StatusRequest{})
}

// leader returns the index of the node that leads, waiting for one.
func (lc *localCluster) leader(ctx context.Context) (int, error) {
	for ctx.Err() == nil {
		for i := range lc.nodes {
			if st, err := lc.status(i); err == nil && st.State == "leader" {
				return i, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return -1, errors.New("no leader")
}

func (lc *localCluster) waitVoters(ctx context.Context, want int) error {
	for ctx.Err() == nil {
		if i, err := lc.leader(ctx); err == nil {
			cc, err := lc.dial(i)
			if err == nil {
				sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				resp, err := clusterpb.NewNodeClient(cc).ListPeers(sctx, &clusterpb.ListPeersRequest{})
				cancel()
				cc.Close()
				if err == nil && len(resp.Peers) == want {
					return nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the cluster did not reach %d voters", want)
}

// waitConverged waits until the running nodes report one applied index
// and state hash.
func (lc *localCluster) waitConverged(ctx context.Context, nodes []int) error {
	for ctx.Err() == nil {
		var idx uint64
		hash := ""
		same := true
		for k, i := range nodes {
			st, err := lc.status(i)
			if err != nil || (k > 0 && (st.AppliedIndex != idx || st.StateHash != hash)) {
				same = false
				break
			}
			idx, hash = st.AppliedIndex, st.StateHash
		}
		if same {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return ctx.Err()
}

// waitCaughtUp waits until node i has applied what the leader had applied
// when the wait began (the cluster may keep taking writes meanwhile).
func (lc *localCluster) waitCaughtUp(ctx context.Context, i int) error {
	l, err := lc.leader(ctx)
	if err != nil {
		return err
	}
	st, err := lc.status(l)
	for err != nil && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		st, err = lc.status(l)
	}
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		if s, err := lc.status(i); err == nil && s.AppliedIndex >= st.AppliedIndex {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return ctx.Err()
}
