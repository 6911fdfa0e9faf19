package scenario

// Schedules (SPEC §3 "Schedules"; feature level 8): the commands that set
// a schedule, pause, resume, delete and run it now, the fires and misses
// a leader would propose (a script states them: the slots are computed
// outside Apply, by package schedule), and the schedule's show line.
// Schedules are the state machine's: the core alone runs none, and says
// so.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// ScheduleDef is a schedule as a script sets it.
type ScheduleDef struct {
	Tenant, Name, Spec, Zone string
	Overlap                  fsm.Overlap
	CatchupMs, JitterMs      int64
	Paused                   bool
	Job                      sfq.Submission
}

// FireResult is what a fire, a miss or a run-now did: Apply's result and,
// for a refused submit, the reason its schedule_refused event gives.
type FireResult struct {
	fsm.Result
	Reason string
}

// errNoSchedules is the core's answer to every schedule command.
var errNoSchedules = errors.New("schedules are the state machine's: the core alone runs none")

// scriptTime reads a time of a script: a duration from its start (60s),
// or an RFC 3339 time (2026-03-29T03:00:00+02:00) as Unix milliseconds,
// what cluster time is.
func scriptTime(s string) (sfq.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return sfq.Time(t.UnixMilli()), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad time %q: want a duration from the start (60s) or an RFC 3339 time", s)
	}
	return sfq.Time(d.Milliseconds()), nil
}

// schedule reads "schedule TENANT NAME spec=SPEC [tz=ZONE]
// [overlap=skip|buffer_one|allow] [catchup=DUR] [jitter=DUR] [paused]
// [command] JOB..." (JOB: a submit's keys but key=), "schedule TENANT
// NAME pause|resume|delete" and "schedule TENANT NAME run-now key=K".
func (rn *runner) schedule(pos []string, opts options) error {
	usage := fmt.Errorf("usage: schedule TENANT NAME spec=SPEC [tz=ZONE] [overlap=skip|buffer_one|allow] [catchup=DUR] [jitter=DUR] [paused] [command] size=S cost=DUR [job keys] | schedule TENANT NAME pause|resume|delete | schedule TENANT NAME run-now key=K")
	if len(pos) < 2 {
		return usage
	}
	tenant, name, rest := pos[0], pos[1], pos[2:]
	if len(rest) == 1 && (rest[0] == "pause" || rest[0] == "resume" || rest[0] == "delete" || rest[0] == "run-now") {
		key, _ := opts.get("key")
		if (rest[0] == "run-now") != opts.has("key") || len(opts) > 1 {
			return usage
		}
		r, err := rn.t.ScheduleOp(rn.now, tenant, name, rest[0], key)
		if err != nil || rest[0] != "run-now" {
			return err
		}
		return rn.emitFire("run-now", tenant, name, 0, r)
	}
	def := ScheduleDef{Tenant: tenant, Name: name, Job: sfq.Submission{Tenant: tenant}}
	for _, p := range rest {
		switch p {
		case "paused":
			def.Paused = true
		case "command":
			def.Job.Form = sfq.FormCommand
		default:
			return usage
		}
	}
	if !opts.has("spec") {
		return fmt.Errorf("schedule needs spec= (quoted when it has spaces: spec=\"30 2 * * *\")")
	}
	var err error
	for _, o := range opts {
		switch o.k {
		case "spec":
			def.Spec = o.v
		case "tz":
			def.Zone = o.v
		case "overlap":
			var ok bool
			if def.Overlap, ok = fsm.ParseOverlap(o.v); !ok {
				err = fmt.Errorf("bad overlap %q: want skip, buffer_one or allow", o.v)
			}
		case "catchup":
			def.CatchupMs, err = durationMs(o.k, o.v)
		case "jitter":
			def.JitterMs, err = durationMs(o.k, o.v)
		default:
			var known bool
			if known, err = jobOption(&def.Job, o.k, o.v); !known {
				return fmt.Errorf("unknown schedule key %q", o.k)
			}
		}
		if err != nil {
			return err
		}
	}
	return rn.t.SetSchedule(rn.now, def)
}

