package worker

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/worker/runner"
)

// SizeLimits are the limits of a run's cgroup for each job size (sm, md,
// lg, in that order): a job gets its own size's, whatever the worker's.
type SizeLimits [3]runner.Limits

// DefaultSizeLimits are the limits a worker sets unless told otherwise
// (barista worker --memory-max, --memory-swap-max, --pids-max,
// --cpu-max): memory 1, 4 and 8 GiB, no swap, 1024, 4096 and 16384
// processes and threads, and no CPU limit (CPU is billed, not capped).
func DefaultSizeLimits() SizeLimits {
	return SizeLimits{
		{MemoryMax: 1 << 30, MemorySwapMax: 0, PidsMax: 1024},
		{MemoryMax: 4 << 30, MemorySwapMax: 0, PidsMax: 4096},
		{MemoryMax: 8 << 30, MemorySwapMax: 0, PidsMax: 16384},
	}
}

// For returns the limits of job size s (sm for an unknown size).
func (l SizeLimits) For(s pb.Size) runner.Limits {
	if s >= pb.Size_SM && s <= pb.Size_LG {
		return l[s-pb.Size_SM]
	}
	return l[0]
}

// Controllers returns the cgroup controllers the limits need, in a fixed
// order.
func (l SizeLimits) Controllers() []string {
	var out []string
	for _, c := range []string{"memory", "pids", "cpu"} {
		for _, sl := range l {
			if slices.Contains(sl.Controllers(), c) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// The limit settings, as barista worker names them.
var limitNames = []struct {
	Flag, File, Controller string
	field                  func(*runner.Limits) *int64
}{
	{"memory-max", "memory.max", "memory", func(l *runner.Limits) *int64 { return &l.MemoryMax }},
	{"memory-swap-max", "memory.swap.max", "memory", func(l *runner.Limits) *int64 { return &l.MemorySwapMax }},
	{"pids-max", "pids.max", "pids", func(l *runner.Limits) *int64 { return &l.PidsMax }},
	{"cpu-max", "cpu.max", "cpu", func(l *runner.Limits) *int64 { return &l.CPUMax }},
}

var sizeNames = [3]string{"sm", "md", "lg"}

// SetLimit sets one limit (flag is memory-max, memory-swap-max, pids-max
// or cpu-max) from a list such as "sm=1GiB,lg=16GiB": the sizes named
// change, the others keep theirs. A value is "max" (no limit), a number
// of bytes with an optional K, M, G or T suffix (KiB, MiB, GiB, TiB, all
// powers of 1024) for the memory limits, a count for pids-max, or CPUs
// (0.5, 2) for cpu-max.
func (l *SizeLimits) SetLimit(flag, list string) error {
	i := -1
	for k, n := range limitNames {
		if n.Flag == flag {
			i = k
		}
	}
	if i < 0 {
		return fmt.Errorf("unknown limit %q", flag)
	}
	for item := range strings.SplitSeq(list, ",") {
		size, value, ok := strings.Cut(strings.TrimSpace(item), "=")
		s := -1
		for k, n := range sizeNames {
			if n == size {
				s = k
			}
		}
		if !ok || s < 0 {
			return fmt.Errorf("%q: want SIZE=VALUE, SIZE one of sm, md, lg (e.g. sm=1GiB,md=4GiB)", item)
		}
		v, err := parseLimit(flag, value)
		if err != nil {
			return fmt.Errorf("%s: %w", size, err)
		}
		*limitNames[i].field(&l[s]) = v
	}
	return nil
}

// parseLimit reads one value of limit flag; "max" is no limit.
func parseLimit(flag, v string) (int64, error) {
	if v == "max" {
		if flag == "memory-swap-max" {
			return -1, nil
		}
		return 0, nil
	}
	switch flag {
	case "pids-max":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("%q: want a number of processes (1 or more) or max", v)
		}
		return n, nil
	case "cpu-max":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0.01 || f > 1<<20 {
			return 0, fmt.Errorf("%q: want a number of CPUs (0.01 or more, e.g. 0.5 or 2) or max", v)
		}
		return int64(f*1000 + 0.5), nil
	}
	n, err := parseBytes(v)
	if err != nil || (n == 0 && flag == "memory-max") {
		return 0, fmt.Errorf("%q: want bytes (e.g. 512MiB, 4GiB) or max", v)
	}
	return n, nil
}

func parseBytes(v string) (int64, error) {
	mult := int64(1)
	for i, suf := range []string{"K", "M", "G", "T"} {
		for _, s := range []string{suf + "iB", suf} {
			if num, ok := strings.CutSuffix(v, s); ok {
				v, mult = num, int64(1)<<(10*(i+1))
				break
			}
		}
		if mult != 1 {
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, errors.New("bad size")
	}
	return n * mult, nil
}

// String shows one limit of every size, as SetLimit reads it.
func (l SizeLimits) String(flag string) string {
	var parts []string
	for _, n := range limitNames {
		if n.Flag != flag {
			continue
		}
		for s := range l {
			parts = append(parts, sizeNames[s]+"="+formatLimit(flag, *n.field(&l[s])))
		}
	}
	return strings.Join(parts, ",")
}

func formatLimit(flag string, v int64) string {
	switch {
	case v < 0 || (v == 0 && flag != "memory-swap-max"):
		return "max"
	case flag == "pids-max":
		return strconv.FormatInt(v, 10)
	case flag == "cpu-max":
		return strconv.FormatFloat(float64(v)/1000, 'f', -1, 64)
	}
	for _, u := range []struct {
		s string
		n int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v >= u.n && v%u.n == 0 {
			return strconv.FormatInt(v/u.n, 10) + u.s
		}
	}
	return strconv.FormatInt(v, 10)
}

// Report says which of the limits c enforces.
func (l SizeLimits) Report(c *runner.Cgroups) CgroupReport {
	var r CgroupReport
	for _, n := range limitNames {
		set := false
		for s := range l {
			v := *n.field(&l[s])
			set = set || v > 0 || (n.Flag == "memory-swap-max" && v >= 0)
		}
		if !set {
			continue
		}
		line := n.File + " " + l.String(n.Flag)
		ok, why := c.Controller(n.Controller)
		switch {
		case ok:
			r.Enforced = append(r.Enforced, line)
		case len(r.Missing) > 0 && r.Missing[len(r.Missing)-1].Controller == n.Controller:
			m := &r.Missing[len(r.Missing)-1]
			m.Limits = append(m.Limits, line)
		default:
			r.Missing = append(r.Missing, MissingLimits{Controller: n.Controller, Limits: []string{line}, Why: why})
		}
	}
	return r
}

// MissingLimits are limits a host cannot enforce, for want of one
// controller.
type MissingLimits struct {
	Controller string
	Limits     []string // "memory.max sm=1GiB,md=4GiB,lg=8GiB", ...
	Why        string
}

func (m MissingLimits) String() string { return strings.Join(m.Limits, ", ") + " (" + m.Why + ")" }

// CgroupSetup says whether and where a worker gives its runs cgroups of
// their own (barista worker --cgroup-parent, --no-cgroup,
// --require-cgroup).
type CgroupSetup struct {
	// Parent is runner.CgroupConfig.Parent: where the runs' cgroups go.
	Parent string
	// Off runs every job as a bare process tree, as hosts without cgroups.
	Off bool
	// Require makes a host that cannot give every run a cgroup with all
	// of Limits an error rather than a warning.
	Require bool
	Limits  SizeLimits
	// Mountinfo and ProcCgroup: see runner.CgroupConfig (tests).
	Mountinfo, ProcCgroup string
}

// CgroupReport is what a worker's runs' cgroups enforce and what they
// cannot, for the worker's log at start.
type CgroupReport struct {
	// None says why runs get no cgroup ("" when they do): each run is
	// then a process tree, its CPU read from /proc, its kill a signal to
	// the tree, and no limit of its size is set.
	None     string
	Enforced []string // "memory.max sm=1GiB,md=4GiB,lg=8GiB", ...
	Missing  []MissingLimits
}

// OpenCgroups opens the cgroups of s. Where the host gives no writable
// cgroup v2 hierarchy it returns nil and says why in the report (an
// error with Require); a limit the hierarchy cannot enforce (its
// controller is missing) is listed in the report's Missing (an error with
// Require).
func OpenCgroups(s CgroupSetup) (*runner.Cgroups, CgroupReport, error) {
	if s.Off {
		if s.Require {
			return nil, CgroupReport{}, errors.New("cgroups are both required and turned off")
		}
		return nil, CgroupReport{None: "turned off (--no-cgroup)"}, nil
	}
	c, err := runner.OpenCgroups(runner.CgroupConfig{Parent: s.Parent, Controllers: s.Limits.Controllers(), Mountinfo: s.Mountinfo, ProcCgroup: s.ProcCgroup})
	if errors.Is(err, runner.ErrNoCgroup) {
		if s.Require {
			return nil, CgroupReport{}, fmt.Errorf("cgroups are required: %w", err)
		}
		return nil, CgroupReport{None: err.Error()}, nil
	}
	if err != nil {
		return nil, CgroupReport{}, err
	}
	rep := s.Limits.Report(c)
	if s.Require && len(rep.Missing) > 0 {
		var what []string
		for _, m := range rep.Missing {
			what = append(what, m.String())
		}
		c.Close()
		return nil, CgroupReport{}, fmt.Errorf("cgroups are required, and these limits cannot be enforced: %s; set a limit to max to do without it", strings.Join(what, "; "))
	}
	return c, rep, nil
}
