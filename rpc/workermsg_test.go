package rpc

import (
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// TestCheckHello: every bound of a Hello, with its exact message.
func TestCheckHello(t *testing.T) {
	run := func(n int) []*pb.RunningJob {
		out := make([]*pb.RunningJob, n)
		for i := range out {
			out[i] = &pb.RunningJob{Job: uint64(i + 1), Attempt: 1}
		}
		return out
	}
	cases := []struct {
		name  string
		hello *pb.Hello
		want  string // "" = valid
		pool  string // of a valid one
	}{
		{"valid", &pb.Hello{WorkerId: "w1", Size: pb.Size_LG, Version: "1", Running: run(MaxHelloRunning)}, "", ""},
		{"pool default", &pb.Hello{WorkerId: "w1", Size: pb.Size_LG, Pool: "default"}, "", ""},
		{"pool gpu", &pb.Hello{WorkerId: "w1", Size: pb.Size_LG, Pool: "gpu"}, "", "gpu"},
		{"bad pool", &pb.Hello{WorkerId: "w1", Size: pb.Size_LG, Pool: "GPU"}, `rpc error: code = InvalidArgument desc = hello.pool: pool name "GPU" has 'G' at byte 0 (want a-z, 0-9 and -, not starting with -)`, ""},
		{"long pool", &pb.Hello{WorkerId: "w1", Size: pb.Size_LG, Pool: strings.Repeat("p", 64)}, `rpc error: code = InvalidArgument desc = hello.pool: pool name "` + strings.Repeat("p", 64) + `" (want 1 to 63 of a-z, 0-9 and -, not starting with -)`, ""},
		{"no id", &pb.Hello{Size: pb.Size_SM}, "rpc error: code = InvalidArgument desc = hello.worker_id is empty", ""},
		{"id with a space", &pb.Hello{WorkerId: "w 1", Size: pb.Size_SM}, `rpc error: code = InvalidArgument desc = hello.worker_id "w 1" has a space at byte 1`, ""},
		{"long id", &pb.Hello{WorkerId: strings.Repeat("w", 257), Size: pb.Size_SM}, "rpc error: code = InvalidArgument desc = hello.worker_id is 257 bytes (max 256)", ""},
		{"no size", &pb.Hello{WorkerId: "w1"}, "rpc error: code = InvalidArgument desc = hello.size: must be sm, md or lg (got SIZE_UNSPECIFIED)", ""},
		{"bad size", &pb.Hello{WorkerId: "w1", Size: 9}, "rpc error: code = InvalidArgument desc = hello.size: must be sm, md or lg (got 9)", ""},
		{"long version", &pb.Hello{WorkerId: "w1", Size: pb.Size_SM, Version: strings.Repeat("v", 65)}, "rpc error: code = InvalidArgument desc = hello.version: 65 bytes, at most 64", ""},
		{"many running", &pb.Hello{WorkerId: "w1", Size: pb.Size_SM, Running: run(MaxHelloRunning + 1)}, "rpc error: code = InvalidArgument desc = hello.running: 9 jobs, at most 8 (a worker runs one job at a time)", ""},
		{"running job 0", &pb.Hello{WorkerId: "w1", Size: pb.Size_SM, Running: []*pb.RunningJob{{Attempt: 1}}}, "rpc error: code = InvalidArgument desc = hello.running[0]: hello.running.job: must not be 0", ""},
		{"running attempt 0", &pb.Hello{WorkerId: "w1", Size: pb.Size_SM, Running: []*pb.RunningJob{{Job: 1, Attempt: 1}, {Job: 2}}}, "rpc error: code = InvalidArgument desc = hello.running[1]: hello.running.attempt: must not be 0", ""},
		{"running negative cpu", &pb.Hello{WorkerId: "w1", Size: pb.Size_SM, Running: []*pb.RunningJob{{Job: 1, Attempt: 1, CpuMs: -1}}}, "rpc error: code = InvalidArgument desc = hello.running[0]: hello.running.cpu_ms: -1 is out of range 0..31536000000", ""},
	}
	for _, c := range cases {
		size, pool, err := checkHello(c.hello)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		if err == nil && (size != sfq.LG || pool != c.pool) {
			t.Errorf("%s: size %v pool %q, want pool %q", c.name, size, pool, c.pool)
		}
	}
}

// TestCheckMessage: what is refused (Reject, or the stream ends) and
// what is cut, with the exact reasons.
func TestCheckMessage(t *testing.T) {
	fin := func(f *pb.JobFinished) *pb.WorkerMessage {
		return &pb.WorkerMessage{Msg: &pb.WorkerMessage_Finished{Finished: f}}
	}
	hb := func(h *pb.JobHeartbeat) *pb.WorkerMessage {
		return &pb.WorkerMessage{Msg: &pb.WorkerMessage_Heartbeat{Heartbeat: h}}
	}
	st := func(s *pb.JobStarted) *pb.WorkerMessage {
		return &pb.WorkerMessage{Msg: &pb.WorkerMessage_Started{Started: s}}
	}
	cases := []struct {
		name    string
		msg     *pb.WorkerMessage
		refused string
		err     string
	}{
		{"ready", &pb.WorkerMessage{Msg: &pb.WorkerMessage_Ready{Ready: &pb.Ready{Credit: 1 << 63}}}, "", ""},
		{"idle heartbeat", hb(&pb.JobHeartbeat{Seq: 9, CpuMs: -5}), "", ""},
		{"heartbeat", hb(&pb.JobHeartbeat{Job: 1, Attempt: 2, CpuMs: 3}), "", ""},
		{"heartbeat attempt 0", hb(&pb.JobHeartbeat{Job: 1}), "heartbeat.attempt: must not be 0", ""},
		{"heartbeat negative cpu", hb(&pb.JobHeartbeat{Job: 1, Attempt: 1, CpuMs: -1}), "heartbeat.cpu_ms: -1 is out of range 0..31536000000", ""},
		{"heartbeat huge cpu", hb(&pb.JobHeartbeat{Job: 1, Attempt: 1, CpuMs: sfq.MaxEstCostMs + 1}), "heartbeat.cpu_ms: 31536000001 is out of range 0..31536000000", ""},
		{"started", st(&pb.JobStarted{Job: 1, Attempt: 1}), "", ""},
		{"started job 0", st(&pb.JobStarted{Attempt: 1}), "", "rpc error: code = InvalidArgument desc = started.job: must not be 0"},
		{"started attempt 0", st(&pb.JobStarted{Job: 1}), "started.attempt: must not be 0", ""},
		{"finished", fin(&pb.JobFinished{Job: 1, Attempt: 1, Outcome: pb.Outcome_CANCELLED, CpuMs: sfq.MaxEstCostMs, ExitCode: -1}), "", ""},
		{"finished job 0", fin(&pb.JobFinished{Attempt: 1, Outcome: pb.Outcome_OK}), "", "rpc error: code = InvalidArgument desc = finished.job: must not be 0"},
		{"finished attempt 0", fin(&pb.JobFinished{Job: 1, Outcome: pb.Outcome_OK}), "finished.attempt: must not be 0", ""},
		{"finished negative cpu", fin(&pb.JobFinished{Job: 1, Attempt: 1, Outcome: pb.Outcome_OK, CpuMs: -7}), "finished.cpu_ms: -7 is out of range 0..31536000000", ""},
		{"finished no outcome", fin(&pb.JobFinished{Job: 1, Attempt: 1}), "finished.outcome: must be ok, failed, cancelled, snoozed or unknown_kind (got OUTCOME_UNSPECIFIED)", ""},
		{"finished bad outcome", fin(&pb.JobFinished{Job: 1, Attempt: 1, Outcome: 6}), "finished.outcome: must be ok, failed, cancelled, snoozed or unknown_kind (got 6)", ""},
		{"finished exit 256", fin(&pb.JobFinished{Job: 1, Attempt: 1, Outcome: pb.Outcome_FAILED, ExitCode: 256}), "finished.exit_code: 256 is out of range -1..255", ""},
		{"finished exit -2", fin(&pb.JobFinished{Job: 1, Attempt: 1, Outcome: pb.Outcome_FAILED, ExitCode: -2}), "finished.exit_code: -2 is out of range -1..255", ""},
		{"finished from a cgroup, OOM-killed", fin(&pb.JobFinished{Job: 1, Attempt: 1, Outcome: pb.Outcome_FAILED, ExitCode: -1, CpuSource: pb.CpuSource_CPU_SOURCE_CGROUP, Failure: pb.RunFailure_OOM_KILLED}), "", ""},
		{"finished bad cpu source", fin(&pb.JobFinished{Job: 1, Attempt: 1, Outcome: pb.Outcome_OK, CpuSource: 3}), "finished.cpu_source: must be proc or cgroup, or unset (got 3)", ""},
		{"finished bad failure", fin(&pb.JobFinished{Job: 1, Attempt: 1, Outcome: pb.Outcome_FAILED, Failure: 2}), "finished.failure: must be oom_killed, or unset (got 2)", ""},
		{"hello", &pb.WorkerMessage{Msg: &pb.WorkerMessage_Hello{Hello: &pb.Hello{WorkerId: "w1"}}}, "", "rpc error: code = InvalidArgument desc = hello: only the first message of a stream may be Hello"},
		{"empty", &pb.WorkerMessage{}, "", "rpc error: code = InvalidArgument desc = empty worker message"},
	}
	for _, c := range cases {
		before := proto.Clone(c.msg)
		out, refused, err := checkMessage(c.msg)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if refused != c.refused || gotErr != c.err {
			t.Errorf("%s: refused %q, error %q; want %q, %q", c.name, refused, gotErr, c.refused, c.err)
		}
		if err == nil && !proto.Equal(out, c.msg) {
			t.Errorf("%s: changed to %v", c.name, out)
		}
		if !proto.Equal(before, c.msg) {
			t.Errorf("%s: the input was modified", c.name)
		}
	}

	// A long tail is cut to its last 4 KiB, at a character boundary; the
	// input is untouched.
	long := strings.Repeat("é", 3000) + "the end" // 6007 bytes
	in := fin(&pb.JobFinished{Job: 1, Attempt: 1, Outcome: pb.Outcome_FAILED, ExitCode: 1, StderrTail: long})
	out, refused, err := checkMessage(in)
	if err != nil || refused != "" {
		t.Fatalf("long tail: %q %v", refused, err)
	}
	// 4096 bytes would split an "é": the cut keeps 4095.
	if got := out.GetFinished().StderrTail; got != long[len(long)-4095:] || !utf8.ValidString(got) {
		t.Errorf("cut tail: %d bytes %q...", len(got), got[:10])
	}
	if in.GetFinished().StderrTail != long {
		t.Error("the input tail was modified")
	}
	cmd := finishedCommand("w1", out.GetFinished())
	if n := proto.Size(cmd); n > sfq.MaxOutputTail+64 {
		t.Errorf("the Finished command is %d bytes", n)
	}

	// A stdout tail is cut alike, and carried to the command; a short
	// stderr tail beside it is kept as it is.
	in = fin(&pb.JobFinished{Job: 1, Attempt: 1, Outcome: pb.Outcome_OK, StderrTail: "warn\n", StdoutTail: long})
	out, refused, err = checkMessage(in)
	if err != nil || refused != "" {
		t.Fatalf("long stdout tail: %q %v", refused, err)
	}
	if got := out.GetFinished(); got.StdoutTail != long[len(long)-4095:] || got.StderrTail != "warn\n" || in.GetFinished().StdoutTail != long {
		t.Errorf("cut stdout tail: %d bytes, stderr %q", len(got.StdoutTail), got.StderrTail)
	}
	if c := finishedCommand("w1", out.GetFinished()).GetFinished(); c.StdoutTail != long[len(long)-4095:] || c.StderrTail != "warn\n" {
		t.Errorf("the command carries stdout %d bytes, stderr %q", len(c.StdoutTail), c.StderrTail)
	}
	if n := proto.Size(finishedCommand("w1", out.GetFinished())); n > 2*sfq.MaxOutputTail+64 {
		t.Errorf("the Finished command is %d bytes", n)
	}
}

// FuzzWorkerMessage: checking and converting any worker message never
// panics, and what passes is bounded: a Hello within its limits, a
// command carrying at most 4 KiB of valid UTF-8 in each tail and nothing
// Apply would refuse for its range. tail replaces a Finished's stderr and
// stdout tails with arbitrary bytes when it is not empty (gRPC would refuse
// invalid UTF-8 before the check; the check must not rely on it).
func FuzzWorkerMessage(f *testing.F) {
	seeds := []*pb.WorkerMessage{
		{Msg: &pb.WorkerMessage_Hello{Hello: &pb.Hello{WorkerId: "gpu-1", Size: pb.Size_MD, Version: "1", Running: []*pb.RunningJob{{Job: 3, Attempt: 2, CpuMs: 10, Finished: true}}}}},
		{Msg: &pb.WorkerMessage_Ready{Ready: &pb.Ready{Credit: 7}}},
		{Msg: &pb.WorkerMessage_Started{Started: &pb.JobStarted{Job: 3, Attempt: 2}}},
		{Msg: &pb.WorkerMessage_Heartbeat{Heartbeat: &pb.JobHeartbeat{Job: 3, Attempt: 2, CpuMs: 500, Seq: 4}}},
		{Msg: &pb.WorkerMessage_Finished{Finished: &pb.JobFinished{Job: 3, Attempt: 2, Outcome: pb.Outcome_FAILED, CpuMs: 900, ExitCode: 2, StderrTail: "Traceback...\n"}}},
	}
	for _, m := range seeds {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, []byte{})
	}
	f.Add([]byte{0x2a, 0x00}, []byte("\xff\xfe"+strings.Repeat("é", 2100)))
	f.Fuzz(func(t *testing.T, data, tail []byte) {
		var msg pb.WorkerMessage
		if err := proto.Unmarshal(data, &msg); err != nil {
			return
		}
		if fin := msg.GetFinished(); fin != nil && len(tail) > 0 {
			fin.StderrTail, fin.StdoutTail = string(tail), string(tail[len(tail)/2:])
		}
		if h := msg.GetHello(); h != nil {
			if _, pool, err := checkHello(h); err == nil {
				if len(h.Running) > MaxHelloRunning || len(h.WorkerId) > sfq.MaxNameLen || len(h.Version) > MaxHelloVersion ||
					(pool != "" && sfq.ValidatePoolName(pool) != nil) {
					t.Fatalf("accepted %v", h)
				}
			}
		}
		out, refused, err := checkMessage(&msg)
		if err != nil || refused != "" {
			return
		}
		var cmd *clusterpb.Command
		switch m := out.Msg.(type) {
		case *pb.WorkerMessage_Started:
			cmd = startedCommand("w1", m.Started)
		case *pb.WorkerMessage_Finished:
			cmd = finishedCommand("w1", m.Finished)
			fin := cmd.GetFinished()
			for _, tail := range []string{fin.StderrTail, fin.StdoutTail} {
				if len(tail) > sfq.MaxOutputTail || !utf8.ValidString(tail) {
					t.Fatalf("tail of %d bytes, valid UTF-8 %v", len(tail), utf8.ValidString(tail))
				}
			}
			if fin.CpuMs < 0 || fin.CpuMs > sfq.MaxEstCostMs || fin.Job == 0 || fin.Attempt == 0 {
				t.Fatalf("accepted %v", fin)
			}
		default:
			return
		}
		b, err := proto.Marshal(cmd)
		if err != nil {
			t.Fatalf("the command does not encode: %v", err)
		}
		if len(b) > 2*sfq.MaxOutputTail+64 {
			t.Fatalf("a %d-byte command", len(b))
		}
	})
}

// TestFinishedCommandRunDetails: the run's CPU source goes into the
// command; its failure only with outcome failed.
func TestFinishedCommandRunDetails(t *testing.T) {
	for _, c := range []struct {
		outcome pb.Outcome
		want    pb.RunFailure
	}{{pb.Outcome_FAILED, pb.RunFailure_OOM_KILLED}, {pb.Outcome_OK, pb.RunFailure_RUN_FAILURE_UNSPECIFIED}} {
		f := finishedCommand("w1", &pb.JobFinished{Job: 1, Attempt: 1, Outcome: c.outcome, CpuSource: pb.CpuSource_CPU_SOURCE_CGROUP, Failure: pb.RunFailure_OOM_KILLED}).GetFinished()
		if f.CpuSource != pb.CpuSource_CPU_SOURCE_CGROUP || f.Failure != c.want {
			t.Errorf("%v: cpu_source %v failure %v, want cgroup %v", c.outcome, f.CpuSource, f.Failure, c.want)
		}
	}
}
