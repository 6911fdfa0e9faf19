package sfq

// Reads for the fairness report (fsm/fairness), which the state machine
// feeds after each command with the state of the tenants it touched.

// EligibleClasses returns a mask with bit c (1<<c) set for each class in
// which tenant ti has a candidate, with a deadline or without, as of its
// last placement: the tenants whose weights share a class's entitlement.
// A deleted or unknown tenant has none.
func (s *Scheduler) EligibleClasses(ti uint32) uint8 {
	if int(ti) >= len(s.rt) {
		return 0
	}
	b := s.rt[ti].fairBits | s.rt[ti].dlBits
	var m uint8
	for c := range Class(NumClasses) {
		if b&classBits(c) != 0 {
			m |= 1 << c
		}
	}
	return m
}

// TenantWeight returns the weight tenant ti would be dispatched with at
// now (as Weight, without copying the record), or 0 if there is no such
// tenant.
func (s *Scheduler) TenantWeight(ti uint32, now Time) Weight {
	t := s.tenants.Get(uint64(ti))
	if t == nil {
		return 0
	}
	return s.weight(t, s.decayedUsage(t, now))
}
