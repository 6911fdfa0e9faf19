package worker

import (
	"fmt"
	"time"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
)

// Size is a worker's size, the largest job size it runs: the client's
// one Size type (client.Size), so that a job's size and a worker's are
// the same values.
type Size = client.Size

// The sizes; "" is SizeSM.
const (
	SizeSM = client.SizeSM
	SizeMD = client.SizeMD
	SizeLG = client.SizeLG
)

// sizeToPB is a worker size as the Hello says it.
func sizeToPB(s Size) (pb.Size, error) {
	switch s {
	case "", SizeSM:
		return pb.Size_SM, nil
	case SizeMD:
		return pb.Size_MD, nil
	case SizeLG:
		return pb.Size_LG, nil
	}
	return 0, fmt.Errorf("worker size: %q (want sm, md or lg)", string(s))
}

// Observation is a moment in a job run's life on this worker, as
// Config.Observer hears it.
type Observation struct {
	// What: "assigned", "started", "finished", "killed" (a Reject, a
	// self-kill, the agent stopping) or "cancelled".
	What    string
	Job     uint64
	Attempt uint32
	Tenant  string // the job's tenant
	Kind    string // the job's kind (its job_type)
	At      time.Time
	CPU     time.Duration
	// Reason is, for "finished" and "cancelled", the run's outcome (ok,
	// failed, cancelled, snoozed, unknown_kind), and for "killed" why.
	Reason string
	// Wait is, for "assigned", the time from the Ready to its Assign.
	Wait time.Duration
}

func (a *Agent) observe(what string, j *pb.Assign, cpu time.Duration, reason string) {
	if a.cfg.Observer != nil {
		a.cfg.Observer(Observation{What: what, Job: j.Job, Attempt: j.Attempt, Tenant: j.Tenant, Kind: j.JobType, At: time.Now(), CPU: cpu, Reason: reason})
	}
}

// observeWait tells the Observer of an Assign that came wait after its
// Ready.
func (a *Agent) observeWait(j *pb.Assign, wait time.Duration) {
	if a.cfg.Observer != nil {
		a.cfg.Observer(Observation{What: "assigned", Job: j.Job, Attempt: j.Attempt, Tenant: j.Tenant, Kind: j.JobType, At: time.Now(), Wait: wait})
	}
}
