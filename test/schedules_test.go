package test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

func scheduleSetCmd(tenant, name, spec string, overlap pb.Overlap) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleSet{ScheduleSet: &clusterpb.ScheduleSet{Tenant: tenant, Name: name, Spec: spec, Overlap: overlap,
		Job: &clusterpb.SubmitJob{JobType: "tick", Size: pb.Size_SM, EstCostMs: 100}}}}
}

// scheduleFires reads the tenant's events from the oldest until idle for
// a while, and returns each schedule's fired slots (in order) and the
// cluster times they were fired at.
func scheduleFires(t *testing.T, ctx context.Context, cl pb.ClientClient, tenant string) (map[string][]int64, map[string][]int64, map[string]uint64) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	stream, err := cl.WatchEvents(wctx, &pb.WatchEventsRequest{Tenant: tenant, FromOldest: true})
	if err != nil {
		t.Fatal(err)
	}
	slots, at, missed := map[string][]int64{}, map[string][]int64{}, map[string]uint64{}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) && status.Code(err) != codes.DeadlineExceeded {
				t.Fatal(err)
			}
			return slots, at, missed
		}
		switch ev.Kind {
		case "schedule_fired":
			slots[ev.Schedule] = append(slots[ev.Schedule], ev.SlotMs)
			at[ev.Schedule] = append(at[ev.Schedule], ev.AtMs)
		case "schedule_missed":
			missed[ev.Schedule] += ev.Slots
		}
	}
}

// TestScheduleAcrossLeaderKill runs schedules of every 1, 2 and 3 s on
// three real nodes, kills the leader (kill -9) and later restarts it, and
// audits the fires in the event log: every slot from the first fired to
// the last fired exactly once, none before its time, none missed (cluster
// time pauses while no leader runs, so the new leader finds every slot
// it did not see fired within the catch-up window).
func TestScheduleAcrossLeaderKill(t *testing.T) {
	c, ctx := startWithAcme(t, 3, 3*time.Minute)
	periods := map[string]int64{"every1": 1000, "every2": 2000, "every3": 3000}
	for name, p := range periods {
		if _, err := c.Apply(ctx, scheduleSetCmd("acme", name, fmt.Sprintf("@every %dms", p), pb.Overlap_OVERLAP_ALLOW)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Second)
	old := c.WaitLeader(20 * time.Second)
	t.Logf("kill -9 leader %s", old.ID)
	old.Kill()
	next := c.WaitLeader(30 * time.Second)
	t.Logf("new leader %s", next.ID)
	time.Sleep(4 * time.Second)
	old.Start()
	time.Sleep(4 * time.Second)
	// Stop the fires, then audit them.
	for name := range periods {
		if _, err := c.Apply(ctx, &clusterpb.Command{Cmd: &clusterpb.Command_SchedulePause{SchedulePause: &clusterpb.SchedulePause{Tenant: "acme", Name: name}}}); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitConverged(30 * time.Second)
	cl := pb.NewClientClient(c.WaitLeader(20 * time.Second).Conn())
	slots, at, missed := scheduleFires(t, ctx, cl, "acme")
	for name, p := range periods {
		s := slots[name]
		// Cluster time stands still while no leader runs, so the test's
		// 13 s of sleep are 10 to 13 s of slots: at least 3 of every3's.
		if len(s) < 3 {
			t.Fatalf("%s fired %d slots: %v", name, len(s), s)
		}
		for i := range s {
			if s[i]%p != 0 {
				t.Errorf("%s fired %d, not a multiple of %d", name, s[i], p)
			}
			if at[name][i] < s[i] {
				t.Errorf("%s fired slot %d at %d, before its time", name, s[i], at[name][i])
			}
			if i > 0 && s[i] != s[i-1]+p {
				t.Errorf("%s: slot %d follows %d (a slot fired twice, or one skipped)", name, s[i], s[i-1])
			}
		}
		if missed[name] != 0 {
			t.Errorf("%s missed %d slots", name, missed[name])
		}
		got, err := cl.GetSchedule(ctx, &pb.GetScheduleRequest{Tenant: "acme", Name: name})
		if status.Code(err) == codes.Unimplemented {
			t.Logf("%s: %d slots from %d to %d, each once", name, len(s), s[0], s[len(s)-1])
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got.Fired != uint64(len(s)) || got.LastSlotMs != s[len(s)-1] || got.Missed != 0 {
			t.Errorf("%s: the schedule says fired %d, last slot %d, missed %d; the events %d, %d", name, got.Fired, got.LastSlotMs, got.Missed, len(s), s[len(s)-1])
		}
		t.Logf("%s: %d slots from %d to %d, each once", name, len(s), s[0], s[len(s)-1])
	}
}

type reportArgs struct {
	Day string `json:"day"`
}

func (reportArgs) Kind() string { return "report" }

// TestScheduleGoClient: the Go client's typed schedules on a real node,
// through a follower: ScheduleSet of JobArgs, its fires (function jobs of
// the kind, the arguments as their payload), ScheduleRunNow retried with
// its key, ScheduleList, SchedulePause and ScheduleDelete.
func TestScheduleGoClient(t *testing.T) {
	c, ctx := startWithAcme(t, 3, 2*time.Minute)
	leader := c.WaitLeader(20 * time.Second)
	cl, err := client.New([]string{c.Followers(leader)[0].GRPCAddr}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s, err := cl.ScheduleSet(ctx, "daily-report", "@every 1s", reportArgs{Day: "today"}, &client.ScheduleOpts{Tenant: "acme",
		Overlap: client.OverlapAllow, CatchUp: 30 * time.Second, Job: client.InsertOpts{Size: client.SizeMD, Cost: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	var args reportArgs
	if err := s.UnmarshalArgs(&args); err != nil || args.Day != "today" || s.Kind != "report" || s.CatchUp != 30*time.Second || len(s.NextSlots) != 5 {
		t.Fatalf("set: %+v (%v)", s, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for s.Fired < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no fires: %+v", s)
		}
		time.Sleep(200 * time.Millisecond)
		if s, err = cl.ScheduleGet(ctx, "acme", "daily-report"); err != nil {
			t.Fatal(err)
		}
	}
	j, err := cl.JobGet(ctx, "acme", s.LastJob)
	if err != nil {
		t.Fatal(err)
	}
	if j.Kind != "report" || j.Form != "function" || string(j.Payload) != `{"day":"today"}` || j.Size != client.SizeMD {
		t.Fatalf("the fired job: %+v", j)
	}
	if s.LastSlot.IsZero() || time.Since(s.LastSlot) > 10*time.Second {
		t.Fatalf("last slot %s", s.LastSlot)
	}
	if _, err := cl.SchedulePause(ctx, "acme", "daily-report"); err != nil {
		t.Fatal(err)
	}
	r1, err := cl.ScheduleRunNow(ctx, "acme", "daily-report", "k1")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := cl.ScheduleRunNow(ctx, "acme", "daily-report", "k1")
	if err != nil || r1.Duplicate || !r2.Duplicate || r2.Job.ID != r1.Job.ID || r1.Job.Key != "schedule/daily-report/run/k1" {
		t.Fatalf("run-now: %+v, %+v, %v", r1, r2, err)
	}
	list, err := cl.ScheduleList(ctx, "acme")
	if err != nil || len(list) != 1 || !list[0].Paused {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := cl.ScheduleDelete(ctx, "acme", "daily-report"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ScheduleGet(ctx, "acme", "daily-report"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("deleted: %v", err)
	}
}
