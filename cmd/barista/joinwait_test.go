package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baristahq/barista/internal/nodetest"
	"github.com/baristahq/barista/raftnode"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSayWaitingToBeJoined: a server started with neither --bootstrap
// nor --join says, once, that it waits to be joined and the commands
// that join it (naming its own addresses); a node in a cluster says
// nothing.
func TestSayWaitingToBeJoined(t *testing.T) {
	for _, bootstrap := range []bool{false, true} {
		cfg, lis := nodetest.Config(t)
		lis.Close()
		cfg.Bootstrap, cfg.HTTPAddr = bootstrap, "127.0.0.1:7402"
		node, err := raftnode.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if bootstrap {
			nodetest.WaitFor(t, 10*time.Second, "a leader", node.IsLeader)
		}
		var out lockedBuffer
		log := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info, DisableTime: true})
		sayWaitingToBeJoined(context.Background(), log, node, cfg, 0)
		want := "[WARN]  this node is in no cluster yet and waits to be joined: from a member, run barista join --node-id n1 --raft-addr " + cfg.RaftAddr +
			" --grpc-addr " + cfg.GRPCAddr + " --http-addr 127.0.0.1:7402 --server MEMBER_GRPC_ADDR; or start it with --join MEMBER_GRPC_ADDR (or --bootstrap, to make it a new cluster of its own)\n"
		if got := out.String(); (bootstrap && got != "") || (!bootstrap && got != want) {
			t.Errorf("bootstrap %v: logged %q", bootstrap, got)
		}
		if err := node.Shutdown(); err != nil && !strings.Contains(err.Error(), "shutdown") {
			t.Log(err)
		}
	}
}
