package fsm

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/baristahq/barista/internal/pbcodec"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// The schedules in the state: their encoding, their checks, and what
// the API and the leader read of them.

// stateVersionSchedules (feature level 8, a state that uses schedules)
// is version 11 with max_schedules after the settings of level 8, the
// schedules after the retry policies of kinds, and the schedule events
// and their reasons. A state at level 8 that never held a schedule and
// keeps max_schedules at its default is written as version 11, byte for
// byte as before schedules.
const stateVersionSchedules = 12

// usesSchedules reports whether the view must be written as version 12.
func (v *View) usesSchedules() bool {
	return v.schedSerial > 0 || v.cfg.MaxSchedules != DefaultMaxSchedules
}

func encodeConfigSchedules(e *sfq.Encoder, c *Config) {
	e.Uvarint(uint64(c.MaxSchedules))
}

func decodeConfigSchedules(d *sfq.Decoder, c *Config) {
	c.MaxSchedules = d.Uint32()
}

// encodeSchedules writes the schedules (state version 12), by serial.
func encodeSchedules(e *sfq.Encoder, serial uint64, schedules sfq.VectorView[Schedule]) {
	e.Uvarint(serial)
	e.Uvarint(uint64(schedules.Len()))
	schedules.Each(func(i uint64, s *Schedule) bool {
		e.Uvarint(i)
		e.Uvarint(uint64(s.Tenant))
		e.String(s.Name)
		e.String(s.Spec)
		e.String(s.Zone)
		e.Byte(byte(s.Overlap))
		e.Bool(s.Paused)
		e.String(s.Job)
		e.Uvarint(s.Version)
		e.Varint(s.CatchupMs)
		e.Varint(s.JitterMs)
		e.Varint(int64(s.Since))
		e.Varint(int64(s.LastSlot))
		e.Varint(int64(s.Created))
		e.Uvarint(s.Fired)
		e.Uvarint(s.Skipped)
		e.Uvarint(s.Missed)
		e.Uvarint(s.Refused)
		e.Uvarint(uint64(s.LastJob))
		e.Uvarint(uint64(len(s.Live)))
		for _, j := range s.Live {
			e.Uvarint(uint64(j))
		}
		return true
	})
}

// decodeSchedules reads what encodeSchedules wrote, and derives the
// index and the counts.
func (f *FSM) decodeSchedules(d *sfq.Decoder) {
	f.schedSerial = d.Uvarint()
	n := d.Uvarint()
	last := uint64(0)
	for k := uint64(0); k < n && d.Err() == nil; k++ {
		i := d.Uvarint()
		s := Schedule{Tenant: d.Uint32(), Name: d.String(), Spec: d.String(), Zone: d.String()}
		s.Overlap = Overlap(d.Enum("schedule overlap", byte(numOverlaps)))
		s.Paused, s.Job, s.Version = d.Bool(), d.String(), d.Uvarint()
		s.CatchupMs, s.JitterMs = d.Varint(), d.Varint()
		s.Since, s.LastSlot, s.Created = sfq.Time(d.Varint()), sfq.Time(d.Varint()), sfq.Time(d.Varint())
		s.Fired, s.Skipped, s.Missed, s.Refused = d.Uvarint(), d.Uvarint(), d.Uvarint(), d.Uvarint()
		s.LastJob = sfq.JobID(d.Uvarint())
		nl := d.Uvarint()
		if nl > maxLiveJobs {
			d.Fail("schedule %d keeps %d jobs (at most %d)", i, nl, maxLiveJobs)
			return
		}
		for j := uint64(0); j < nl && d.Err() == nil; j++ {
			s.Live = append(s.Live, sfq.JobID(d.Uvarint()))
		}
		if d.Err() != nil {
			return
		}
		ref := schedRef{s.Tenant, s.Name}
		switch _, dup := f.schedIndex[ref]; {
		case i >= f.schedSerial || (k > 0 && i <= last):
			d.Fail("schedule %d is out of order (next serial %d)", i, f.schedSerial)
			return
		case dup:
			d.Fail("schedule %q of tenant %d appears twice", s.Name, s.Tenant)
			return
		case s.Version == 0 || ValidateScheduleName("", s.Name) != nil || ScheduleTextForm(s.Spec, s.Zone) != nil ||
			s.CatchupMs < MinCatchupMs || s.CatchupMs > MaxCatchupMs || s.JitterMs < 0 || s.JitterMs > MaxJitterMs:
			d.Fail("schedule %d (%q) is out of range", i, s.Name)
			return
		}
		last = i
		f.schedules.Put(i, s)
		f.schedIndex[ref] = i
		f.schedCount[s.Tenant]++
	}
}

