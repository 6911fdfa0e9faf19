package web

import (
	"strconv"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
)

// TopJSON is the JSON form of the live view (barista top --once --json).
type TopJSON struct {
	LeaderID     string `json:"leader_id"`
	AppliedIndex uint64 `json:"applied_index"`
	WindowMs     int64  `json:"window_ms"`
	// FairnessSinceMs is the cluster time this node's fairness report
	// starts at (its start or its last snapshot load).
	FairnessSinceMs int64           `json:"fairness_since_ms"`
	Tenants         []TenantTopJSON `json:"tenants"`
	// Pools are every pool with its jobs and connected workers, by name.
	Pools []PoolTopJSON `json:"pools"`
	// FairnessErrors are the pools' live fairness errors (10-minute
	// window), by pool name.
	FairnessErrors []FairnessErrorJSON `json:"fairness_errors"`
	// Resources are every declared resource, by name (an admin's: empty
	// for a client token).
	Resources []ResourceTopJSON `json:"resources"`
}

// ResourceTopJSON is one resource in the live view: its capacity and
// tenant_max (null: none), the units live jobs hold, its unfinished jobs
// (users) and of them the queued and the blocked (held back by it now),
// and the job holding its reservation (0: none).
type ResourceTopJSON struct {
	Name      string  `json:"name"`
	Capacity  uint32  `json:"capacity"`
	TenantMax *uint32 `json:"tenant_max"`
	Held      uint64  `json:"held"`
	Users     uint64  `json:"users"`
	Queued    uint64  `json:"queued"`
	Blocked   uint64  `json:"blocked"`
	Reserved  uint64  `json:"reserved_job_id"`
}

// TenantResourceJSON is what a tenant holds of a resource, and its limit
// in force there (null: none).
type TenantResourceJSON struct {
	Resource string  `json:"resource"`
	Held     uint32  `json:"held"`
	Max      *uint32 `json:"max"`
}

// FairnessErrorJSON is a pool's live fairness error: error, and the
// tenant and class of the row it is in, are null while undefined.
type FairnessErrorJSON struct {
	Pool     string   `json:"pool"`
	Window   string   `json:"window"`
	Error    *float64 `json:"error"`
	Tenant   string   `json:"tenant,omitempty"`
	Class    string   `json:"class,omitempty"`
	Share    *float64 `json:"share"`
	Entitled *float64 `json:"entitled"`
}

// PoolTopJSON is one pool in the live view.
type PoolTopJSON struct {
	Name          string `json:"name"`
	Weights       string `json:"weights"`
	Subscriptions string `json:"subscriptions"` // optional or required
	Paused        bool   `json:"paused"`
	Scheduled     uint64 `json:"scheduled"`
	Queued        uint64 `json:"queued"`
	Running       uint64 `json:"running"`
	// Workers are its connected workers, as the leader counts them (0
	// from a stale read of a follower).
	Workers uint32 `json:"workers"`
}

// TenantTopJSON is one tenant's line in one class of one pool.
type TenantTopJSON struct {
	Name             string  `json:"name"`
	Pool             string  `json:"pool"`
	Tier             string  `json:"tier"`
	Class            string  `json:"class"`
	Weight           float64 `json:"weight"`
	Queued           uint32  `json:"queued"`
	Running          uint32  `json:"running"`
	Dispatches1m     uint64  `json:"dispatches_1m"`
	DispatchedCost1m int64   `json:"dispatched_cost_ms_1m"`
	Share            float64 `json:"share"`
	EntitledShare    float64 `json:"entitled_share"`
	// Ratio is the 1 min window's (null when undefined).
	Ratio    *float64 `json:"ratio"`
	Eligible bool     `json:"eligible"`
	// LagCPUSeconds is null while the tenant has no eligible work in the
	// class (the activation clamp will discard it).
	LagCPUSeconds *float64         `json:"lag_cpu_s"`
	Fairness      []FairWindowJSON `json:"fairness"`
	// Groups are the tenant's groups with the most queued jobs, on its
	// first line, when it has named groups.
	Groups []GroupUsageJSON `json:"groups,omitempty"`
	// Paused ("tenant" or "admin": who paused it) and Rate (its rate
	// limit) are left out when the tenant has none.
	Paused string `json:"paused,omitempty"`
	Rate   string `json:"rate,omitempty"`
	// Resources is what the tenant holds of each resource it holds units
	// of or has its own limit on, on its first line.
	Resources []TenantResourceJSON `json:"resources,omitempty"`
}