// fire reads "fire TENANT NAME T [version=N]" (the leader's fire of slot
// T, at the schedule's version unless said) and "miss TENANT NAME T
// count=N [version=N]" (its miss of N slots through T).
func (rn *runner) fire(cmd string, pos []string, opts options) error {
	if len(pos) != 3 || (cmd == "miss") != opts.has("count") {
		return fmt.Errorf("usage: fire TENANT NAME T [version=N] | miss TENANT NAME T count=N [version=N]")
	}
	slot, err := scriptTime(pos[2])
	if err != nil {
		return err
	}
	var version, n uint64
	for _, o := range opts {
		switch o.k {
		case "version":
			version, err = strconv.ParseUint(o.v, 10, 64)
		case "count":
			n, err = strconv.ParseUint(o.v, 10, 64)
		default:
			return fmt.Errorf("unknown %s key %q", cmd, o.k)
		}
		if err != nil {
			return fmt.Errorf("bad %s %q", o.k, o.v)
		}
	}
	var r FireResult
	if cmd == "miss" {
		r, err = rn.t.Miss(rn.now, pos[0], pos[1], slot, n, version)
	} else {
		r, err = rn.t.Fire(rn.now, pos[0], pos[1], slot, version)
	}
	if err != nil {
		return err
	}
	return rn.emitFire(cmd, pos[0], pos[1], slot, r)
}

// emitFire prints what a fire, miss or run-now did.
func (rn *runner) emitFire(cmd, tenant, name string, slot sfq.Time, r FireResult) error {
	outcome := r.Fire.String()
	switch {
	case r.Outcome == sfq.Duplicate && cmd == "run-now":
		outcome = "again" // the key fired its job already
	case outcome == "":
		outcome = "spent" // a slot spent already: nothing changed
	}
	line := map[string]any{cmd: tenant + "/" + name, "outcome": outcome}
	text := fmt.Sprintf("%s %s/%s", cmd, tenant, name)
	if cmd != "run-now" {
		line["slot"] = slot
		text += fmt.Sprintf(" slot=%d", slot)
	}
	text += " " + outcome
	if r.Job != 0 {
		line["job"] = r.Job
		text += fmt.Sprintf(" job=%d", r.Job)
	}
	if r.Fire == fsm.FireMissed {
		line["slots"] = r.Count
		text += fmt.Sprintf(" slots=%d", r.Count)
	}
	if r.Reason != "" {
		line["reason"] = r.Reason
		text += " reason=" + r.Reason
	}
	if rn.opt.JSON {
		rn.emitJSON(line)
		return nil
	}
	fmt.Fprintln(rn.out, text)
	return nil
}

// showSchedule prints "schedule TENANT/NAME version=N paused=B since=T
// last_slot=T fired=N skipped=N missed=N refused=N last_job=J live=J,...".
func (rn *runner) showSchedule(tenant, name string) error {
	s, ok := rn.t.Schedule(tenant, name)
	if !ok {
		return fmt.Errorf("tenant %q has no schedule %q", tenant, name)
	}
	live := make([]string, len(s.Live))
	for i, j := range s.Live {
		live[i] = strconv.FormatUint(uint64(j), 10)
	}
	if rn.opt.JSON {
		rn.emitJSON(map[string]any{"schedule": tenant + "/" + name, "version": s.Version, "paused": s.Paused, "since": s.Since, "last_slot": s.LastSlot,
			"fired": s.Fired, "skipped": s.Skipped, "missed": s.Missed, "refused": s.Refused, "last_job": s.LastJob, "live": s.Live})
		return nil
	}
	fmt.Fprintf(rn.out, "schedule %s/%s version=%d paused=%v since=%d last_slot=%d fired=%d skipped=%d missed=%d refused=%d last_job=%d live=%s\n",
		tenant, name, s.Version, s.Paused, s.Since, s.LastSlot, s.Fired, s.Skipped, s.Missed, s.Refused, s.LastJob, strings.Join(live, ","))
	return nil
}

