package client

import (
	"context"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/baristahq/barista/proto"
)

// Tenants, pools and subscriptions in Go types (admin calls): what a SaaS
// does when a customer signs up, changes plan or leaves. The protobuf
// forms are Raw()'s (UpsertTenant, PoolSet ...).

// Optional is a value an update may leave out: the zero Optional leaves
// the setting as it is, Some(v) sets it to v (a zero v included: 0 is no
// cap, false turns a switch off).
type Optional[T any] struct {
	value T
	set   bool
}

// Some is the Optional that sets v.
func Some[T any](v T) Optional[T] { return Optional[T]{value: v, set: true} }

// Get returns the value and whether it is set.
func (o Optional[T]) Get() (T, bool) { return o.value, o.set }

// ptr is the value's pointer for a request's optional field (nil: left
// out).
func ptr[T, W any](o Optional[T], conv func(T) W) *W {
	if !o.set {
		return nil
	}
	w := conv(o.value)
	return &w
}

func u32(n int) uint32 { return uint32(min(max(n, 0), 1<<32-1)) }

// Caps are a tenant's caps (0: none): its jobs assigned or running at
// once (in all, of each size, of the classes critical and high, with a
// deadline), the estimated CPU of its running jobs, its queued jobs.
type Caps struct {
	MaxRunning         int
	MaxRunningSM       int
	MaxRunningMD       int
	MaxRunningLG       int
	MaxInflightCPU     time.Duration
	MaxQueued          int
	MaxRunningCritical int // cap_critical
	MaxRunningHigh     int // cap_high
	MaxRunningDeadline int // deadline_cap
}

// Rate is a rate limit of dispatches: N per Per, with Burst at once (0:
// N). The zero Rate is none.
type Rate struct {
	N     int
	Per   time.Duration
	Burst int
}

// IsZero reports whether r is no limit.
func (r Rate) IsZero() bool { return r.N == 0 }

// String writes r as the API does: "N/PERIOD" ("none" for no limit).
func (r Rate) String() string {
	if r.N == 0 {
		return "none"
	}
	return fmt.Sprintf("%d/%s", r.N, r.Per)
}

// parseRate reads a tenant's rate as the API writes it ("" or "none": no
// limit).
func parseRate(s string, burst uint32) Rate {
	n, per, ok := strings.Cut(s, "/")
	if !ok {
		return Rate{}
	}
	count, err1 := strconv.Atoi(n)
	d, err2 := time.ParseDuration(per)
	if err1 != nil || err2 != nil {
		return Rate{}
	}
	return Rate{N: count, Per: d, Burst: int(burst)}
}

// Tenant is a tenant's settings, as TenantGet and TenantUpsert answer.
type Tenant struct {
	Name       string
	Tier       Tier
	Multiplier int // its tier's weight is multiplied by it (1: as the tier)
	Caps       Caps
	// ExportMetrics keeps its own series on /metrics beyond a node's
	// metrics.max_tenants.
	ExportMetrics  bool
	MaxClass       Class // the highest class it may submit
	AllowDeadlines bool
	GroupCap       int // the cap of each named group without its own (0: none)
	GroupOrder     GroupOrder
	MaxGroups      int // its named groups at most (0: the default, 10,000)
	Groups         int // its named groups with jobs or settings now
	Rate           Rate
	// RateEligibleAt is when its rate limit next allows a dispatch (zero
	// without a limit).
	RateEligibleAt time.Time
	Paused         string // "" or who paused it: "tenant" or "admin"
	// Created: TenantUpsert made it.
	Created bool
}

