package scenario

// Handlers of the commands that set the scene: at, config, tenant, pause
// and resume, group, pool and subscription.

import (
	"fmt"
	"strings"
	"time"

	"github.com/baristahq/barista/sfq"
)

func (rn *runner) at(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: at DURATION")
	}
	t, err := scriptTime(args[0])
	if err != nil {
		return err
	}
	if t < rn.now {
		return fmt.Errorf("time goes backwards: %s is before %s", args[0], time.Duration(rn.now)*time.Millisecond)
	}
	rn.now = t
	return nil
}

// configKeys sets each key of the config command.
var configKeys = map[string]func(cfg *sfq.Config, k, v string) error{
	"policy":            func(cfg *sfq.Config, _, v string) (err error) { cfg.Policy, err = sfq.ParsePolicy(v); return },
	"decay":             func(cfg *sfq.Config, _, v string) (err error) { cfg.Decay, err = sfq.ParseDecay(v); return },
	"clamp":             func(cfg *sfq.Config, _, v string) (err error) { cfg.Clamp, err = sfq.ParseClamp(v); return },
	"ack_timeout":       func(cfg *sfq.Config, k, v string) (err error) { cfg.AckTimeoutMs, err = durationMs(k, v); return },
	"lease_timeout":     func(cfg *sfq.Config, k, v string) (err error) { cfg.LeaseTimeoutMs, err = durationMs(k, v); return },
	"max_attempts":      func(cfg *sfq.Config, k, v string) (err error) { cfg.DefaultMaxAttempts, err = count(k, v); return },
	"estimate":          func(cfg *sfq.Config, _, v string) (err error) { cfg.Estimate, err = sfq.ParseEstimateMode(v); return },
	"default_cost":      func(cfg *sfq.Config, k, v string) (err error) { cfg.DefaultCostMs, err = durationMs(k, v); return },
	"retry_backoff":     func(cfg *sfq.Config, k, v string) (err error) { cfg.RetryBackoffMs, err = durationMs(k, v); return },
	"retry_backoff_max": func(cfg *sfq.Config, k, v string) (err error) { cfg.RetryBackoffMaxMs, err = durationMs(k, v); return },
	"max_snoozes": func(cfg *sfq.Config, k, v string) error {
		n, err := count(k, v)
		if err == nil && n > sfq.MaxMaxSnoozes {
			return fmt.Errorf("max_snoozes: %d (want 1..%d)", n, sfq.MaxMaxSnoozes)
		}
		cfg.MaxSnoozes = uint16(n)
		return err
	},
	"resource_reserve_after": func(cfg *sfq.Config, k, v string) (err error) {
		cfg.ResourceReserveAfterMs, err = durationMs(k, v)
		return
	},
	"max_resources": func(cfg *sfq.Config, k, v string) (err error) { cfg.MaxResources, err = count(k, v); return },
	"weights": func(cfg *sfq.Config, k, v string) (err error) {
		parts := strings.Split(v, ",")
		if len(parts) != sfq.NumTiers {
			return fmt.Errorf("weights wants %d comma-separated numbers, got %q", sfq.NumTiers, v)
		}
		for i, p := range parts {
			if cfg.TierWeights[i], err = count(k, p); err != nil {
				return err
			}
		}
		return nil
	},
}

func (rn *runner) config(pos []string, opts options) error {
	if len(pos) > 0 {
		return fmt.Errorf("config takes key=value pairs, not %q", pos[0])
	}
	cfg := rn.t.Config()
	var rest options
	for _, o := range opts {
		switch o.k {
		case "max_pools", "implicit_tenants", "default_tenant", "clock_tick", "event_retention_per_tenant", "max_worker_records":
			// Settings of the state machine: each its own SetConfig.
			if err := rn.t.SetPoolSetting(rn.now, o.k, o.v); err != nil {
				return err
			}
		default:
			rest = append(rest, o)
		}
	}
	if len(rest) == 0 && len(opts) > 0 {
		return nil
	}
	for _, o := range rest {
		set, ok := configKeys[o.k]
		if !ok {
			return fmt.Errorf("unknown config key %q", o.k)
		}
		if err := set(&cfg, o.k, o.v); err != nil {
			return err
		}
	}
	return rn.t.SetConfig(rn.now, cfg)
}

