// Package schedule computes the slots of the tenants' schedules (SPEC §3
// "Schedules") and runs the leader's loop that fires them.
//
// A slot is a cluster time (Unix milliseconds on the cluster's clock).
// Apply never computes one: the time zone rules a build holds may differ
// from another's, so only the leader reads a spec and a zone, here, and
// proposes ScheduleFire for each slot cluster time reaches; Apply only
// checks that the slot is due and comes after the last one spent. The
// specs are parsed by github.com/robfig/cron/v3 (its five-field standard
// parser and its macros); the slots of a cron spec follow its fields in
// the schedule's zone, with the rule on clock changes of Spec.Next, and
// the zones come from the database embedded in the binary (zone.go).
package schedule

import (
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/sfq"
)

// MinEvery and MaxEvery bound the D of "@every D".
const (
	MinEvery = time.Second
	MaxEvery = 365 * 24 * time.Hour
)

// starBit marks a cron field written "*" (robfig/cron sets it).
const starBit = 1 << 63

// Spec is a schedule's spec and zone, read: it gives the slots.
type Spec struct {
	every int64 // the period of "@every D" in ms; 0 for a cron spec
	cron  *cron.SpecSchedule
	loc   *time.Location
	// anyHour: the hour field is "*" (every hour the clock shows).
	anyHour bool
}

// invalid is a refusal of a spec or zone, naming the field (INVALID_ARGUMENT).
func invalid(field, format string, args ...any) error {
	return sfq.Refusef(sfq.CodeInvalid, "", field, format, args...)
}

// parser reads five fields (minute hour day-of-month month day-of-week)
// and the macros (@yearly, @annually, @monthly, @weekly, @daily,
// @midnight, @hourly).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse reads a spec in a zone ("" = UTC): five cron fields, a macro, or
// "@every D" (D from 1 s to 365 days, in whole milliseconds), whose slots
// are the multiples of D since the Unix epoch, whatever the zone.
func Parse(spec, zone string) (*Spec, error) {
	if err := fsm.ScheduleTextForm(spec, zone); err != nil {
		return nil, err
	}
	loc, err := LoadZone(zone)
	if err != nil {
		return nil, invalid("zone", "%v", err)
	}
	s := &Spec{loc: loc}
	if d, ok := strings.CutPrefix(spec, "@every "); ok {
		every, err := time.ParseDuration(strings.TrimSpace(d))
		switch {
		case err != nil:
			return nil, invalid("spec", "%q: %v", spec, err)
		case every < MinEvery || every > MaxEvery:
			return nil, invalid("spec", "%q: the period is %s (want %s .. %s)", spec, every, MinEvery, MaxEvery)
		case every%time.Millisecond != 0:
			return nil, invalid("spec", "%q: the period %s is not whole milliseconds", spec, every)
		}
		s.every = every.Milliseconds()
		return s, nil
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, invalid("spec", "%q: give the time zone as the schedule's zone, not in its spec", spec)
	}
	parsed, err := parser.Parse(spec)
	if err != nil {
		return nil, invalid("spec", "%q: %v (want five fields: minute hour day-of-month month day-of-week, a macro such as @daily, or @every D)", spec, err)
	}
	cs, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, invalid("spec", "%q: not a cron spec", spec)
	}
	c := *cs
	c.Location = loc // never the host's time.Local
	s.cron, s.anyHour = &c, c.Hour&starBit != 0
	// A spec whose fields no day meets (February 30) never fires.
	if s.Next(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()) == 0 {
		return nil, invalid("spec", "%q never fires", spec)
	}
	return s, nil
}

// Every returns the period of an "@every D" spec (0 for a cron spec).
func (s *Spec) Every() time.Duration { return time.Duration(s.every) * time.Millisecond }

// Zone returns the zone the spec reads its fields in.
func (s *Spec) Zone() *time.Location { return s.loc }