func tenantOf(t *pb.Tenant) *Tenant {
	c := t.GetCaps()
	out := &Tenant{Name: t.Name, Tier: tierOf(t.Tier), Multiplier: int(t.Multiplier), ExportMetrics: t.ExportMetrics,
		MaxClass: classOf(t.MaxClass), AllowDeadlines: t.AllowDeadlines, GroupCap: int(t.GroupCap), GroupOrder: groupOrderOf(t.GroupOrder),
		MaxGroups: int(t.MaxGroups), Groups: int(t.Groups), Rate: parseRate(t.Rate, t.RateBurst), Paused: t.Paused, Created: t.Created,
		Caps: Caps{MaxRunning: int(c.GetMaxRunning()), MaxRunningSM: int(c.GetMaxRunningSm()), MaxRunningMD: int(c.GetMaxRunningMd()),
			MaxRunningLG: int(c.GetMaxRunningLg()), MaxInflightCPU: time.Duration(c.GetMaxInflightCpuMs()) * time.Millisecond,
			MaxQueued: int(c.GetMaxQueued()), MaxRunningCritical: int(c.GetMaxRunningCritical()), MaxRunningHigh: int(c.GetMaxRunningHigh()),
			MaxRunningDeadline: int(c.GetMaxRunningDeadline())}}
	if out.Multiplier == 0 {
		out.Multiplier = 1
	}
	if !out.Rate.IsZero() && t.RateEligibleAtMs != 0 {
		out.RateEligibleAt, _ = WallAt(t.Now, t.RateEligibleAtMs)
	}
	return out
}

// TenantUpdate is what TenantUpsert sets: every field left out (its zero
// Optional) keeps its value — a new tenant's default — and every field
// given with Some sets it. Tier is required to create a tenant.
//
//	client.TenantUpdate{Tier: client.Some(client.TierSilver), MaxQueued: client.Some(10_000)}
type TenantUpdate struct {
	Tier       Optional[Tier]
	Multiplier Optional[int]

	MaxRunning         Optional[int]
	MaxRunningSM       Optional[int]
	MaxRunningMD       Optional[int]
	MaxRunningLG       Optional[int]
	MaxInflightCPU     Optional[time.Duration]
	MaxQueued          Optional[int]
	MaxRunningCritical Optional[int]
	MaxRunningHigh     Optional[int]
	MaxRunningDeadline Optional[int]

	ExportMetrics  Optional[bool]
	MaxClass       Optional[Class]
	AllowDeadlines Optional[bool]
	GroupCap       Optional[int]
	GroupOrder     Optional[GroupOrder]
	MaxGroups      Optional[int]
	// Rate sets the rate limit, its burst included (Some(Rate{}): none).
	Rate Optional[Rate]
}

// request builds the upsert of tenant name.
func (u *TenantUpdate) request(name string) (*pb.UpsertTenantRequest, error) {
	req := &pb.UpsertTenantRequest{Name: name, Multiplier: ptr(u.Multiplier, u32), ExportMetrics: ptr(u.ExportMetrics, same[bool]),
		AllowDeadlines: ptr(u.AllowDeadlines, same[bool]), GroupCap: ptr(u.GroupCap, u32), MaxGroups: ptr(u.MaxGroups, u32)}
	if t, ok := u.Tier.Get(); ok {
		v, err := tierToPB(t)
		if err != nil {
			return nil, err
		}
		req.Tier = v.Enum()
	}
	if c, ok := u.MaxClass.Get(); ok {
		v, err := classToPB(c)
		if err != nil {
			return nil, err
		}
		req.MaxClass = v.Enum()
	}
	if o, ok := u.GroupOrder.Get(); ok {
		v, err := groupOrderToPB(o)
		if err != nil {
			return nil, err
		}
		req.GroupOrder = v.Enum()
	}
	if r, ok := u.Rate.Get(); ok {
		if r.N < 0 || r.Burst < 0 || (r.N > 0 && (r.Per <= 0 || r.Per%time.Millisecond != 0)) {
			return nil, invalidArg(fmt.Sprintf("rate: %d per %s, burst %d (want N >= 1 per a positive whole number of milliseconds, or Rate{} for none)", r.N, r.Per, r.Burst))
		}
		req.Rate, req.RateBurst = proto.String(r.String()), proto.Uint32(u32(r.Burst))
	}
	caps := &pb.CapsUpdate{MaxRunning: ptr(u.MaxRunning, u32), MaxRunningSm: ptr(u.MaxRunningSM, u32), MaxRunningMd: ptr(u.MaxRunningMD, u32),
		MaxRunningLg: ptr(u.MaxRunningLG, u32), MaxInflightCpuMs: ptr(u.MaxInflightCPU, time.Duration.Milliseconds),
		MaxQueued: ptr(u.MaxQueued, u32), MaxRunningCritical: ptr(u.MaxRunningCritical, u32), MaxRunningHigh: ptr(u.MaxRunningHigh, u32),
		MaxRunningDeadline: ptr(u.MaxRunningDeadline, u32)}
	if proto.Size(caps) > 0 {
		req.Caps = caps
	}
	return req, nil
}