func (rn *runner) tenant(pos []string, opts options) error {
	if len(pos) != 1 {
		return fmt.Errorf("usage: tenant NAME tier=T [multiplier=N cap=N cap_sm=N cap_md=N cap_lg=N inflight_cpu=DUR max_queued=N " +
			"max_class=C cap_critical=N cap_high=N deadlines=on|off deadline_cap=N group_cap=N|none group_order=fifo|fair max_groups=N " +
			"rate=N/DUR|none burst=N]")
	}
	spec, exists := rn.t.Tenant(pos[0])
	spec.Name = pos[0]
	if !opts.has("tier") && !exists {
		return fmt.Errorf("new tenant %q needs tier=", pos[0])
	}
	var err error
	for _, o := range opts {
		k, v := o.k, o.v
		switch k {
		case "tier":
			if spec.Tier, err = sfq.ParseTier(v); err != nil {
				return err
			}
		case "multiplier":
			spec.Multiplier, err = count(k, v)
		case "cap":
			spec.Caps.MaxRunning, err = count(k, v)
		case "cap_sm":
			spec.Caps.MaxRunningSize[sfq.SM], err = count(k, v)
		case "cap_md":
			spec.Caps.MaxRunningSize[sfq.MD], err = count(k, v)
		case "cap_lg":
			spec.Caps.MaxRunningSize[sfq.LG], err = count(k, v)
		case "inflight_cpu":
			spec.Caps.MaxInflightCPUMs, err = durationMs(k, v)
		case "max_queued":
			spec.Caps.MaxQueued, err = count(k, v)
		case "max_class":
			spec.MaxClass, err = sfq.ParseClass(v)
		case "cap_critical":
			spec.Caps.MaxRunningCritical, err = count(k, v)
		case "cap_high":
			spec.Caps.MaxRunningHigh, err = count(k, v)
		case "deadline_cap":
			spec.Caps.MaxRunningDeadline, err = count(k, v)
		case "deadlines":
			switch v {
			case "on":
				spec.AllowDeadlines = true
			case "off":
				spec.AllowDeadlines = false
			default:
				err = fmt.Errorf("bad deadlines %q: want on or off", v)
			}
		case "group_cap":
			if v == "none" {
				spec.GroupCap = 0
			} else if spec.GroupCap, err = count(k, v); err == nil && spec.GroupCap == 0 {
				err = fmt.Errorf("bad group_cap %q: want none or 1..%d", v, sfq.MaxGroupCap)
			}
		case "group_order":
			spec.GroupOrder, err = sfq.ParseGroupOrder(v)
		case "max_groups":
			if spec.MaxGroups, err = count(k, v); err == nil && spec.MaxGroups == 0 {
				err = fmt.Errorf("bad max_groups %q: want 1..%d", v, sfq.MaxMaxGroups)
			}
		case "rate", "burst":
			// read below, together
		default:
			return fmt.Errorf("unknown tenant key %q", k)
		}
		if err != nil {
			return err
		}
	}
	if spec.Rate, err = rateOpts(opts, spec.Rate); err != nil {
		return err
	}
	return rn.t.UpsertTenant(rn.now, spec)
}

