package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"google.golang.org/grpc"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
)

// configView renders the replicated configuration with the keys of the
// [scheduler] section of the config file, read through the same settings
// table (config.go): whole numbers as numbers, everything else as the
// file would write it.
func configView(c fsm.Config) map[string]any {
	sc := defaultServerConfig()
	sc.Node.Seed = c
	m := map[string]any{}
	for _, s := range sc.settings() {
		k, ok := strings.CutPrefix(s.key, "scheduler.")
		if !ok {
			continue
		}
		if n, ok := s.val.(interface{ number() any }); ok {
			m[k] = n.number()
		} else {
			m[k] = s.val.String()
		}
	}
	return m
}

// applySettings lays KEY=VALUE settings (the config file's [scheduler]
// keys, weights.TIER for weights) over c, naming a bad key. Values are
// read and checked by the same settings as the file's.
func applySettings(c fsm.Config, settings []string) (fsm.Config, error) {
	sc := defaultServerConfig()
	sc.Node.Seed = c
	byKey := map[string]setting{}
	for _, s := range sc.settings() {
		if k, ok := strings.CutPrefix(s.key, "scheduler."); ok {
			byKey[k] = s
		}
	}
	for _, kv := range settings {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return c, usageError("%q: want KEY=VALUE", kv)
		}
		s, ok := byKey[k]
		if !ok {
			return c, usageError("unknown key %s", k)
		}
		if err := s.val.Set(v); err != nil {
			return c, usageError("%v", named(k, err))
		}
	}
	if err := sc.Node.Seed.Validate(); err != nil {
		return c, usageError("%v", err)
	}
	return sc.Node.Seed, nil
}

func init() {
	register("config get", typed(&spec[clientFlags]{
		synopsis: "Show the replicated scheduler configuration",
		usage:    "[--json]",
		run: func(env *cmdEnv, opts *clientFlags, args []string) error {
			pc, err := ask(opts.call, pb.NewAdminClient, pb.AdminClient.GetConfig, &pb.GetConfigRequest{})
			if err != nil {
				return err
			}
			c, err := fsm.StoredConfigFromPB(pc)
			if err != nil {
				return err
			}
			return printConfig(env, c, pc.FeatureLevel, opts.json)
		},
	}))
	register("config set", typed(&spec[clientFlags]{
		synopsis: "Change the replicated scheduler configuration",
		usage:    "KEY=VALUE...",
		help: `Reads the configuration in force, changes the given keys, and proposes the
result through the leader; it applies on every node at the same log index.
Keys are those of the config file's [scheduler] section (see
docs/configuration.md), with weights.TIER for a tier weight:

  barista config set lease_timeout=45s self_kill_after=35s
  barista config set policy=reserve:500ms weights.gold=10
  barista config set decay=half_life:168h,norm:10000s
  barista config set estimate=auto default_cost=2m
  barista config set retry_backoff=10s retry_backoff_max=30m

feature_level, shown by config get, is not a setting: the leader raises it
once every voter runs a build that understands it.`,
		run: func(env *cmdEnv, opts *clientFlags, args []string) error {
			if len(args) == 0 {
				return usageError("config set needs KEY=VALUE settings")
			}
			var c fsm.Config
			var level uint32
			err := opts.call(func(ctx context.Context, cc grpc.ClientConnInterface) error {
				admin := pb.NewAdminClient(cc)
				cur, err := admin.GetConfig(ctx, &pb.GetConfigRequest{})
				if err != nil {
					return err
				}
				base, err := fsm.StoredConfigFromPB(cur)
				if err != nil {
					return err
				}
				next, err := applySettings(base, args)
				if err != nil {
					return err
				}
				out, err := admin.SetConfig(ctx, &pb.SetConfigRequest{Config: fsm.ConfigToPB(next)})
				if err != nil {
					return err
				}
				c, err = fsm.StoredConfigFromPB(out)
				level = out.FeatureLevel
				return err
			})
			if err != nil {
				return err
			}
			return printConfig(env, c, level, opts.json)
		},
	}))
}

// printConfig prints the configuration and the cluster's feature level
// (read only: the leader raises it; docs/operations.md "Upgrades").
func printConfig(env *cmdEnv, c fsm.Config, level uint32, asJSON bool) error {
	m := configView(c)
	m["feature_level"] = level
	if asJSON {
		return printJSON(env.stdout, m)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rows := make([][2]string, len(keys))
	for i, k := range keys {
		rows[i] = [2]string{k, fmt.Sprint(m[k])}
	}
	printTable(env.stdout, rows)
	return nil
}