func same[T any](v T) T { return v }

// TenantUpsert creates tenant name (u.Tier is required then) or changes
// it: the fields u gives are set, the others keep their value
// (docs/api.md, "Upserts"; a change that leaves fields out needs feature
// level 7). It answers the tenant as it is now (Created: it is new). It
// sets values, so it is retried on another node like a read.
func (c *Client) TenantUpsert(ctx context.Context, name string, u TenantUpdate) (*Tenant, error) {
	req, err := u.request(name)
	if err != nil {
		return nil, err
	}
	t, err := c.UpsertTenant(ctx, req)
	if err != nil {
		return nil, err
	}
	return tenantOf(t), nil
}

// TenantGet returns tenant name's settings (ErrNotFound if none).
func (c *Client) TenantGet(ctx context.Context, name string) (*Tenant, error) {
	t, err := c.GetTenant(ctx, &pb.GetTenantRequest{Name: name})
	if err != nil {
		return nil, err
	}
	return tenantOf(t), nil
}

// TenantList returns every tenant, in creation order.
func (c *Client) TenantList(ctx context.Context) ([]*Tenant, error) {
	resp, err := c.ListTenants(ctx, &pb.ListTenantsRequest{})
	if err != nil {
		return nil, err
	}
	out := make([]*Tenant, len(resp.Tenants))
	for i, t := range resp.Tenants {
		out[i] = tenantOf(t)
	}
	return out, nil
}

// TenantDelete deletes tenant name, which must hold no scheduled, queued
// or running job (ErrFailedPrecondition names them otherwise). It is
// sent once: a second delete answers ErrNotFound.
func (c *Client) TenantDelete(ctx context.Context, name string) error {
	_, err := c.DeleteTenant(ctx, &pb.DeleteTenantRequest{Name: name})
	return err
}

// Pool is a pool's settings and what it holds now (feature level 6).
type Pool struct {
	Name string
	// Weights: "default" (each tenant's tier weight × multiplier), "equal"
	// (every tenant 1) or "TENANT:W,..." (those tenants weigh W, the
	// others 1).
	Weights string
	// SubscriptionsRequired: a tenant without a subscription in the pool
	// may not submit to it.
	SubscriptionsRequired bool
	Paused                bool // dispatch in the pool is paused
	Scheduled             int
	Queued                int
	Running               int // assigned and running
	Tenants               int // tenants with a record in the pool
	Workers               int // its connected workers, as the leader counts them (0 from a stale read)
	Created               bool
}

func poolOf(p *pb.Pool) *Pool {
	return &Pool{Name: p.Name, Weights: p.Weights, SubscriptionsRequired: p.SubscriptionsRequired, Paused: p.Paused,
		Scheduled: int(p.Scheduled), Queued: int(p.Queued), Running: int(p.Running), Tenants: int(p.Tenants), Workers: int(p.Workers), Created: p.Created}
}

