package scenario

// Handlers of the job commands: submit, dispatch, the lifecycle events
// (start, heartbeat, finish, cancel, expire, release) and redrive.

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/baristahq/barista/sfq"
)

// redrive JOB [JOB ...]: a Redrive by IDs.
func (rn *runner) redrive(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: redrive JOB [JOB ...]")
	}
	ids := make([]sfq.JobID, len(args))
	for i, a := range args {
		id, err := jobID(a)
		if err != nil {
			return err
		}
		ids[i] = id
	}
	return rn.t.Redrive(rn.now, ids)
}

func (rn *runner) submit(pos []string, opts options) error {
	n, pos, err := times(pos)
	if err != nil {
		return err
	}
	form := sfq.FormAny
	if len(pos) == 2 && pos[1] == "command" {
		pos, form = pos[:1], sfq.FormCommand
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: submit TENANT [xN] [command] size=S cost=DUR|auto [class=C deadline=DUR group=G key=K type=T|kind=K max_attempts=N timeout=DUR delay=DUR expire=DUR retry_backoff=DUR pool=P uses=R:K,...]")
	}
	sub := sfq.Submission{Tenant: pos[0], Form: form}
	if opts.has("kind") && (form == sfq.FormCommand || opts.has("type")) {
		return fmt.Errorf("kind=K makes a function job of type K: give it without command or type=")
	}
	for _, req := range []string{"size", "cost"} {
		if !opts.has(req) {
			return fmt.Errorf("submit needs %s=", req)
		}
	}
	for _, o := range opts {
		if o.k == "key" {
			sub.Key = o.v
			continue
		}
		known, err := jobOption(&sub, o.k, o.v)
		if !known {
			return fmt.Errorf("unknown submit key %q", o.k)
		}
		if err != nil {
			return err
		}
	}
	if n > 1 && sub.Key != "" {
		return fmt.Errorf("key= cannot be combined with a repeat count")
	}
	for range n {
		if _, err := rn.t.Submit(rn.now, sub); err != nil {
			return err
		}
	}
	return nil
}

// jobOption reads key k of a job (a submit's, a schedule's) into sub;
// known is false for a key that is not one.
func jobOption(sub *sfq.Submission, k, v string) (known bool, err error) {
	switch k {
	case "size":
		sub.Size, err = sfq.ParseSize(v)
	case "cost":
		if v != "auto" { // auto: no stated cost (estimate=auto)
			sub.EstCostMs, err = durationMs(k, v)
		}
	case "class":
		sub.Class, err = sfq.ParseClass(v)
	case "deadline":
		sub.DeadlineMs, err = durationMs(k, v)
	case "type":
		sub.Type = v
	case "kind":
		sub.Type, sub.Form = v, sfq.FormFunction
	case "max_attempts":
		sub.MaxAttempts, err = count(k, v)
	case "timeout":
		sub.TimeoutMs, err = durationMs(k, v)
	case "group":
		sub.Group = v
	case "delay":
		sub.DelayMs, err = durationMs(k, v)
	case "expire":
		sub.ExpireMs, err = durationMs(k, v)
	case "retry_backoff":
		sub.RetryBackoffMs, err = durationMs(k, v)
		sub.RetryBackoffSet = true
	case "pool":
		sub.Pool = v
	case "uses":
		sub.Uses, err = sfq.ParseUses(v)
	default:
		return false, nil
	}
	return true, err
}

func (rn *runner) dispatch(pos []string, opts options) error {
	n, pos, err := times(pos)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: dispatch SIZE [xN] [worker=NAME] [pool=P]")
	}
	size, err := sfq.ParseSize(pos[0])
	if err != nil {
		return err
	}
	worker, named := opts.get("worker")
	pool, poolGiven := opts.get("pool")
	for _, o := range opts {
		if o.k != "worker" && o.k != "pool" {
			return fmt.Errorf("unknown dispatch key %q", o.k)
		}
	}
	// A worker the script connected asks for jobs of its size and pool;
	// its line names it.
	pool, conn, err := rn.dispatchWorker(worker, named, size, pool, poolGiven)
	if err != nil {
		return err
	}
	for range n {
		rn.res.Dispatches++
		w := worker
		if !named {
			w = fmt.Sprintf("%s-%d", size, rn.res.Dispatches)
		}
		a, ok, err := rn.t.Dispatch(rn.now, pool, size, w)
		if err != nil {
			return err
		}
		shown := ""
		if conn {
			shown = w
		}
		rn.emitDispatch(a, ok, pool, shown)
	}
	return nil
}

