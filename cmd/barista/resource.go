package main

import (
	"flag"
	"fmt"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// Resources (docs/resources.md; feature level 8).

const resourceHelp = `A resource is a limit shared across tenants: one third-party API's
concurrent calls, a licence server's seats, a database's connections. An
admin declares it with a capacity (0..1000000 units) and, optionally,
every tenant's limit on it (tenant_max) and a tenant's own limit; a job
uses up to 8 resources (barista submit --uses NAME:UNITS) and holds
their units from its dispatch until its run ends. A job whose resource
has no room waits (explain: resource name= held= capacity=) without
holding back the jobs behind it; freed units go by the fair order; a
job blocked longer than resource_reserve_after (default 60s) may take
the resource's reservation, so that big requests are not starved.
Resources need cluster feature level 8 (docs/resources.md).`

type resourceSetOpts struct {
	clientFlags
	fs        *flag.FlagSet
	capacity  uint
	tenantMax string
	tenant    string
	max       string
}

type resourceReadOpts struct {
	clientFlags
	stale bool
}

func resourceJSON(r *pb.Resource) map[string]any {
	tenants := []map[string]any{}
	for _, t := range r.Tenants {
		tenants = append(tenants, map[string]any{"tenant": t.Tenant, "max": t.Max, "held": t.Held})
	}
	m := map[string]any{"name": r.Name, "capacity": r.Capacity, "tenant_max": nil, "held": r.Held, "users": r.Users, "queued": r.Queued,
		"blocked": r.Blocked, "reserved_job_id": r.ReservedJobId, "tenants": tenants}
	if r.TenantMax != nil {
		m["tenant_max"] = *r.TenantMax
	}
	return m
}

func tenantMaxText(m *uint32) string {
	if m == nil {
		return "none"
	}
	return fmt.Sprint(*m)
}

func printResource(env *cmdEnv, r *pb.Resource, asJSON bool) error {
	if asJSON {
		return printJSON(env.stdout, resourceJSON(r))
	}
	reserved := "none"
	if r.ReservedJobId != 0 {
		reserved = fmt.Sprintf("job %d", r.ReservedJobId)
	}
	rows := [][2]string{{"name", r.Name}, {"capacity", fmt.Sprint(r.Capacity)}, {"tenant_max", tenantMaxText(r.TenantMax)},
		{"held", fmt.Sprint(r.Held)}, {"users", fmt.Sprint(r.Users)}, {"queued", fmt.Sprint(r.Queued)}, {"blocked", fmt.Sprint(r.Blocked)}, {"reserved", reserved}}
	for _, t := range r.Tenants {
		rows = append(rows, [2]string{"tenant " + t.Tenant, fmt.Sprintf("max %d, held %d", t.Max, t.Held)})
	}
	printTable(env.stdout, rows)
	return nil
}

// resourceName checks the one NAME argument of a resource command.
func resourceName(verb string, args []string) (string, error) {
	if len(args) != 1 {
		return "", usageError("resource %s needs one NAME", verb)
	}
	if err := sfq.ValidateResourceName(args[0]); err != nil {
		return "", usageError("NAME: %v", err)
	}
	return args[0], nil
}

func init() {
	register("resource set", typed(&spec[resourceSetOpts]{
		synopsis: "Declare a resource or change one: its capacity and tenant_max, or a tenant's own limit (admin)",
		usage:    "NAME --capacity N [--tenant-max M|none] [--json]\n  or: NAME --tenant TENANT --max M|none [--json]",
		help: resourceHelp + `

NAME is 1..63 of a-z, 0-9 and -, not starting with -. --capacity is
required to declare or change the resource; --tenant-max is every
tenant's limit on the units it holds (none: no limit, the default). A
change takes effect in log order; a decrease below the units held
preempts nothing (running jobs keep their units). At most the cluster's
max_resources resources (default 256).

With --tenant, sets that tenant's own limit on the resource instead
(--max M, or none to fall back to the resource's tenant_max).`,
		flags: func(fs *flag.FlagSet, o *resourceSetOpts) {
			*o = resourceSetOpts{fs: fs}
			o.register(fs)
			fs.UintVar(&o.capacity, "capacity", 0, "the resource's `N` units (0..1000000)")
			fs.StringVar(&o.tenantMax, "tenant-max", "none", "every tenant's limit, `M` units or none")
			fs.StringVar(&o.tenant, "tenant", "", "set this `TENANT`'s own limit instead")
			fs.StringVar(&o.max, "max", "", "with --tenant: its limit, `M` units or none")
		},
		run: runResourceSet,
	}))
	register("resource get", typed(&spec[resourceReadOpts]{
		synopsis: "Show a resource: its capacity, units held, users, reservation and tenants' limits (admin)",
		usage:    "NAME [--stale] [--json]",
		help: resourceHelp + `

Shows the capacity, tenant_max, the units live jobs hold, the unfinished
jobs that use it (users) and of them the queued, the job whose
reservation stands (if any), and each tenant's own limit with the units
it holds. --json prints {"name", "capacity", "tenant_max" (null: none),
"held", "users", "queued", "reserved_job_id", "tenants": [{"tenant",
"max", "held"}]}.`,
		flags: func(fs *flag.FlagSet, o *resourceReadOpts) {
			o.register(fs)
			fs.BoolVar(&o.stale, "stale", false, "read this node's state without asking the leader (faster, maybe behind)")
		},
		run: func(env *cmdEnv, opts *resourceReadOpts, args []string) error {
			name, err := resourceName("get", args)
			if err != nil {
				return err
			}
			r, err := withCall(opts.with, raw(client.Raw.ResourceGet), &pb.ResourceGetRequest{Name: name, Read: &pb.ReadOptions{Stale: opts.stale}})
			if err != nil {
				return err
			}
			return printResource(env, r, opts.json)
		},
	}))
	register("resource list", typed(&spec[resourceReadOpts]{
		synopsis: "List the resources (admin)",
		usage:    "[--stale] [--json]",
		help:     resourceHelp + "\n\nWith --json prints one object per resource, as resource get.",
		flags: func(fs *flag.FlagSet, o *resourceReadOpts) {
			o.register(fs)
			fs.BoolVar(&o.stale, "stale", false, "read this node's state without asking the leader (faster, maybe behind)")
		},
		run: func(env *cmdEnv, opts *resourceReadOpts, args []string) error {
			if len(args) != 0 {
				return usageError("unexpected argument %q", args[0])
			}
			resp, err := withCall(opts.with, raw(client.Raw.ResourceList), &pb.ResourceListRequest{Read: &pb.ReadOptions{Stale: opts.stale}})
			if err != nil {
				return err
			}
			if opts.json {
				for _, r := range resp.Resources {
					if err := printJSON(env.stdout, resourceJSON(r)); err != nil {
						return err
					}
				}
				return nil
			}
			fmt.Fprintf(env.stdout, "%-24s %8s %10s %8s %7s %7s %7s %9s\n", "NAME", "CAPACITY", "TENANT_MAX", "HELD", "USERS", "QUEUED", "BLOCKED", "RESERVED")
			for _, r := range resp.Resources {
				fmt.Fprintf(env.stdout, "%-24s %8d %10s %8d %7d %7d %7d %9d\n", r.Name, r.Capacity, tenantMaxText(r.TenantMax), r.Held, r.Users, r.Queued, r.Blocked, r.ReservedJobId)
			}
			return nil
		},
	}))
	register("resource delete", typed(&spec[clientFlags]{
		synopsis: "Delete a resource no unfinished job uses (admin)",
		usage:    "NAME",
		help: resourceHelp + `

A resource is deleted only while no scheduled, queued or running job
uses it (FAILED_PRECONDITION says how many do).`,
		run: func(env *cmdEnv, opts *clientFlags, args []string) error {
			name, err := resourceName("delete", args)
			if err != nil {
				return err
			}
			if _, err := withCall(opts.with, raw(client.Raw.ResourceDelete), &pb.ResourceDeleteRequest{Name: name}); err != nil {
				return err
			}
			if opts.json {
				return printJSON(env.stdout, map[string]any{"name": name, "deleted": true})
			}
			fmt.Fprintf(env.stdout, "resource %s deleted\n", name)
			return nil
		},
	}))
}

func runResourceSet(env *cmdEnv, opts *resourceSetOpts, args []string) error {
	name, err := resourceName("set", args)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	opts.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	req := &pb.ResourceSetRequest{Name: name}
	limit := func(flagName, v string) (*uint32, error) {
		m, err := sfq.ParseTenantMax(v)
		if err != nil {
			return nil, usageError("--%s: %v", flagName, err)
		}
		if m == sfq.NoTenantMax {
			return nil, nil
		}
		return &m, nil
	}
	if opts.tenant != "" {
		if set["capacity"] || set["tenant-max"] {
			return usageError("--tenant sets the tenant's own limit (--max): give --capacity and --tenant-max without it")
		}
		if !set["max"] {
			return usageError("--tenant needs --max M|none")
		}
		req.Tenant = opts.tenant
		if req.Max, err = limit("max", opts.max); err != nil {
			return err
		}
	} else {
		if set["max"] {
			return usageError("--max is a tenant's own limit: give --tenant with it")
		}
		if !set["capacity"] {
			return usageError("resource set needs --capacity N")
		}
		if opts.capacity > sfq.MaxResourceCapacity {
			return usageError("--capacity: %d, at most %d", opts.capacity, sfq.MaxResourceCapacity)
		}
		req.Capacity = new(uint32(opts.capacity))
		if req.TenantMax, err = limit("tenant-max", opts.tenantMax); err != nil {
			return err
		}
	}
	r, err := withCall(opts.with, raw(client.Raw.ResourceSet), req)
	if err != nil {
		return err
	}
	if !opts.json && r.Created {
		fmt.Fprintf(env.stdout, "resource %s created\n", r.Name)
	}
	return printResource(env, r, opts.json)
}