// PoolUpdate is what PoolSet sets; a field left out keeps its value.
type PoolUpdate struct {
	Weights               Optional[string]
	SubscriptionsRequired Optional[bool]
}

// PoolSet creates pool name or changes it, and answers it as it is now
// (Created: it is new). It sets values, so it is retried on another node
// like a read.
func (c *Client) PoolSet(ctx context.Context, name string, u PoolUpdate) (*Pool, error) {
	p, err := c.Raw().PoolSet(ctx, &pb.PoolSetRequest{Name: name, Weights: ptr(u.Weights, same[string]),
		SubscriptionsRequired: ptr(u.SubscriptionsRequired, same[bool])})
	if err != nil {
		return nil, err
	}
	return poolOf(p), nil
}

// PoolGet returns pool name ("default" for the pool default).
func (c *Client) PoolGet(ctx context.Context, name string) (*Pool, error) {
	p, err := c.Raw().PoolGet(ctx, &pb.PoolGetRequest{Name: name})
	if err != nil {
		return nil, err
	}
	return poolOf(p), nil
}

// PoolList returns every pool, by name.
func (c *Client) PoolList(ctx context.Context) ([]*Pool, error) {
	resp, err := c.Raw().PoolList(ctx, &pb.PoolListRequest{})
	if err != nil {
		return nil, err
	}
	out := make([]*Pool, len(resp.Pools))
	for i, p := range resp.Pools {
		out[i] = poolOf(p)
	}
	return out, nil
}

// PoolDelete deletes pool name, which must hold no job and no connected
// worker. It is sent once: a second delete answers ErrNotFound.
func (c *Client) PoolDelete(ctx context.Context, name string) error {
	_, err := c.Raw().PoolDelete(ctx, &pb.PoolDeleteRequest{Name: name})
	return err
}

// Subscription is a tenant's subscription in a pool: Burst is the most
// of its jobs assigned or running there at once (0 holds them), Running
// how many are now.
type Subscription struct {
	Tenant, Pool   string
	Burst, Running int
}

func subscriptionOf(s *pb.Subscription) *Subscription {
	if s == nil {
		return nil
	}
	return &Subscription{Tenant: s.Tenant, Pool: s.Pool, Burst: int(s.Burst), Running: int(s.Running)}
}

// SubscriptionSet sets tenant's subscription in pool to burst, and
// answers it as it is now, with whether anything changed. It sets a
// value, so it is retried on another node.
func (c *Client) SubscriptionSet(ctx context.Context, tenant, pool string, burst int) (*Subscription, bool, error) {
	resp, err := c.Raw().SubscriptionSet(ctx, &pb.SubscriptionSetRequest{Tenant: tenant, Pool: pool, Burst: proto.Uint32(u32(burst))})
	if err != nil {
		return nil, false, err
	}
	return subscriptionOf(resp.Subscription), resp.Changed, nil
}

// SubscriptionDelete removes tenant's subscription in pool, and says
// whether there was one. It is retried on another node (a second removal
// answers false).
func (c *Client) SubscriptionDelete(ctx context.Context, tenant, pool string) (bool, error) {
	resp, err := c.Raw().SubscriptionDelete(ctx, &pb.SubscriptionDeleteRequest{Tenant: tenant, Pool: pool})
	if err != nil {
		return false, err
	}
	return resp.Changed, nil
}

// SubscriptionList yields the subscriptions of tenant in pool (either ""
// for every one), page after page, until the last or until the loop
// stops; a failure is yielded once, with a nil subscription, and ends
// it.
func (c *Client) SubscriptionList(ctx context.Context, tenant, pool string) iter.Seq2[*Subscription, error] {
	return func(yield func(*Subscription, error) bool) {
		for s, err := range c.Raw().Subscriptions(ctx, &pb.SubscriptionListRequest{Tenant: tenant, Pool: pool}) {
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(subscriptionOf(s), nil) {
				return
			}
		}
	}
}