// emitDispatch prints a dispatch's line; worker names a worker the
// script connected ("": none).
func (rn *runner) emitDispatch(a sfq.Assignment, ok bool, pool, worker string) {
	if pool == sfq.DefaultPoolName {
		pool = ""
	}
	n := rn.res.Dispatches
	if !ok {
		if rn.opt.JSON {
			rn.emitJSON(dispatchLine{N: n, None: true, Worker: worker})
		} else if worker != "" {
			fmt.Fprintf(rn.out, "dispatch %d none worker=%s\n", n, worker)
		} else {
			fmt.Fprintf(rn.out, "dispatch %d none\n", n)
		}
		return
	}
	tenant := rn.t.TenantName(a.Tenant)
	start := sfq.FormatMillis(int64(a.Start))
	var group string
	if j, ok := rn.t.Job(a.Job); ok {
		group = j.Group()
	}
	if rn.opt.JSON {
		rn.emitJSON(dispatchLine{N: n, Tenant: tenant, Job: uint64(a.Job), Size: a.Size.String(), Group: group, Pool: pool, Worker: worker, StartMs: json.RawMessage(start)})
		return
	}
	// Only jobs of a named group, dispatches in a pool other than
	// default, and dispatches to a worker the script connected say so:
	// every other line keeps its form.
	var extra string
	if group != "" {
		extra += " group=" + group
	}
	if pool != "" {
		extra += " pool=" + pool
	}
	if worker != "" {
		extra += " worker=" + worker
	}
	fmt.Fprintf(rn.out, "dispatch %d tenant=%s job=%d size=%s start=%s%s\n", n, tenant, a.Job, a.Size, start, extra)
}

func (rn *runner) jobEvent(cmd string, pos []string, opts options) error {
	if len(pos) < 1 {
		return fmt.Errorf("usage: %s JOB [key=value ...]", cmd)
	}
	id, err := jobID(pos[0])
	if err != nil {
		return err
	}
	job, ok := rn.t.Job(id)
	if !ok {
		return fmt.Errorf("%w: %d", sfq.ErrUnknownJob, id)
	}
	// By default a report names the current attempt and, while the job is
	// live, its worker (an ended job keeps the worker it ran on, which a
	// report of it does not name unless told).
	attempt, worker := job.Attempt, ""
	if job.State.Live() {
		worker = job.Worker
	}
	var cpu, snooze int64
	outcome := sfq.OutcomeOK
	permanent := false
	for _, o := range opts {
		k, v := o.k, o.v
		switch k {
		case "attempt":
			attempt, err = count(k, v)
		case "worker":
			worker = v
		case "cpu":
			if cmd != "heartbeat" && cmd != "finish" {
				return fmt.Errorf("%s takes no cpu=", cmd)
			}
			cpu, err = durationMs(k, v)
		case "outcome":
			if cmd != "finish" {
				return fmt.Errorf("%s takes no outcome=", cmd)
			}
			outcome, err = sfq.ParseOutcome(v)
		case "permanent":
			if cmd != "finish" {
				return fmt.Errorf("%s takes no permanent=", cmd)
			}
			permanent, err = strconv.ParseBool(v)
		case "snooze":
			if cmd != "finish" {
				return fmt.Errorf("%s takes no snooze=", cmd)
			}
			snooze, err = durationMs(k, v)
		default:
			return fmt.Errorf("unknown %s key %q", cmd, k)
		}
		if err != nil {
			return err
		}
	}
	switch cmd {
	case "start":
		return rn.t.Start(rn.now, id, attempt, worker)
	case "heartbeat":
		return rn.t.Heartbeat(rn.now, id, attempt, worker, cpu)
	case "finish":
		if !opts.has("cpu") && outcome != sfq.OutcomeUnknownKind {
			// unknown_kind: not a run of the job, never billed.
			return fmt.Errorf("finish needs cpu=")
		}
		if permanent && outcome != sfq.OutcomeFailed {
			return fmt.Errorf("finish permanent=true needs outcome=failed")
		}
		if (outcome == sfq.OutcomeSnoozed) != opts.has("snooze") {
			return fmt.Errorf("finish outcome=snoozed goes with snooze=DUR, and snooze= with outcome=snoozed")
		}
		return rn.t.Finish(rn.now, id, attempt, worker, outcome, cpu, permanent, snooze)
	case "cancel":
		return rn.t.Cancel(rn.now, id)
	case "release":
		if len(pos) != 1 || len(opts) > 0 {
			return fmt.Errorf("usage: release JOB")
		}
		return rn.t.Release(rn.now, id)
	case "expire":
		if len(pos) != 2 {
			return fmt.Errorf("usage: expire JOB ack|lease|timeout|ttl")
		}
		kinds := map[string]sfq.InputKind{"ack": sfq.InExpireAck, "lease": sfq.InExpireLease, "timeout": sfq.InExpireTimeout, "ttl": sfq.InExpireTTL}
		kind, ok := kinds[pos[1]]
		if !ok {
			return fmt.Errorf("bad expiry %q: want ack, lease, timeout or ttl", pos[1])
		}
		return rn.t.Expire(rn.now, id, attempt, kind)
	}
	return nil
}
