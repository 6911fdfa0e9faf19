package chaos

import (
	"fmt"

	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/snapshot"
)

// checkKinds (12): no dispatch gives a worker a job it does not run (a
// function job of a kind it did not register, a command job to a worker
// without commands); no job fails for want of a worker of its kind (a run
// ended unknown_kind counts no failure and never fails its job, and a job
// ends failed only after a dispatch of it in the same life); a slot whose
// worker reconnected without its job is free again at that index (the
// job is no longer live on it, the worker's record holds no run, and a
// job never started is requeued with no failure, a started one as a lost
// lease).
func checkKinds(h *History) []Violation {
	var out []Violation
	dispatched := map[uint64]bool{} // jobs dispatched in their current life
	for _, f := range h.Audit {
		switch f.Kind {
		case "dispatch":
			dispatched[f.Job] = true
			if !f.Runs.RunsJob(f.Form, f.JobKind) {
				out = append(out, Violation{12, fmt.Sprintf("index %d: job %d (%s) dispatched to worker %s, which runs %s", f.Index, f.Job, jobWhat(f), f.Worker, runsWhat(f.Runs))})
			}
		case "redrive":
			delete(dispatched, f.Job)
		case "finish":
			if f.Outcome != sfq.OutcomeUnknownKind.String() {
				continue
			}
			if f.Failures != f.FailuresBefore {
				out = append(out, Violation{12, fmt.Sprintf("index %d: job %d's run ended unknown_kind and its failures went from %d to %d", f.Index, f.Job, f.FailuresBefore, f.Failures)})
			}
			if f.State == sfq.Failed.String() {
				out = append(out, Violation{12, fmt.Sprintf("index %d: job %d's run ended unknown_kind and the job failed", f.Index, f.Job)})
			}
		case "terminal":
			if f.State == sfq.Failed.String() && !dispatched[f.Job] {
				out = append(out, Violation{12, fmt.Sprintf("index %d: job %d failed, never dispatched (since its last redrive)", f.Index, f.Job)})
			}
		case "hello":
			out = append(out, checkReconnect(f)...)
		}
	}
	return out
}

// checkReconnect checks what a worker's new session did to the run the
// state said it held (SPEC §5: reconcile on reconnect).
func checkReconnect(f snapshot.AuditFact) []Violation {
	x := f.Hello
	if x == nil || f.Job == 0 || x.Listed {
		return nil
	}
	var out []Violation
	bad := func(format string, args ...any) {
		out = append(out, Violation{12, fmt.Sprintf("index %d: worker %s reconnected without job %d (attempt %d, %s): ", f.Index, f.Worker, f.Job, f.Attempt, x.Before) +
			fmt.Sprintf(format, args...)})
	}
	if x.Held {
		bad("its record still holds a run")
	}
	if x.State == sfq.Assigned.String() || x.State == sfq.Running.String() {
		bad("the job is still %s", x.State)
	}
	cancelled := x.Cancel != "" && x.Cancel != sfq.CancelNone.String()
	switch {
	case x.Before == sfq.Assigned.String() && f.Failures != f.FailuresBefore:
		bad("never started, its failures went from %d to %d", f.FailuresBefore, f.Failures)
	case x.Before == sfq.Assigned.String() && !cancelled && x.State != sfq.Queued.String():
		bad("never started, it is %s, not queued", x.State)
	case x.Before == sfq.Running.String() && !cancelled && f.Failures != f.FailuresBefore+1:
		bad("started, its failures went from %d to %d, not counted as a lost lease", f.FailuresBefore, f.Failures)
	}
	return out
}

// jobWhat names a dispatched job's form.
func jobWhat(f snapshot.AuditFact) string {
	if f.Form == sfq.FormFunction.String() {
		return "a function job of kind " + f.JobKind
	}
	return "a " + f.Form + " job"
}

// runsWhat says what a worker runs.
func runsWhat(r *snapshot.RunsFact) string {
	if r == nil {
		return "every job"
	}
	cmds := "no command jobs"
	if r.Commands {
		cmds = "command jobs"
	}
	if r.AllKinds {
		return fmt.Sprintf("%s and every kind but %v", cmds, r.Kinds)
	}
	return fmt.Sprintf("%s and the kinds %v", cmds, r.Kinds)
}