// FairWindowJSON is one window of the fairness report; share, entitled
// and ratio are null when undefined.
type FairWindowJSON struct {
	Window         string   `json:"window"`
	SpanMs         int64    `json:"span_ms"`
	ChargedMs      int64    `json:"charged_ms"`
	ClassChargedMs int64    `json:"class_charged_ms"`
	BusyMs         int64    `json:"busy_ms"`
	Share          *float64 `json:"share"`
	Entitled       *float64 `json:"entitled"`
	Ratio          *float64 `json:"ratio"`
}

// GroupUsageJSON is one group's jobs.
type GroupUsageJSON struct {
	Name    string `json:"name"`
	Running uint32 `json:"running"`
	Queued  uint32 `json:"queued"`
	Limit   uint32 `json:"limit,omitempty"`
}

// GroupUsageToJSON converts group usage rows.
func GroupUsageToJSON(gs []*pb.GroupUsage) []GroupUsageJSON {
	var out []GroupUsageJSON
	for _, g := range gs {
		out = append(out, GroupUsageJSON{Name: g.Name, Running: g.Running, Queued: g.Queued, Limit: g.Limit})
	}
	return out
}

func topJSON(t *pb.TopResponse) TopJSON {
	out := TopJSON{LeaderID: t.LeaderId, AppliedIndex: t.AppliedIndex, WindowMs: t.WindowMs, FairnessSinceMs: t.FairnessSinceMs, Tenants: []TenantTopJSON{},
		Pools: []PoolTopJSON{}, Resources: []ResourceTopJSON{}}
	for _, r := range t.Resources {
		out.Resources = append(out.Resources, ResourceTopJSON{Name: r.Name, Capacity: r.Capacity, TenantMax: r.TenantMax, Held: r.Held, Users: r.Users,
			Queued: r.Queued, Blocked: r.Blocked, Reserved: r.ReservedJobId})
	}
	for _, p := range t.Pools {
		subs := "optional"
		if p.SubscriptionsRequired {
			subs = "required"
		}
		out.Pools = append(out.Pools, PoolTopJSON{Name: p.Name, Weights: p.Weights, Subscriptions: subs, Paused: p.Paused,
			Scheduled: p.Scheduled, Queued: p.Queued, Running: p.Running, Workers: p.Workers})
	}
	out.FairnessErrors = []FairnessErrorJSON{}
	for _, e := range t.FairnessErrors {
		fe := FairnessErrorJSON{Pool: e.Pool, Window: e.Window}
		if e.Defined {
			v := e.Error
			fe.Error = &v
		}
		if e.Defined && e.Tenant != "" { // a client token sees the row only when it is its own
			sh, en := e.Share, e.Entitled
			class, _ := fsm.ClassFromPB(e.Class)
			fe.Tenant, fe.Class, fe.Share, fe.Entitled = e.Tenant, class.String(), &sh, &en
		}
		out.FairnessErrors = append(out.FairnessErrors, fe)
	}
	for _, r := range t.Tenants {
		tier, _ := fsm.TierFromPB(r.Tier)
		class, _ := fsm.ClassFromPB(r.JobClass)
		row := TenantTopJSON{Name: r.Name, Pool: r.Pool, Tier: tier.String(), Class: class.String(), Weight: r.Weight, Queued: r.Queued,
			Running: r.Running, Dispatches1m: r.Dispatches, DispatchedCost1m: r.DispatchedCostMs, Share: r.Share, EntitledShare: r.EntitledShare,
			Eligible: r.Eligible, Fairness: []FairWindowJSON{}, Groups: GroupUsageToJSON(r.Groups), Paused: r.Paused, Rate: r.Rate}
		for _, u := range r.Resources {
			row.Resources = append(row.Resources, TenantResourceJSON{Resource: u.Resource, Held: u.Held, Max: u.Max})
		}
		if r.Eligible {
			lag := float64(r.LagCpuMs) / 1000
			row.LagCPUSeconds = &lag
		}
		for i, w := range r.Windows {
			row.Fairness = append(row.Fairness, FairWindowJSON{Window: w.Window, SpanMs: w.SpanMs, ChargedMs: w.ChargedMs,
				ClassChargedMs: w.ClassChargedMs, BusyMs: w.BusyMs, Share: w.Share, Entitled: w.Entitled, Ratio: w.Ratio})
			if i == 0 {
				row.Ratio = w.Ratio
			}
		}
		out.Tenants = append(out.Tenants, row)
	}
	return out
}

// LimitText is a limit, or "-" for none.
func LimitText(m *uint32) string {
	if m == nil {
		return "-"
	}
	return strconv.FormatUint(uint64(*m), 10)
}

// TopToJSON converts a Top response (the CLI uses it).
func TopToJSON(t *pb.TopResponse) TopJSON { return topJSON(t) }
