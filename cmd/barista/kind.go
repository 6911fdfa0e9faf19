package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
)

const kindHelp = `A kind is a job type that function workers register (SPEC §3 "Kinds"):
a function job of kind K goes only to a worker that registered K, a
command job only to a worker that runs commands. A retry policy of a kind
gives the tenant's jobs of that kind (with TENANT "*", an admin's, every
tenant's) the max_attempts, retry backoff, retry backoff max and timeout
their submit does not set: the submit's own values win, then the tenant's
policy, then every tenant's, then the cluster's. A policy is fixed on a
job at its submit: changing it moves no job already submitted. It needs
cluster feature level 8.`

type kindSetOpts struct {
	clientFlags
	fs                  *flag.FlagSet
	maxAttempts         uint
	backoff, backoffMax time.Duration
	timeout             time.Duration
	remove              bool
}

func kindPolicyJSON(p *pb.KindPolicy) map[string]any {
	m := map[string]any{"tenant": p.Tenant, "kind": p.Kind, "max_attempts": p.MaxAttempts, "retry_backoff_max_ms": p.RetryBackoffMaxMs, "timeout_ms": p.TimeoutMs}
	if p.RetryBackoffMs != nil {
		m["retry_backoff_ms"] = *p.RetryBackoffMs
	}
	return m
}

// policyValue shows a value of a policy: "-" when it sets none.
func policyValue(ms int64, set bool) string {
	if !set {
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

func init() {
	register("kind set", typed(&spec[kindSetOpts]{
		synopsis: "Set (or --remove) the retry policy of a kind for a tenant, or every tenant (\"*\")",
		usage:    "TENANT|* KIND [--max-attempts N] [--retry-backoff DUR] [--retry-backoff-max DUR] [--timeout DUR] [--remove] [--json]",
		help: kindHelp + `

TENANT may be "-" for a client token's own tenant. Give at least one of
--max-attempts, --retry-backoff (0: a failed run is retried at once),
--retry-backoff-max and --timeout; the others are left unset by the
policy. --remove deletes the policy.`,
		flags: func(fs *flag.FlagSet, o *kindSetOpts) {
			*o = kindSetOpts{fs: fs}
			o.clientFlags.register(fs)
			fs.UintVar(&o.maxAttempts, "max-attempts", 0, "attempts `N` of a job of the kind (1..1000)")
			fs.DurationVar(&o.backoff, "retry-backoff", 0, "retry backoff `DUR` after a failed run (doubling, 0 = at once)")
			fs.DurationVar(&o.backoffMax, "retry-backoff-max", 0, "the longest retry backoff `DUR`")
			fs.DurationVar(&o.timeout, "timeout", 0, "a run's timeout `DUR`")
			fs.BoolVar(&o.remove, "remove", false, "remove the policy")
		},
		run: func(env *cmdEnv, opts *kindSetOpts, args []string) error {
			if len(args) != 2 {
				return usageError("kind set needs TENANT (or * for every tenant, - for the token's own) and KIND")
			}
			set := map[string]bool{}
			opts.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
			if !opts.remove && !set["max-attempts"] && !set["retry-backoff"] && !set["retry-backoff-max"] && !set["timeout"] {
				return usageError("give --max-attempts, --retry-backoff, --retry-backoff-max or --timeout (or --remove)")
			}
			tenant := args[0]
			if tenant == "-" {
				tenant = ""
			}
			req := &pb.SetKindPolicyRequest{Tenant: tenant, Kind: args[1], MaxAttempts: uint32(min(opts.maxAttempts, 1<<31)), Remove: opts.remove,
				RetryBackoffMaxMs: opts.backoffMax.Milliseconds(), TimeoutMs: opts.timeout.Milliseconds()}
			if set["retry-backoff"] {
				req.RetryBackoffMs = new(opts.backoff.Milliseconds())
			}
			p, err := withCall(opts.with, (*client.Client).SetKindPolicy, req)
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(env.stdout, kindPolicyJSON(p))
			}
			if opts.remove {
				fmt.Fprintf(env.stdout, "retry policy of kind %q for %s removed\n", p.Kind, p.Tenant)
				return nil
			}
			printKindPolicies(env, []*pb.KindPolicy{p})
			return nil
		},
	}))
	register("kind list", typed(&spec[tenantFlags]{
		synopsis: "List a tenant's retry policies of kinds and every tenant's",
		usage:    "[--tenant NAME|*] [--json]",
		help:     kindHelp + "\n\nWith --tenant \"*\" (an admin token) lists only the policies of every tenant. With --json prints one object per policy.",
		run: func(env *cmdEnv, opts *tenantFlags, args []string) error {
			if len(args) > 0 {
				return usageError("unexpected argument %q", args[0])
			}
			resp, err := withCall(opts.with, (*client.Client).KindPolicies, &pb.ListKindPoliciesRequest{Tenant: opts.tenant})
			if err != nil {
				return err
			}
			if opts.json {
				for _, p := range resp.Policies {
					if err := printJSON(env.stdout, kindPolicyJSON(p)); err != nil {
						return err
					}
				}
				return nil
			}
			printKindPolicies(env, resp.Policies)
			return nil
		},
	}))
}

func printKindPolicies(env *cmdEnv, ps []*pb.KindPolicy) {
	fmt.Fprintf(env.stdout, "%-24s %-32s %-12s %-13s %-17s %s\n", "TENANT", "KIND", "MAX_ATTEMPTS", "RETRY_BACKOFF", "RETRY_BACKOFF_MAX", "TIMEOUT")
	for _, p := range ps {
		attempts := "-"
		if p.MaxAttempts != 0 {
			attempts = fmt.Sprint(p.MaxAttempts)
		}
		fmt.Fprintf(env.stdout, "%-24s %-32s %-12s %-13s %-17s %s\n", p.Tenant, p.Kind, attempts, policyValue(p.GetRetryBackoffMs(), p.RetryBackoffMs != nil),
			policyValue(p.RetryBackoffMaxMs, p.RetryBackoffMaxMs != 0), policyValue(p.TimeoutMs, p.TimeoutMs != 0))
	}
}
