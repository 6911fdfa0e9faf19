package main

import (
	"flag"
	"fmt"
	"time"

	pb "github.com/baristahq/barista/proto"
)

type statusOpts struct{ clientFlags }

func init() {
	register("status", typed(&spec[statusOpts]{
		synopsis: "Show a node's view of the cluster: state, leader, applied index, state hash",
		usage:    "[--server ADDR] [--json]",
		help: `Asks one node (the first of --server that answers) for its status. With
--json prints one object with the keys node_id, state, leader_id,
leader_addr, applied_index, state_hash, and more. The feature level is the
cluster's, as this node applied it, and the highest its build understands
(docs/operations.md, "Upgrades").`,
		flags: func(fs *flag.FlagSet, o *statusOpts) {
			o.register(fs)
		},
		run: func(env *cmdEnv, opts *statusOpts, args []string) error {
			if len(args) > 0 {
				return usageError("unexpected argument %q", args[0])
			}
			st, err := ask(opts.call, pb.NewNodeClient, pb.NodeClient.Status, &pb.StatusRequest{})
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
					"cluster_feature_level": st.ClusterFeatureLevel,
				})
			}
			leader := fmt.Sprintf("%s %s", st.LeaderId, st.LeaderAddr)
			if st.State != "leader" && st.LeaderId != "" {
				leader += fmt.Sprintf(" (last heard from %s ago)", time.Duration(st.LastLeaderContactMs)*time.Millisecond)
			}
			printTable(env.stdout, [][2]string{
				{"node", st.NodeId + " (" + st.State + ")"},
				{"leader", leader},
				{"term", fmt.Sprint(st.Term)},
				{"applied index", fmt.Sprint(st.AppliedIndex)},
				{"commit index", fmt.Sprint(st.CommitIndex)},
				{"state hash", st.StateHash},
				{"jobs", fmt.Sprint(st.Jobs)},
				{"tenants", fmt.Sprint(st.Tenants)},
				{"feature level", fmt.Sprintf("%d (this node's build understands up to %d)", st.ClusterFeatureLevel, st.FeatureLevel)},
			})
			return nil
		},
	}))
}