// pause reads "pause TENANT [group=G]", "pause all" and the same for
// resume.
func (rn *runner) pause(cmd string, pos []string, opts options) error {
	if len(pos) == 2 && pos[0] == "pool" && len(opts) == 0 {
		return rn.t.PausePool(rn.now, pos[1], cmd == "resume")
	}
	group, hasGroup := opts.get("group")
	if len(pos) != 1 || len(opts) > 1 || (len(opts) == 1 && !hasGroup) || (pos[0] == "all" && hasGroup) {
		return fmt.Errorf("usage: %s TENANT [group=G] | %s all | %s pool NAME", cmd, cmd, cmd)
	}
	all := pos[0] == "all"
	tenant := pos[0]
	if all {
		tenant = ""
	}
	return rn.t.Pause(rn.now, tenant, group, all, cmd == "resume")
}

// group sets a group's cap: "group TENANT GROUP cap=N|none|inherit" sets
// the admin's, "group TENANT GROUP tenant_cap=N|none" the tenant's own.
func (rn *runner) group(pos []string, opts options) error {
	usage := fmt.Errorf("usage: group TENANT GROUP cap=N|none|inherit | tenant_cap=N|none [rate=N/DUR|none] [burst=N]")
	if len(pos) != 2 || len(opts) == 0 {
		return usage
	}
	if opts.has("rate") || opts.has("burst") {
		old, _ := rn.t.Group(pos[0], pos[1])
		r, err := rateOpts(opts, old.Rate)
		if err != nil {
			return err
		}
		if err := rn.t.SetGroupRate(rn.now, pos[0], pos[1], r); err != nil {
			return err
		}
		var rest options
		for _, o := range opts {
			if o.k != "rate" && o.k != "burst" {
				rest = append(rest, o)
			}
		}
		opts = rest
		if len(opts) == 0 {
			return nil
		}
	}
	if len(opts) != 1 {
		return usage
	}
	o := opts[0]
	switch o.k {
	case "cap":
		cp, err := sfq.ParseGroupCap(o.v)
		if err != nil {
			return err
		}
		return rn.t.SetGroup(rn.now, pos[0], pos[1], cp, 0, false)
	case "tenant_cap":
		var n uint32
		if o.v != "none" {
			var err error
			if n, err = count(o.k, o.v); err != nil || n == 0 {
				return fmt.Errorf("bad tenant_cap %q: want none or 1..%d", o.v, sfq.MaxGroupCap)
			}
		}
		return rn.t.SetGroup(rn.now, pos[0], pos[1], 0, n, true)
	}
	return fmt.Errorf("unknown group key %q (want cap or tenant_cap)", o.k)
}

// pool reads "pool NAME [weights=default|equal|T:W,...]
// [subscriptions=optional|required]" and "pool delete NAME".
func (rn *runner) pool(pos []string, opts options) error {
	usage := fmt.Errorf("usage: pool NAME [weights=default|equal|TENANT:W,...] [subscriptions=optional|required] | pool delete NAME")
	if len(pos) == 2 && pos[0] == "delete" && len(opts) == 0 {
		return rn.t.DeletePool(rn.now, pos[1])
	}
	if len(pos) != 1 {
		return usage
	}
	var weights *string
	var required *bool
	for _, o := range opts {
		switch o.k {
		case "weights":
			w := o.v
			weights = &w
		case "subscriptions":
			var r bool
			switch o.v {
			case "required":
				r = true
			case "optional":
			default:
				return fmt.Errorf("bad subscriptions %q: want optional or required", o.v)
			}
			required = &r
		default:
			return fmt.Errorf("unknown pool key %q", o.k)
		}
	}
	return rn.t.SetPool(rn.now, pos[0], weights, required)
}

// subscription reads "subscription TENANT POOL burst=N|none".
func (rn *runner) subscription(pos []string, opts options) error {
	b, ok := opts.get("burst")
	if len(pos) != 2 || len(opts) != 1 || !ok {
		return fmt.Errorf("usage: subscription TENANT POOL burst=N|none")
	}
	var burst *uint32
	if b != "none" {
		n, err := count("burst", b)
		if err != nil {
			return err
		}
		burst = &n
	}
	return rn.t.SetSubscription(rn.now, pos[0], pos[1], burst)
}
