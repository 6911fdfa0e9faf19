package worker

import (
	"time"

	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
)

// abandonWait bounds how long a Stop whose context ended waits for the
// leader to acknowledge the report of the run it abandons.
const abandonWait = 2 * time.Second

// abandonCurrent reports the running job's run, if any, as failed before
// it has ended — the agent is stopping (a Stop or StopAndCancel whose
// context ended) and kills it — and waits up to wait for the leader's
// acknowledgement, so that the cluster retries the job at once rather
// than when its lease expires. Without a session (or an answer in time)
// the job is retried once its lease expires, or when this worker ID
// connects again without it.
func (a *Agent) abandonCurrent(wait time.Duration) {
	a.mu.Lock()
	busy := a.cur != nil
	a.mu.Unlock()
	if !busy {
		return
	}
	select {
	case a.abandon <- struct{}{}:
	default:
	}
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		a.mu.Lock()
		busy = a.cur != nil
		a.mu.Unlock()
		if !busy {
			return
		}
	}
}

// reportAbandoned sends the report of the running job's run as failed,
// before it has ended (abandonCurrent). A run whose result is already
// known is reported as it ended.
func (a *Agent) reportAbandoned(send func(*pb.WorkerMessage) error) error {
	a.mu.Lock()
	j := a.cur
	if j == nil || j.dropped {
		a.mu.Unlock()
		return nil
	}
	if j.finished == nil {
		fin := &pb.JobFinished{Job: j.assign.Job, Attempt: j.assign.Attempt, Outcome: pb.Outcome_FAILED, ExitCode: -1,
			StderrTail: wire.OutputTail("the worker stopped before the run ended (its Stop's time ran out): the run was killed")}
		if j.run != nil {
			fin.CpuMs = j.run.CPU().Milliseconds()
		}
		j.finished = fin
	}
	report := a.reportLocked(j)
	a.mu.Unlock()
	a.log.Info("stopping: reporting the running job's run failed", "job", j.assign.Job, "attempt", j.assign.Attempt)
	return send(report)
}
