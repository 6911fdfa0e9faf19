package rpc

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Bounds of worker messages, checked at the edge before anything is
// proposed: nothing a worker sends reaches the log larger than Apply
// would keep it, and nothing Apply would refuse reaches it at all.
const (
	// MaxHelloRunning bounds Hello.running: a worker holds one job, and a
	// few ended runs may still wait for their acknowledgement.
	MaxHelloRunning = 8
	// MaxHelloVersion bounds Hello.version, in bytes.
	MaxHelloVersion = 64
	// MinExitCode and MaxExitCode bound a reported exit code: Apply's
	// bounds (fsm.MinExitCode), a POSIX exit status or -1 for a run ended
	// by a signal.
	MinExitCode, MaxExitCode = fsm.MinExitCode, fsm.MaxExitCode
)

// checkHello validates a Hello (INVALID_ARGUMENT naming the field and the
// rule) and returns the worker's size and pool ("" for the pool default,
// whether the Hello names none or "default").
func checkHello(h *pb.Hello) (sfq.Size, string, error) {
	if err := sfq.ValidateName("worker_id", h.WorkerId); err != nil {
		r := *sfq.RefusalOf(err)
		r.Field, r.Msg = "hello."+r.Field, "hello."+r.Msg
		return 0, "", refusalErr(&r)
	}
	size, err := fsm.SizeFromPB(h.Size)
	if err != nil {
		return 0, "", helloInvalid("size", "must be sm, md or lg (got %v)", h.Size)
	}
	if len(h.Version) > MaxHelloVersion {
		return 0, "", helloInvalid("version", "%d bytes, at most %d", len(h.Version), MaxHelloVersion)
	}
	if len(h.Running) > MaxHelloRunning {
		return 0, "", helloInvalid("running", "%d jobs, at most %d (a worker runs one job at a time)", len(h.Running), MaxHelloRunning)
	}
	for i, r := range h.Running {
		if msg := checkRef("hello.running", r.Job, r.Attempt, r.CpuMs); msg != "" {
			return 0, "", helloInvalid(fmt.Sprintf("running[%d]", i), "%s", msg)
		}
	}
	pool := h.Pool
	if pool == sfq.DefaultPoolName {
		pool = ""
	}
	if pool != "" {
		if err := sfq.ValidatePoolName(pool); err != nil {
			return 0, "", helloInvalid("pool", "%v", err)
		}
	}
	return size, pool, nil
}

// helloInvalid refuses a field of a Hello (INVALID_ARGUMENT naming
// hello.FIELD).
func helloInvalid(field, format string, args ...any) error {
	return refusalErr(sfq.Refusef(sfq.CodeInvalid, "", "hello."+field, format, args...))
}

// checkRef checks the job, attempt and CPU of a report; "" if they are
// valid.
func checkRef(field string, job uint64, attempt uint32, cpuMs int64) string {
	switch {
	case job == 0:
		return field + ".job: must not be 0"
	case attempt == 0:
		return field + ".attempt: must not be 0"
	case cpuMs < 0 || cpuMs > sfq.MaxEstCostMs:
		return fmt.Sprintf("%s.cpu_ms: %d is out of range 0..%d", field, cpuMs, int64(sfq.MaxEstCostMs))
	}
	return ""
}

