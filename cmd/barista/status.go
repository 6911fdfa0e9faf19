package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/baristahq/barista/proto/clusterpb"
)

type statusOpts struct{ clientFlags }

func init() {
	register("status", typed(&spec[statusOpts]{
		synopsis: "Show a node's view of the cluster: state, leader, applied index, state hash",
		usage:    "[--server ADDR] [--json]",
		help: `Asks one node (the first of --server that answers) for its status. With
--json prints one object with the keys node_id, state, leader_id,
leader_addr, applied_index, state_hash, version (the release of the node's
build; docs/releasing.md), and more. The feature level is the
cluster's, as this node applied it, and the highest its build understands
(docs/operations.md, "Upgrades"). Cluster time is the clock of delays,
deadlines, leases and rate limits: it runs with the leader's clock and
falls behind the wall clock only by what no leader counted (elections, at
most clock_tick before a leader crashed, and stops of the whole cluster);
status says by how much (cluster_behind_ms; docs/operations.md, "Cluster
time").`,
		flags: func(fs *flag.FlagSet, o *statusOpts) {
			o.register(fs)
		},
		run: func(env *cmdEnv, opts *statusOpts, args []string) error {
			if len(args) > 0 {
				return usageError("unexpected argument %q", args[0])
			}
			st, err := ask(opts.call, clusterpb.NewNodeClient, clusterpb.NodeClient.Status, &clusterpb.StatusRequest{})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(env.stdout, map[string]any{
					"node_id": st.NodeId, "state": st.State, "leader_id": st.LeaderId, "leader_addr": st.LeaderAddr,
					"applied_index": st.AppliedIndex, "state_hash": st.StateHash, "raft_addr": st.RaftAddr,
					"grpc_addr": st.GrpcAddr, "last_log_index": st.LastLogIndex, "commit_index": st.CommitIndex,
					"term": st.Term, "cluster_time_ms": st.ClusterTimeMs, "jobs": st.Jobs, "tenants": st.Tenants,
					"last_leader_contact_ms": st.LastLeaderContactMs, "feature_level": st.FeatureLevel,
					"cluster_feature_level": st.ClusterFeatureLevel, "cluster_behind_ms": st.ClusterBehindMs,
					"version": st.Version,
				})
			}
			leader := fmt.Sprintf("%s %s", st.LeaderId, st.LeaderAddr)
			if st.State != "leader" && st.LeaderId != "" {
				leader += fmt.Sprintf(" (last heard from %s ago)", time.Duration(st.LastLeaderContactMs)*time.Millisecond)
			}
			built := st.Version
			if built == "" {
				built = "before releases"
			}
			printTable(env.stdout, [][2]string{
				{"node", st.NodeId + " (" + st.State + ")"},
				{"version", built},
				{"leader", leader},
				{"term", fmt.Sprint(st.Term)},
				{"applied index", fmt.Sprint(st.AppliedIndex)},
				{"commit index", fmt.Sprint(st.CommitIndex)},
				{"state hash", st.StateHash},
				{"cluster time", clusterTimeText(st)},
				{"jobs", fmt.Sprint(st.Jobs)},
				{"tenants", fmt.Sprint(st.Tenants)},
				{"feature level", fmt.Sprintf("%d (this node's build understands up to %d)", st.ClusterFeatureLevel, st.FeatureLevel)},
			})
			return nil
		},
	}))
}

// clusterTimeText says how far a node's cluster time is behind the wall
// clock, as of its last applied entry.
func clusterTimeText(st *clusterpb.StatusResponse) string {
	if st.ClusterTimeMs == 0 {
		return "not started"
	}
	behind := time.Duration(st.ClusterBehindMs) * time.Millisecond
	switch r := behind.Round(100 * time.Millisecond); {
	case behind >= time.Minute:
		return fmt.Sprintf("%s behind wall time", behind.Round(time.Second))
	case r > 0:
		return fmt.Sprintf("%s behind wall time", r)
	case r < 0:
		return fmt.Sprintf("%s ahead of wall time (the leader's clock was set back)", -r)
	}
	return "with wall time"
}
