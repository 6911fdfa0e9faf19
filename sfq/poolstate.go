package sfq

import (
	"fmt"
	"slices"
)

// The pools' part of a state: what a View keeps of each pool slot, its
// encoding and restore, and Verify's check of a lane against its tenant.

// poolPic is what a View keeps of a pool slot.
type poolPic struct {
	PoolSpec
	paused, deleted bool
	vnow            [NumClasses]VirtualTime
}

func (s *Scheduler) poolPics() []poolPic {
	out := make([]poolPic, len(s.pools))
	for i, p := range s.pools {
		out[i] = poolPic{PoolSpec: p.PoolSpec, paused: p.paused, deleted: p.deleted, vnow: p.vnow}
	}
	return out
}

// UsesPools reports whether the state holds anything of pools: a pool
// other than default, a setting or pause of default, a subscription.
func (v *View) UsesPools() bool { return v.usesPools() }

func (v *View) usesPools() bool {
	if len(v.pools) > 1 || len(v.subs) > 0 {
		return true
	}
	p := &v.pools[DefaultPool]
	return p.paused || p.Required || p.Weights.Mode != WeightsDefault
}

// encodePools writes the pool slots (the default's virtual_now is the
// state's own) and the subscriptions.
func (v *View) encodePools(e *Encoder) {
	e.Uvarint(uint64(len(v.pools)))
	for i, p := range v.pools {
		e.String(p.Name)
		e.Byte(byte(p.Weights.Mode))
		e.Uvarint(uint64(len(p.Weights.Map)))
		for _, w := range p.Weights.Map {
			e.String(w.Tenant)
			e.Uvarint(uint64(w.Weight))
		}
		e.Bool(p.Required)
		e.Bool(p.paused)
		e.Bool(p.deleted)
		if i > 0 {
			for _, vn := range p.vnow {
				e.Varint(int64(vn))
			}
		}
	}
	e.Uvarint(uint64(len(v.subs)))
	for _, sub := range v.subs {
		e.Uvarint(uint64(sub.tenant))
		e.Uvarint(uint64(sub.pool))
		e.Uvarint(uint64(sub.burst))
	}
}

// decodePools reads what encodePools wrote.
func (s *Scheduler) decodePools(d *Decoder) error {
	n := d.Uvarint()
	if d.Err() == nil && (n < 1 || n > MaxPoolSlots) {
		return fmt.Errorf("%w: %d pool slots", ErrCorrupt, n)
	}
	def := s.pools[DefaultPool]
	s.pools = s.pools[:0]
	s.poolIdx = map[string]PoolID{}
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		var spec PoolSpec
		spec.Name = d.String()
		spec.Weights.Mode = WeightMode(d.Enum("weights mode", 3))
		nw := d.Uvarint()
		for k := uint64(0); k < nw && d.Err() == nil; k++ {
			spec.Weights.Map = append(spec.Weights.Map, TenantWeight{Tenant: d.String(), Weight: d.Uint32()})
		}
		spec.Required = d.Bool()
		paused, deleted := d.Bool(), d.Bool()
		if d.Err() != nil {
			break
		}
		if err := spec.Validate(); err != nil || (i == 0) != (spec.Name == DefaultPoolName) || (i == 0 && deleted) {
			return fmt.Errorf("%w: pool slot %d (%q) is malformed", ErrCorrupt, i, spec.Name)
		}
		if _, dup := s.poolIdx[spec.Name]; dup {
			return fmt.Errorf("%w: pool %q is in the state twice", ErrCorrupt, spec.Name)
		}
		p := def
		if i == 0 {
			p.PoolSpec = spec
		} else {
			p = newPoolCore(spec, false)
			for c := range p.vnow {
				p.vnow[c] = VirtualTime(d.Varint())
			}
		}
		p.paused, p.deleted = paused, deleted
		s.pools = append(s.pools, p)
		s.poolIdx[spec.Name] = PoolID(i)
	}
	ns := d.Uvarint()
	for i := uint64(0); i < ns && d.Err() == nil; i++ {
		sub := subscription{tenant: d.Uint32(), pool: PoolID(min(d.Uint32(), MaxPoolSlots)), burst: d.Uint32()}
		if d.Err() != nil {
			break
		}
		t := s.tenants.Get(uint64(sub.tenant))
		switch {
		case t == nil || t.pool != DefaultPool || int(sub.pool) >= len(s.pools):
			return fmt.Errorf("%w: subscription %d names tenant %d and pool %d", ErrCorrupt, i, sub.tenant, sub.pool)
		case i > 0 && cmpSub(s.subs[i-1], sub.tenant, sub.pool) >= 0:
			return fmt.Errorf("%w: subscription %d is out of order", ErrCorrupt, i)
		}
		s.subs = append(s.subs, sub)
	}
	if d.Err() == nil && len(s.pools) == 0 {
		return fmt.Errorf("%w: no pool default", ErrCorrupt)
	}
	return d.Err()
}

// verifyLane checks lane ti (of a pool other than default) against its
// tenant's own record: the same settings and deletion, no pause, rate
// state or group count of its own (those are its tenant's), known to its
// tenant and its pool.
func (s *Scheduler) verifyLane(ti uint32, t *Tenant, report func(string, ...any)) {
	o := s.tenants.Get(uint64(t.owner))
	if o == nil || o.pool != DefaultPool {
		report("lane %d of tenant %q names tenant %d, which is not a tenant's own record", ti, t.Name, t.owner)
		return
	}
	if o.Deleted != t.Deleted || o.Name != t.Name || !sameSpec(&o.TenantSpec, &t.TenantSpec) {
		report("lane %d of tenant %q (pool %d) differs from its tenant in its settings or deletion", ti, t.Name, t.pool)
	}
	if t.paused != NotPaused || t.rateTAT != 0 || t.Groups != 0 {
		report("lane %d of tenant %q holds a pause, rate state or group count of its own", ti, t.Name)
	}
	if !slices.Contains(s.rt[t.owner].lanes, ti) {
		report("lane %d of tenant %q is not in its tenant's list", ti, t.Name)
	}
	rt := &s.rt[ti]
	if p := s.pools[t.pool]; int(rt.local) >= len(p.members) || p.members[rt.local] != ti {
		report("lane %d of tenant %q is not a member of pool %s", ti, t.Name, p.Name)
	}
	if b, ok := s.subscription(t.owner, t.pool); ok != rt.subscribed || b != rt.burst {
		report("lane %d of tenant %q has burst %d/%v, its subscription says %d/%v", ti, t.Name, rt.burst, rt.subscribed, b, ok)
	}
}

// sameSpec compares two tenant settings (their Rate included).
func sameSpec(a, b *TenantSpec) bool { return *a == *b }