// checkMessage validates one message of a session (any but Hello) at the
// edge. It never modifies msg; the message it returns is the one to act
// on. What a worker may legitimately send too long is cut: a stderr or
// stdout tail keeps its last 4 KiB (sfq.OutputTail). What no correct
// worker sends is
// refused:
//   - a job report (Started, Heartbeat of a job, Finished) that breaks a
//     rule returns refused, the reason naming the field and the rule: the
//     leader answers Reject for that attempt (the worker drops the run)
//     and proposes nothing;
//   - a message that names no job it could be refused for (empty, Hello,
//     a report of job 0) is an INVALID_ARGUMENT error: the stream ends.
func checkMessage(msg *pb.WorkerMessage) (out *pb.WorkerMessage, refused string, err error) {
	switch m := msg.GetMsg().(type) {
	case *pb.WorkerMessage_Ready:
		return msg, "", nil
	case *pb.WorkerMessage_Heartbeat:
		hb := m.Heartbeat
		if hb.Job == 0 {
			return msg, "", nil // an idle slot: nothing else is read
		}
		return msg, checkRef("heartbeat", hb.Job, hb.Attempt, hb.CpuMs), nil
	case *pb.WorkerMessage_Started:
		st := m.Started
		if st.Job == 0 {
			return nil, "", fieldErr(codes.InvalidArgument, "started.job", "must not be 0")
		}
		return msg, checkRef("started", st.Job, st.Attempt, 0), nil
	case *pb.WorkerMessage_Finished:
		fin := m.Finished
		if fin.Job == 0 {
			return nil, "", fieldErr(codes.InvalidArgument, "finished.job", "must not be 0")
		}
		if r := checkRef("finished", fin.Job, fin.Attempt, fin.CpuMs); r != "" {
			return msg, r, nil
		}
		if _, err := fsm.OutcomeFromPB(fin.Outcome); err != nil {
			return msg, fmt.Sprintf("finished.outcome: must be ok, failed, cancelled, snoozed or unknown_kind (got %v)", fin.Outcome), nil
		}
		if fin.ExitCode < MinExitCode || fin.ExitCode > MaxExitCode {
			return msg, fmt.Sprintf("finished.exit_code: %d is out of range %d..%d", fin.ExitCode, MinExitCode, MaxExitCode), nil
		}
		if _, _, err := fsm.RunDetailsFromPB(fin.CpuSource, 0); err != nil {
			return msg, fmt.Sprintf("finished.cpu_source: must be proc or cgroup, or unset (got %v)", fin.CpuSource), nil
		}
		if _, _, err := fsm.RunDetailsFromPB(0, fin.Failure); err != nil {
			return msg, fmt.Sprintf("finished.failure: must be oom_killed, or unset (got %v)", fin.Failure), nil
		}
		stderr, stdout := sfq.OutputTail(fin.StderrTail), sfq.OutputTail(fin.StdoutTail)
		if stderr != fin.StderrTail || stdout != fin.StdoutTail {
			cut := proto.CloneOf(fin)
			cut.StderrTail, cut.StdoutTail = stderr, stdout
			return &pb.WorkerMessage{Msg: &pb.WorkerMessage_Finished{Finished: cut}}, "", nil
		}
		return msg, "", nil
	case *pb.WorkerMessage_Hello:
		return nil, "", fieldErr(codes.InvalidArgument, "hello", "only the first message of a stream may be Hello")
	}
	return nil, "", status.Error(codes.InvalidArgument, "empty worker message")
}

// reportRef is the (job, attempt) a job report names.
func reportRef(msg *pb.WorkerMessage) (uint64, uint32) {
	switch m := msg.GetMsg().(type) {
	case *pb.WorkerMessage_Heartbeat:
		return m.Heartbeat.Job, m.Heartbeat.Attempt
	case *pb.WorkerMessage_Started:
		return m.Started.Job, m.Started.Attempt
	case *pb.WorkerMessage_Finished:
		return m.Finished.Job, m.Finished.Attempt
	}
	return 0, 0
}

// startedCommand is the command of a checked Started of worker.
func startedCommand(worker string, st *pb.JobStarted) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Started{Started: &clusterpb.Started{Job: st.Job, Attempt: st.Attempt, WorkerId: worker}}}
}

// finishedCommand is the command of a checked Finished of worker; a run
// the worker marks permanent (it can never succeed) keeps the mark, and
// the run's CPU source and failure go along: Apply reads them from
// feature level 7 on.
func finishedCommand(worker string, fin *pb.JobFinished) *clusterpb.Command {
	f := &clusterpb.Finished{
		Job: fin.Job, Attempt: fin.Attempt, WorkerId: worker, Outcome: fin.Outcome, CpuMs: fin.CpuMs,
		ExitCode: fin.ExitCode, StderrTail: fin.StderrTail, StdoutTail: fin.StdoutTail,
		Permanent: fin.Permanent && fin.Outcome == pb.Outcome_FAILED, CpuSource: fin.CpuSource}
	switch fin.Outcome {
	case pb.Outcome_FAILED:
		f.Failure = fin.Failure
	case pb.Outcome_SNOOZED:
		f.SnoozeMs = fin.SnoozeMs
	}
	return &clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: f}}
}