// Next returns the first slot after after (ms), or 0 if none comes
// within five years.
//
// The slots of a cron spec are the times its fields name on the clock of
// its zone, with one rule for the days that clock changes:
//
//   - With "*" in the hour field the spec names every hour the clock
//     shows: in an hour the clock skips (spring forward) nothing fires,
//     and an hour it shows twice (fall back) fires twice, each an hour of
//     real time.
//   - Otherwise the spec names times of day. A time the clock skips fires
//     once, at the first instant after the gap (a 02:30 daily job in
//     Europe/Berlin fires at 03:00 CEST on the last Sunday of March); a
//     time the clock shows twice fires once, at its first occurrence
//     (02:30 CEST, not 02:30 CET, on the last Sunday of October).
//
// So a daily job runs once a day, every day, and "every hour" means
// every hour of real time.
func (s *Spec) Next(after int64) int64 {
	if s.every > 0 {
		if after < 0 {
			return 0
		}
		return (after/s.every + 1) * s.every
	}
	t := time.UnixMilli(after).In(s.loc)
	for range maxRepeats {
		n := s.cron.Next(t)
		if n.IsZero() {
			return 0
		}
		if !s.anyHour {
			if g, ok := s.gapSlot(t, n); ok {
				return g.UnixMilli()
			}
			if s.repeated(n) {
				t = n // its first occurrence was a slot already
				continue
			}
		}
		return n.UnixMilli()
	}
	return 0
}

// maxRepeats bounds the candidates Next passes over: each is the second
// occurrence of a time of day, one a clock change, at most a few a year.
const maxRepeats = 64

// gapSlot returns the slot of a time of day the clock skipped after t and
// before n, the next time the fields name: the first instant after the
// first such gap.
func (s *Spec) gapSlot(t, n time.Time) (time.Time, bool) {
	cur := t
	for range 1000 { // the transitions of five years, many times over
		_, end := cur.ZoneBounds()
		if end.IsZero() || end.After(n) {
			return time.Time{}, false
		}
		_, before := cur.Zone()
		_, afterOff := end.Zone()
		if afterOff > before && s.matchesGap(end, before, afterOff) {
			return end, true
		}
		cur = end
	}
	return time.Time{}, false
}

// matchesGap reports whether the fields name a minute of the wall clock
// skipped at transition end, from offset before to offset after (in
// seconds): the minutes from end's time in the old offset, for the
// length of the gap.
func (s *Spec) matchesGap(end time.Time, before, after int) bool {
	wall := end.In(time.FixedZone("", before)) // the gap's first minute, as the old clock would show it
	for m := 0; m < (after-before)/60; m++ {
		w := wall.Add(time.Duration(m) * time.Minute)
		if s.matches(w) {
			return true
		}
	}
	return false
}

// matches reports whether the fields name wall time w (to the minute).
func (s *Spec) matches(w time.Time) bool {
	c := s.cron
	if c.Minute&(1<<uint(w.Minute())) == 0 || c.Hour&(1<<uint(w.Hour())) == 0 || c.Month&(1<<uint(w.Month())) == 0 {
		return false
	}
	dom := c.Dom&(1<<uint(w.Day())) != 0
	dow := c.Dow&(1<<uint(w.Weekday())) != 0
	if c.Dom&starBit != 0 || c.Dow&starBit != 0 {
		return dom && dow
	}
	return dom || dow
}

// repeated reports whether n's time of day is the second showing of a
// time the clock showed before it, when it fell back.
func (s *Spec) repeated(n time.Time) bool {
	start, _ := n.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, now := n.Zone()
	_, before := start.Add(-time.Millisecond).Zone()
	return before > now && n.Sub(start) < time.Duration(before-now)*time.Second
}

// Slots returns up to n slots after after.
func (s *Spec) Slots(after int64, n int) []int64 {
	var out []int64
	for len(out) < n {
		next := s.Next(after)
		if next == 0 {
			break
		}
		out = append(out, next)
		after = next
	}
	return out
}