// SetSchedule implements Target: a ScheduleSet.
func (m *Machine) SetSchedule(now sfq.Time, d ScheduleDef) error {
	job := submitJob(d.Job)
	job.Tenant = ""
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleSet{ScheduleSet: &clusterpb.ScheduleSet{Tenant: d.Tenant, Name: d.Name,
		Spec: d.Spec, Zone: d.Zone, Overlap: fsm.OverlapToPB(d.Overlap), CatchupMs: d.CatchupMs, JitterMs: d.JitterMs, Paused: d.Paused, Job: job}}})
	return err
}

// ScheduleOp implements Target: a SchedulePause, ScheduleDelete or
// ScheduleRunNow.
func (m *Machine) ScheduleOp(now sfq.Time, tenant, name, op, key string) (FireResult, error) {
	var c clusterpb.Command
	switch op {
	case "pause", "resume":
		c.Cmd = &clusterpb.Command_SchedulePause{SchedulePause: &clusterpb.SchedulePause{Tenant: tenant, Name: name, Resume: op == "resume"}}
	case "delete":
		c.Cmd = &clusterpb.Command_ScheduleDelete{ScheduleDelete: &clusterpb.ScheduleDelete{Tenant: tenant, Name: name}}
	default:
		c.Cmd = &clusterpb.Command_ScheduleRunNow{ScheduleRunNow: &clusterpb.ScheduleRunNow{Tenant: tenant, Name: name, Key: key}}
	}
	r, err := m.apply(now, &c)
	return FireResult{Result: r}, err
}

// Fire implements Target: a ScheduleFire at the schedule's version (or
// version, if not 0).
func (m *Machine) Fire(now sfq.Time, tenant, name string, slot sfq.Time, version uint64) (FireResult, error) {
	r, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleFire{ScheduleFire: &clusterpb.ScheduleFire{Tenant: tenant, Name: name,
		Version: m.version(tenant, name, version), SlotMs: int64(slot)}}})
	out := FireResult{Result: r}
	if err == nil && r.Fire == fsm.FireRefused {
		// The reason is the schedule_refused event's, the newest.
		_, next := m.F.Events(1<<62, func(*fsm.Event) bool { return false })
		m.F.Events(next-1, func(ev *fsm.Event) bool { out.Reason = ev.Reason.String(); return false })
	}
	return out, err
}

// Miss implements Target: a ScheduleMiss.
func (m *Machine) Miss(now sfq.Time, tenant, name string, through sfq.Time, count, version uint64) (FireResult, error) {
	r, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleMiss{ScheduleMiss: &clusterpb.ScheduleMiss{Tenant: tenant, Name: name,
		Version: m.version(tenant, name, version), ThroughMs: int64(through), Count: count}}})
	return FireResult{Result: r}, err
}

// version is version, or (0) the schedule's own.
func (m *Machine) version(tenant, name string, version uint64) uint64 {
	if version != 0 {
		return version
	}
	s, _ := m.F.GetSchedule(tenant, name)
	return s.Version
}

// Schedule implements Target.
func (m *Machine) Schedule(tenant, name string) (fsm.ScheduleInfo, bool) {
	return m.F.GetSchedule(tenant, name)
}

// SetSchedule implements Target: the core has no schedules.
func (c *Core) SetSchedule(sfq.Time, ScheduleDef) error { return errNoSchedules }

// ScheduleOp implements Target.
func (c *Core) ScheduleOp(sfq.Time, string, string, string, string) (FireResult, error) {
	return FireResult{}, errNoSchedules
}

// Fire implements Target.
func (c *Core) Fire(sfq.Time, string, string, sfq.Time, uint64) (FireResult, error) {
	return FireResult{}, errNoSchedules
}

// Miss implements Target.
func (c *Core) Miss(sfq.Time, string, string, sfq.Time, uint64, uint64) (FireResult, error) {
	return FireResult{}, errNoSchedules
}

// Schedule implements Target.
func (c *Core) Schedule(string, string) (fsm.ScheduleInfo, bool) { return fsm.ScheduleInfo{}, false }
