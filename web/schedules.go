package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/rpc"
	"github.com/baristahq/barista/schedule"
	"github.com/baristahq/barista/sfq"
)

// A tenant's schedules on its page (SPEC §3 "Schedules"): each one as
// ListSchedules answers it (from the leader), and its recent fires: the
// jobs it fired that this node's replicated state still holds, found by
// their keys (schedule/NAME/SLOT, schedule/NAME/run/KEY), as the job
// counts of the page are.

// tenantSchedulesShown bounds the schedules a tenant page lists (a
// tenant's max_schedules is 100 by default).
const tenantSchedulesShown = 100

// firesShown is how many recent fires the page shows of each schedule.
const firesShown = 5

// scheduleRow is one schedule of a tenant page.
type scheduleRow struct {
	*pb.Schedule
	// Overlap is the policy's name; JobType and JobSize the job each fire
	// submits.
	Overlap, JobType, JobSize string
	// NextSlot and LastSlot are slots shown in the schedule's zone and in
	// UTC ("" for none).
	NextSlot, LastSlot string
	Fires              []scheduleFire
}

// scheduleFire is one job a schedule fired.
type scheduleFire struct {
	Job   uint64
	State string
	// Slot is the slot it fired (shown as NextSlot is), or "run now (key
	// KEY)".
	Slot string
	// SubmittedWallMs and EndedWallMs are wall-clock times (0: not ended).
	SubmittedWallMs, EndedWallMs int64
}

// slotText shows slot ms (cluster time, which a spec reads as Unix time)
// in zone and in UTC: "2028-02-29 02:30:00 CET · 2028-02-29 01:30:00
// UTC" (milliseconds only when the slot has some). A zone this build
// does not hold shows UTC alone.
func slotText(ms int64, zone string) string {
	if ms <= 0 {
		return ""
	}
	t := time.UnixMilli(ms).UTC()
	utc := t.Format("2006-01-02 15:04:05.999 UTC")
	loc, err := schedule.LoadZone(zone)
	if err != nil || loc == time.UTC {
		return utc
	}
	return t.In(loc).Format("2006-01-02 15:04:05.999 MST") + " · " + utc
}

// scheduleRows makes the rows of schedules, with the recent fires of
// each read from f.
func scheduleRows(f *fsm.FSM, tenant string, list []*pb.Schedule) []scheduleRow {
	rows := make([]scheduleRow, len(list))
	at := make(map[string]int, len(list))
	for i, s := range list {
		o, _ := fsm.OverlapFromPB(s.Overlap)
		rows[i] = scheduleRow{Schedule: s, Overlap: o.String(), LastSlot: slotText(s.LastSlotMs, s.Zone)}
		if len(s.NextSlotsMs) > 0 {
			rows[i].NextSlot = slotText(s.NextSlotsMs[0], s.Zone)
		}
		if s.Job != nil {
			rows[i].JobType = s.Job.JobType
			if sz, err := fsm.SizeFromPB(s.Job.Size); err == nil {
				rows[i].JobSize = sz.String()
			}
		}
		at[s.Name] = i
	}
	recentFires(f, tenant, rows, at)
	return rows
}

// recentFires fills each row's Fires: the newest firesShown jobs of
// tenant whose keys say its schedule fired them, submitted since the
// schedule was created (a job of a deleted schedule of the same name is
// not its). One pass over the tenant's jobs from the newest down, ended
// early once every row has its fires.
func recentFires(f *fsm.FSM, tenant string, rows []scheduleRow, at map[string]int) {
	if len(rows) == 0 {
		return
	}
	full := 0
	f.Read(func(sc *sfq.Scheduler) {
		sc.TenantJobsDown(tenant, 0, func(j *sfq.Job) bool {
			name, slot, run, ok := fsm.ParseScheduleKey(j.Key())
			if !ok {
				return true
			}
			i, ok := at[name]
			if !ok {
				return true
			}
			row := &rows[i]
			if len(row.Fires) == firesShown || int64(j.SubmittedAt) < row.CreatedAtMs {
				return true
			}
			fire := scheduleFire{Job: uint64(j.ID), State: j.State.String(), SubmittedWallMs: int64(j.SubmittedWall()), EndedWallMs: int64(j.EndedWall())}
			if run != "" {
				fire.Slot = "run now (key " + run + ")"
			} else {
				fire.Slot = slotText(int64(slot), row.Zone)
			}
			row.Fires = append(row.Fires, fire)
			if len(row.Fires) == firesShown {
				full++
			}
			return full < len(rows)
		})
	})
}

// scheduleAction pauses, resumes or runs now one schedule of a tenant
// (the form's): an admin, or the tenant's own client token. Pause and
// resume go back to the tenant's page, run-now to the job it fired.
func (s *Server) scheduleAction(w http.ResponseWriter, r *http.Request) {
	c := requestCaller(r)
	if herr := s.checkAction(w, r, c); herr != nil {
		s.fail(w, r, herr.status, herr.msg)
		return
	}
	tenant, name, action := r.PathValue("name"), r.PathValue("schedule"), r.PathValue("action")
	if action != "pause" && action != "resume" && action != "run-now" {
		s.fail(w, r, http.StatusNotFound, "no schedule action "+strconv.Quote(action)+" (pause, resume or run-now)")
		return
	}
	if err := sfq.ValidateName("tenant", tenant); err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if err := fsm.ValidateScheduleName("schedule", name); err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if !mayOpenTenant(c.id, tenant) {
		s.fail(w, r, http.StatusForbidden, "a client token of tenant "+c.id.Tenant+" may not act on another tenant's schedules")
		return
	}
	ctx, cancel := callCtx(r)
	defer cancel()
	back := "/tenants/" + url.PathEscape(tenant)
	if action == "run-now" {
		resp, err := s.client.RunScheduleNow(ctx, &pb.RunScheduleNowRequest{Tenant: tenant, Name: name})
		if err != nil {
			s.failCall(w, r, err)
			return
		}
		back = fmt.Sprintf("/jobs/%d", resp.JobId)
	} else if _, err := s.client.PauseSchedule(ctx, &pb.PauseScheduleRequest{Tenant: tenant, Name: name, Resume: action == "resume"}); err != nil {
		s.failCall(w, r, err)
		return
	}
	s.log.Info("console: schedule "+action, "tenant", tenant, "schedule", name, "by", c.id.Role.String())
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// tenantSchedules reads the first page of tenant's schedules for its
// page: the rows, whether more follow, and the refusal of the call as
// text ("" if none).
func (s *Server) tenantSchedules(r *http.Request, tenant string) (rows []scheduleRow, more bool, failed string) {
	ctx, cancel := callCtx(r)
	defer cancel()
	resp, err := s.client.ListSchedules(ctx, &pb.ListSchedulesRequest{Tenant: tenant, PageSize: tenantSchedulesShown})
	if err != nil {
		return nil, false, rpc.StatusLine(err)
	}
	return scheduleRows(s.node.FSM, tenant, resp.Schedules), resp.NextPageToken != "", ""
}

// AnyFires says whether a schedule of the page has a recent fire.
func (p tenantPage) AnyFires() bool {
	for _, s := range p.Schedules {
		if len(s.Fires) > 0 {
			return true
		}
	}
	return false
}
