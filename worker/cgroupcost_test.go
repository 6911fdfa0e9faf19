//go:build linux && amd64

package worker

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
	"unsafe"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/worker/runner"
)

// firstInstruction is a static x86-64 program whose first instructions
// read CLOCK_MONOTONIC (clock_gettime) and write it to stdout, then exit
// 0: the time its first instruction ran, with nothing of a libc or a
// runtime before it.
func firstInstruction() []byte {
	code := []byte{
		0x48, 0x83, 0xec, 0x10, // sub rsp, 16
		0xb8, 0xe4, 0x00, 0x00, 0x00, // mov eax, 228 (clock_gettime)
		0xbf, 0x01, 0x00, 0x00, 0x00, // mov edi, 1 (CLOCK_MONOTONIC)
		0x48, 0x89, 0xe6, // mov rsi, rsp
		0x0f, 0x05, // syscall
		0xb8, 0x01, 0x00, 0x00, 0x00, // mov eax, 1 (write)
		0xbf, 0x01, 0x00, 0x00, 0x00, // mov edi, 1
		0x48, 0x89, 0xe6, // mov rsi, rsp
		0xba, 0x10, 0x00, 0x00, 0x00, // mov edx, 16
		0x0f, 0x05, // syscall
		0xb8, 0x3c, 0x00, 0x00, 0x00, // mov eax, 60 (exit)
		0x31, 0xff, // xor edi, edi
		0x0f, 0x05, // syscall
	}
	const base, hdr = 0x400000, 64 + 56
	le := binary.LittleEndian
	b := []byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	b = le.AppendUint16(b, 2)    // ET_EXEC
	b = le.AppendUint16(b, 0x3e) // x86-64
	b = le.AppendUint32(b, 1)
	b = le.AppendUint64(b, base+hdr) // entry
	b = le.AppendUint64(b, 64)       // program headers
	b = le.AppendUint64(b, 0)        // no section headers
	b = le.AppendUint32(b, 0)
	b = le.AppendUint16(b, 64)
	b = le.AppendUint16(b, 56)
	b = le.AppendUint16(b, 1)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint32(b, 1) // PT_LOAD
	b = le.AppendUint32(b, 5) // R+X
	b = le.AppendUint64(b, 0)
	b = le.AppendUint64(b, base)
	b = le.AppendUint64(b, base)
	b = le.AppendUint64(b, uint64(hdr+len(code)))
	b = le.AppendUint64(b, uint64(hdr+len(code)))
	b = le.AppendUint64(b, 0x1000)
	return append(b, code...)
}

func monotonic() time.Duration {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// TestCgroupCost measures what a run's cgroup costs: the time from the
// Assign (ProcessRunner.Start called) to the job's first instruction, and
// to the run's end (Done), over zero-length jobs, with a cgroup per run
// and without, alternating. It runs only with BARISTA_CGROUP_COST=N (the
// number of jobs of each kind, e.g. 1000) and where the host gives
// cgroups:
//
//	BARISTA_CGROUP_COST=1000 go test -run TestCgroupCost -v ./worker/
func TestCgroupCost(t *testing.T) {
	var n int
	if _, err := fmt.Sscan(os.Getenv("BARISTA_CGROUP_COST"), &n); err != nil || n <= 0 {
		t.Skip("a measurement: set BARISTA_CGROUP_COST=N (jobs of each kind) to run it")
	}
	s := testCgroupSetup(t, DefaultSizeLimits())
	c, _, err := OpenCgroups(s)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	prog := filepath.Join(dir, "first")
	if err := os.WriteFile(prog, firstInstruction(), 0o755); err != nil {
		t.Fatal(err)
	}
	payload, err := runner.EncodePayload(runner.Spec{Argv: []string{prog}})
	if err != nil {
		t.Fatal(err)
	}
	runners := map[string]*ProcessRunner{}
	for name, cg := range map[string]*runner.Cgroups{"without": nil, "with": c} {
		if runners[name], err = NewProcessRunner(ProcessConfig{WorkDir: filepath.Join(dir, name), WorkerID: "w1", Cgroups: cg, Limits: DefaultSizeLimits()}); err != nil {
			t.Fatal(err)
		}
	}
	first := map[string][]time.Duration{}
	whole := map[string][]time.Duration{}
	for i := range 2 * n {
		name := [2]string{"without", "with"}[i%2]
		a := &pb.Assign{Job: uint64(i + 1), Attempt: 1, Size: pb.Size_MD, Payload: payload}
		t0 := monotonic()
		run, err := runners[name].Start(a)
		if err != nil {
			t.Fatal(err)
		}
		<-run.Done()
		end := monotonic()
		res := run.Result()
		if res.ExitCode != 0 || len(res.StdoutTail) != 16 {
			t.Fatalf("run %d (%s): %+v", i, name, res)
		}
		sec, nsec := binary.LittleEndian.Uint64([]byte(res.StdoutTail[:8])), binary.LittleEndian.Uint64([]byte(res.StdoutTail[8:]))
		at := time.Duration(sec)*time.Second + time.Duration(nsec)
		first[name] = append(first[name], at-t0)
		whole[name] = append(whole[name], end-t0)
		if name == "with" && res.CPUSource != pb.CpuSource_CPU_SOURCE_CGROUP {
			t.Fatalf("run %d with a cgroup: CPU from %v", i, res.CPUSource)
		}
	}
	for _, name := range []string{"without", "with"} {
		t.Logf("%-7s a cgroup: Assign to first instruction %s; Assign to the run reported done %s", name, stats(first[name]), stats(whole[name]))
	}
}

func stats(d []time.Duration) string {
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	q := func(p float64) time.Duration { return d[int(p*float64(len(d)-1))] }
	r := func(x time.Duration) time.Duration { return x.Round(time.Microsecond) }
	return fmt.Sprintf("mean %v p50 %v p90 %v p99 %v (n=%d)", r(sum/time.Duration(len(d))), r(q(0.5)), r(q(0.9)), r(q(0.99)), len(d))
}
