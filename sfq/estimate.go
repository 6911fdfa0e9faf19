package sfq

import (
	"fmt"
	"math"
)

// TypeStat is what the core has learned of one job type of one tenant: an
// integer moving average of the CPU of its runs accepted as completed.
type TypeStat struct {
	Tenant uint32
	Type   string
	// EMAMs is the average in CPU ms: the first completion sets it, each
	// later one adds floor((cpu_ms - EMAMs) / 8), rounded toward -inf.
	EMAMs int64
	// Samples counts the completions seen (it stops at 2^32-1).
	Samples uint32
	// UpdatedAt is the cluster time of the last completion; the type
	// updated longest ago (then the lowest name) is forgotten first.
	UpdatedAt Time
}

const (
	// MaxJobTypes bounds the job types a tenant has estimates for.
	MaxJobTypes = 1000
	// MinEstimateSamples is how many completions a type needs before
	// estimate=auto uses its average.
	MinEstimateSamples = 3
)

// emaStep returns the average after one more sample: ema + floor((cpu -
// ema) / 8). An arithmetic shift floors toward -inf, which a division
// (truncating toward 0) would not: 1343 then 500 gives 1237, not 1238.
func emaStep(ema, cpu int64) int64 { return ema + (cpu-ema)>>3 }

type typeKey struct {
	tenant uint32
	typ    string
}

// estimateIndex is the derived index of the TypeStat table. A new entry
// takes the lowest slot not in use, so that which slot it gets depends on
// the table alone (a restored state assigns the same slots as the one it
// was taken from).
type estimateIndex struct {
	slots map[typeKey]uint64
	free  slotHeap // slots below next not in use
	next  uint64   // one above the highest slot ever handed out
}

func (x *estimateIndex) init() {
	x.slots = make(map[typeKey]uint64)
	x.free = nil
	x.next = 0
}

func (x *estimateIndex) alloc() uint64 {
	if len(x.free) > 0 {
		return x.free.pop()
	}
	x.next++
	return x.next - 1
}

// slotHeap is a min-heap of free slots.
type slotHeap []uint64

func (h *slotHeap) push(v uint64) {
	*h = append(*h, v)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p] <= a[i] {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *slotHeap) pop() uint64 {
	a := *h
	v := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && a[r] < a[l] {
			m = r
		}
		if a[i] <= a[m] {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return v
}

// estimate fixes the cost of a submit and says where it came from. Under
// estimate=auto the type's average wins once it has MinEstimateSamples
// completions, then the stated cost, then the configured default.
func (s *Scheduler) estimate(ti uint32, sub *Submission) (int64, EstSource, error) {
	if s.cfg.Estimate == EstimateAuto {
		if st := s.typeStat(ti, sub.Type); st != nil && st.Samples >= MinEstimateSamples {
			return max(1, st.EMAMs), EstFromEMA, nil
		}
		if sub.EstCostMs > 0 {
			return sub.EstCostMs, EstFromSubmit, nil
		}
		return s.cfg.DefaultCostMs, EstFromDefault, nil
	}
	if sub.EstCostMs <= 0 {
		return 0, 0, invalidf("est_cost_ms", "must be positive (got %d); it may be left out only while the cluster's estimate is auto", sub.EstCostMs)
	}
	return sub.EstCostMs, EstFromSubmit, nil
}

func (s *Scheduler) typeStat(ti uint32, typ string) *TypeStat {
	if typ == "" {
		return nil
	}
	slot, ok := s.est.slots[typeKey{ti, typ}]
	if !ok {
		return nil
	}
	return s.types.Get(slot)
}

// Estimate returns what the core has learned of a tenant's job type.
func (s *Scheduler) Estimate(tenant, typ string) (TypeStat, bool) {
	ti, ok := s.TenantIndex(tenant)
	if !ok {
		return TypeStat{}, false
	}
	st := s.typeStat(ti, typ)
	if st == nil {
		return TypeStat{}, false
	}
	return *st, true
}

// learn adds a completed run's CPU to its type's average. Jobs without a
// type teach nothing. A tenant at MaxJobTypes forgets the type updated
// longest ago (then the lowest name) to make room.
func (s *Scheduler) learn(ti uint32, typ string, cpuMs int64, now Time) {
	if typ == "" {
		return
	}
	k := typeKey{ti, typ}
	if slot, ok := s.est.slots[k]; ok {
		st := s.types.Mut(slot)
		st.EMAMs = emaStep(st.EMAMs, cpuMs)
		if st.Samples < math.MaxUint32 {
			st.Samples++
		}
		st.UpdatedAt = now
		return
	}
	rt := &s.rt[ti]
	if len(rt.types) >= MaxJobTypes {
		oldest := 0
		for i, slot := range rt.types {
			a, b := s.types.Get(slot), s.types.Get(rt.types[oldest])
			if a.UpdatedAt < b.UpdatedAt || (a.UpdatedAt == b.UpdatedAt && a.Type < b.Type) {
				oldest = i
			}
		}
		s.dropType(ti, oldest)
	}
	slot := s.est.alloc()
	s.types.Put(slot, TypeStat{Tenant: ti, Type: typ, EMAMs: cpuMs, Samples: 1, UpdatedAt: now})
	s.est.slots[k] = slot
	rt.types = append(rt.types, slot)
}

// dropType forgets the i-th type of tenant ti.
func (s *Scheduler) dropType(ti uint32, i int) {
	rt := &s.rt[ti]
	slot := rt.types[i]
	st := s.types.Get(slot)
	delete(s.est.slots, typeKey{ti, st.Type})
	s.types.Del(slot)
	s.est.free.push(slot)
	last := len(rt.types) - 1
	rt.types[i] = rt.types[last]
	rt.types = rt.types[:last]
}

// forgetEstimates drops every type of tenant ti.
func (s *Scheduler) forgetEstimates(ti uint32) {
	for len(s.rt[ti].types) > 0 {
		s.dropType(ti, len(s.rt[ti].types)-1)
	}
}

// rebuildEstimates derives the index from the table.
func (s *Scheduler) rebuildEstimates() error {
	s.est.init()
	var err error
	s.types.View().Each(func(slot uint64, st *TypeStat) bool {
		k := typeKey{st.Tenant, st.Type}
		if _, dup := s.est.slots[k]; dup || int(st.Tenant) >= len(s.rt) {
			err = fmt.Errorf("%w: estimate slot %d (tenant %d, type %q) is a duplicate or names no tenant", ErrCorrupt, slot, st.Tenant, st.Type)
			return false
		}
		for ; s.est.next < slot; s.est.next++ {
			s.est.free.push(s.est.next)
		}
		s.est.next = slot + 1
		s.est.slots[k] = slot
		s.rt[st.Tenant].types = append(s.rt[st.Tenant].types, slot)
		return true
	})
	return err
}