// verifySchedules checks the schedules against the state: each of a
// tenant that exists, with a job template that reads back, and the
// derived index and counts equal to what the table says.
func (f *FSM) verifySchedules() error {
	count := map[uint32]uint32{}
	n := 0
	var err error
	f.schedules.View().Each(func(i uint64, s *Schedule) bool {
		n++
		count[s.Tenant]++
		if i, ok := f.sched.TenantIndex(f.sched.TenantName(s.Tenant)); !ok || i != s.Tenant {
			err = fmt.Errorf("%w: schedule %d (%q) belongs to no tenant (index %d)", sfq.ErrVerify, i, s.Name, s.Tenant)
			return false
		}
		if f.schedIndex[schedRef{s.Tenant, s.Name}] != i || i >= f.schedSerial {
			err = fmt.Errorf("%w: schedule %d (%q) is not indexed", sfq.ErrVerify, i, s.Name)
			return false
		}
		if e := pbcodec.Unmarshal([]byte(s.Job), &clusterpb.SubmitJob{}); e != nil {
			err = fmt.Errorf("%w: schedule %d (%q): its job does not read back: %v", sfq.ErrVerify, i, s.Name, e)
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	if n != len(f.schedIndex) {
		return fmt.Errorf("%w: %d schedules but %d indexed", sfq.ErrVerify, n, len(f.schedIndex))
	}
	for t, c := range f.schedCount {
		if count[t] != c {
			return fmt.Errorf("%w: tenant %d counts %d schedules, holds %d", sfq.ErrVerify, t, c, count[t])
		}
	}
	if len(count) != len(f.schedCount) {
		return fmt.Errorf("%w: the schedules' counts name %d tenants, the schedules %d", sfq.ErrVerify, len(f.schedCount), len(count))
	}
	return nil
}

// ScheduleInfo is a schedule as a reader sees it: its record, its
// serial and its tenant's name.
type ScheduleInfo struct {
	Schedule
	Serial     uint64
	TenantName string
}

// Template decodes the job a fire submits (without tenant and key).
func (s *ScheduleInfo) Template() (*clusterpb.SubmitJob, error) {
	job := &clusterpb.SubmitJob{}
	if err := pbcodec.Unmarshal([]byte(s.Job), job); err != nil {
		return nil, err
	}
	return job, nil
}

func (f *FSM) scheduleInfo(serial uint64, s *Schedule) ScheduleInfo {
	return ScheduleInfo{Schedule: *s, Serial: serial, TenantName: f.sched.TenantName(s.Tenant)}
}

// GetSchedule returns tenant's schedule name.
func (f *FSM) GetSchedule(tenant, name string) (ScheduleInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ti, ok := f.sched.TenantIndex(tenant)
	if !ok {
		return ScheduleInfo{}, false
	}
	serial, ok := f.schedIndex[schedRef{ti, name}]
	if !ok {
		return ScheduleInfo{}, false
	}
	return f.scheduleInfo(serial, f.schedules.Get(serial)), true
}

// ListSchedules returns up to limit of tenant's schedules whose names
// come after after, by name, and whether more follow.
func (f *FSM) ListSchedules(tenant, after string, limit int) ([]ScheduleInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ti, ok := f.sched.TenantIndex(tenant)
	if !ok || f.schedCount[ti] == 0 {
		return nil, false
	}
	var out []ScheduleInfo
	f.schedules.View().Each(func(i uint64, s *Schedule) bool {
		if s.Tenant == ti && s.Name > after {
			out = append(out, f.scheduleInfo(i, s))
		}
		return true
	})
	slices.SortFunc(out, func(a, b ScheduleInfo) int { return strings.Compare(a.Name, b.Name) })
	if len(out) > limit {
		return out[:limit], true
	}
	return out, false
}

// ScheduleCount returns how many schedules the state holds.
func (f *FSM) ScheduleCount() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.schedules.Len()
}

// ScheduleTotals are the counts of every schedule together.
type ScheduleTotals struct {
	Schedules, Paused               uint64
	Fired, Skipped, Missed, Refused uint64
}

// ScheduleTotals adds up the counts of every schedule, by tenant index
// (each tenant's in perTenant when it is not nil).
func (f *FSM) ScheduleTotals(perTenant func(tenant string, t ScheduleTotals)) ScheduleTotals {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var all ScheduleTotals
	by := map[uint32]*ScheduleTotals{}
	f.schedules.View().Each(func(_ uint64, s *Schedule) bool {
		t := by[s.Tenant]
		if t == nil {
			t = &ScheduleTotals{}
			by[s.Tenant] = t
		}
		for _, x := range []*ScheduleTotals{&all, t} {
			x.Schedules++
			if s.Paused {
				x.Paused++
			}
			x.Fired += s.Fired
			x.Skipped += s.Skipped
			x.Missed += s.Missed
			x.Refused += s.Refused
		}
		return true
	})
	if perTenant != nil {
		keys := make([]uint32, 0, len(by))
		for k := range by {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, cmp.Compare)
		for _, k := range keys {
			perTenant(f.sched.TenantName(k), *by[k])
		}
	}
	return all
}

// ScheduleChanges returns the serials of the schedules changed after
// change number since (some may appear twice, some be gone) and the
// number of the last change. ok is false when the node no longer
// remembers them all (the state was replaced, or too much changed): the
// reader reads every schedule again (EachSchedule).
func (f *FSM) ScheduleChanges(since uint64) (serials []uint64, last uint64, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	last = f.schedLogBase + uint64(len(f.schedLog))
	if since < f.schedLogBase || since > last {
		return nil, last, false
	}
	return slices.Clone(f.schedLog[since-f.schedLogBase:]), last, true
}

// EachSchedule calls fn for every schedule, by serial, until it returns
// false, and returns the number of the last change it reflects (see
// ScheduleChanges). fn runs under the read lock: it must not call the
// FSM again.
func (f *FSM) EachSchedule(fn func(s *ScheduleInfo) bool) uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var info ScheduleInfo
	f.schedules.View().Each(func(i uint64, s *Schedule) bool {
		info = f.scheduleInfo(i, s)
		return fn(&info)
	})
	return f.schedLogBase + uint64(len(f.schedLog))
}

// ScheduleAt returns schedule serial, if it exists.
func (f *FSM) ScheduleAt(serial uint64) (ScheduleInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.schedules.Get(serial)
	if s == nil {
		return ScheduleInfo{}, false
	}
	return f.scheduleInfo(serial, s), true
}

// SchedulesAt calls fn for each of serials under one read lock: with the
// schedule, or ok false for one that no longer exists. fn must not call
// the FSM again.
func (f *FSM) SchedulesAt(serials []uint64, fn func(serial uint64, s *ScheduleInfo, ok bool)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var info ScheduleInfo
	for _, serial := range serials {
		s := f.schedules.Get(serial)
		if s == nil {
			fn(serial, nil, false)
			continue
		}
		info = f.scheduleInfo(serial, s)
		fn(serial, &info, true)
	}
}
