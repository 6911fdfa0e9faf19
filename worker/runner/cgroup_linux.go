//go:build linux

package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Cgroups is the cgroup v2 sub-tree a worker runs its jobs in, one
// cgroup per run (see [Cgroups.NewRun]).
type Cgroups struct {
	dir     string
	made    bool              // OpenCgroups made dir: Close removes it
	kill    bool              // cgroup.kill exists (Linux 5.14)
	enabled map[string]bool   // controllers the runs' cgroups have
	missing map[string]string // why a wanted controller is not enabled
}

// agentLeaf is the cgroup the agent moves itself into when it must
// enable controllers in a cgroup it lives in: cgroup v2 lets a cgroup
// other than the root hand controllers to its children only while no
// process lives in it.
const agentLeaf = "barista-agent"

// OpenCgroups finds the cgroup v2 hierarchy of this process, makes the
// parent cgroup and enables what it can of cfg.Controllers there. It
// leaves alone the runs' cgroups already in it: they may be a live
// agent's (see [Cgroups.RemoveLeftovers]). An error wrapping
// [ErrNoCgroup] says the host gives no writable hierarchy: the caller
// runs jobs without cgroups.
func OpenCgroups(cfg CgroupConfig) (*Cgroups, error) {
	if rel, ok := kernelBefore(5, 7); ok {
		// Starting a job inside its cgroup takes clone3's
		// CLONE_INTO_CGROUP.
		return nil, fmt.Errorf("%w: Linux %s cannot start a process inside a cgroup (CLONE_INTO_CGROUP: Linux 5.7)", ErrNoCgroup, rel)
	}
	mountinfo, self, err := cgroupFiles(cfg)
	if err != nil {
		return nil, err
	}
	mounts := parseMountinfo(mountinfo)
	if len(mounts) == 0 {
		return nil, fmt.Errorf("%w: no cgroup2 file system is mounted (the controllers are on cgroup v1, or the container has no cgroup namespace)", ErrNoCgroup)
	}
	path := parseProcCgroup(self)
	if path == "" {
		return nil, fmt.Errorf("%w: this process is in no cgroup v2 hierarchy (/proc/self/cgroup has no 0:: line)", ErrNoCgroup)
	}
	var own string
	for _, m := range mounts {
		if d, ok := cgroupDir(m[0], m[1], path); ok && isDir(d) {
			own = d
			break
		}
	}
	if own == "" {
		return nil, fmt.Errorf("%w: this process's cgroup %s is not under any mounted cgroup2 file system", ErrNoCgroup, path)
	}
	parent := filepath.Clean(cfg.Parent)
	if !filepath.IsAbs(cfg.Parent) {
		parent = filepath.Join(own, cfg.Parent)
		if parent != own && !strings.HasPrefix(parent, own+"/") {
			return nil, fmt.Errorf("cgroup parent %q leaves this process's cgroup %s", cfg.Parent, own)
		}
	} else if !slices.ContainsFunc(mounts, func(m [2]string) bool { return isUnder(parent, m[0]) }) {
		return nil, fmt.Errorf("cgroup parent %s is not in a mounted cgroup2 file system", parent)
	}
	made := !isDir(parent)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("%w: cannot make the cgroup %s: %w", ErrNoCgroup, parent, err)
	}
	if !isCgroup(parent) {
		return nil, fmt.Errorf("%w: %s is not a cgroup (it has no cgroup.procs)", ErrNoCgroup, parent)
	}
	// The parent may exist and be read-only to this process: make sure a
	// run's cgroup can be made in it.
	probe := filepath.Join(parent, "barista-probe-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("%w: cannot make a cgroup in %s: %w", ErrNoCgroup, parent, err)
	}
	for _, f := range []string{"cgroup.events", "cpu.stat"} {
		if _, err := os.Stat(filepath.Join(probe, f)); err != nil {
			syscall.Rmdir(probe)
			return nil, fmt.Errorf("%w: a cgroup of %s has no %s: %w", ErrNoCgroup, parent, f, err)
		}
	}
	_, killErr := os.Stat(filepath.Join(probe, "cgroup.kill"))
	if err := syscall.Rmdir(probe); err != nil {
		return nil, fmt.Errorf("cgroups: remove the probe %s: %w", probe, err)
	}
	c := &Cgroups{dir: parent, made: made, kill: killErr == nil, enabled: map[string]bool{}, missing: map[string]string{}}
	for _, ctrl := range cfg.Controllers {
		if why := enableController(own, parent, ctrl); why != "" {
			c.missing[ctrl] = why
		} else {
			c.enabled[ctrl] = true
		}
	}
	return c, nil
}

func cgroupFiles(cfg CgroupConfig) (mountinfo, self []byte, err error) {
	mi, pc := cfg.Mountinfo, cfg.ProcCgroup
	if mi == "" {
		mi = "/proc/self/mountinfo"
	}
	if pc == "" {
		pc = "/proc/self/cgroup"
	}
	if mountinfo, err = os.ReadFile(mi); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrNoCgroup, err)
	}
	if self, err = os.ReadFile(pc); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrNoCgroup, err)
	}
	return mountinfo, self, nil
}

// Dir is the parent cgroup's directory.
func (c *Cgroups) Dir() string { return c.dir }

// RemoveAll kills what runs in the parent's sub-tree, waiting up to wait
// for it to be gone, and removes the sub-tree, the parent included
// (tools and tests that gave workers a parent of their own).
func (c *Cgroups) RemoveAll(wait time.Duration) error {
	return (&Cgroup{dir: c.dir, fd: -1, kill: c.kill}).destroy(wait)
}

// Close removes the parent cgroup if OpenCgroups made it and no run's
// cgroup is left in it (call it once no run is live).
func (c *Cgroups) Close() error {
	if !c.made {
		return nil
	}
	if err := syscall.Rmdir(c.dir); err != nil && err != syscall.ENOENT {
		return fmt.Errorf("cgroups: remove %s: %w", c.dir, err)
	}
	return nil
}

// CanKill reports whether a run's cgroup has cgroup.kill (Linux 5.14 on).
// Without it the agent kills every process cgroup.procs lists until the
// cgroup is empty.
func (c *Cgroups) CanKill() bool { return c.kill }

// Controller reports whether the runs' cgroups have the controller, and
// if not, why.
func (c *Cgroups) Controller(name string) (bool, string) {
	if c.enabled[name] {
		return true, ""
	}
	if why, ok := c.missing[name]; ok {
		return false, why
	}
	return false, "not asked for"
}

// enableController makes ctrl available to the children of dir: it
// adds it to the cgroup.subtree_control of dir and, where dir does not
// have it, of each cgroup above dir up to own (this process's cgroup,
// which its delegation gives it). It returns why it could not, or "".
func enableController(own, dir, ctrl string) string {
	if hasWord(readSmall(filepath.Join(dir, "cgroup.subtree_control")), ctrl) {
		return ""
	}
	if !hasWord(readSmall(filepath.Join(dir, "cgroup.controllers")), ctrl) {
		if dir == own || !isUnder(dir, own) {
			return fmt.Sprintf("the hierarchy gives %s no %s controller (its cgroup.controllers: %q; on a host whose %s controller is on cgroup v1 it cannot be on v2)",
				dir, ctrl, strings.TrimSpace(readSmall(filepath.Join(dir, "cgroup.controllers"))), ctrl)
		}
		if why := enableController(own, filepath.Dir(dir), ctrl); why != "" {
			return why
		}
	}
	err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+ctrl)
	if errors.Is(err, syscall.EBUSY) && dir == own {
		// Processes live in dir (this agent, at least): move the agent
		// into a leaf of its own, then try again.
		leaf := filepath.Join(own, agentLeaf)
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Sprintf("cannot make %s to move the worker out of %s: %v", leaf, dir, err)
		}
		if err := writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
			return fmt.Sprintf("cannot move the worker into %s: %v", leaf, err)
		}
		err = writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+ctrl)
	}
	if err != nil {
		if errors.Is(err, syscall.EBUSY) {
			return fmt.Sprintf("cannot enable %s in %s: other processes live in it (run the worker in a cgroup of its own)", ctrl, dir)
		}
		return fmt.Sprintf("cannot enable %s in %s: %v", ctrl, dir, err)
	}
	return ""
}

// runPattern matches the cgroups of runs (named as ProcessRunner names
// its runs' directories).
const runPattern = "job-*-attempt-*"

// RemoveLeftovers kills and removes the runs' cgroups in the parent:
// those an agent that died left, whose processes (a daemon a job
// detached) may still run. Call it once no other live agent can be
// using the parent (the worker holds its ID's session) and before the
// first run.
func (c *Cgroups) RemoveLeftovers() error {
	left, err := filepath.Glob(filepath.Join(c.dir, runPattern))
	if err != nil {
		return fmt.Errorf("cgroups: %w", err)
	}
	for _, dir := range left {
		cg := &Cgroup{dir: dir, fd: -1, kill: c.kill}
		if err := cg.destroy(5 * time.Second); err != nil {
			return fmt.Errorf("cgroups: a run's cgroup left behind: %w", err)
		}
	}
	return nil
}

// Cgroup is one run's cgroup. [Start] takes it in [Options.Cgroup] and
// removes it once the run is done.
type Cgroup struct {
	dir  string
	fd   int // the directory, open until the job is started in it
	kill bool
	mem  bool // the memory controller: memory.events counts OOM kills
}

// NewRun makes the cgroup name (a run's cgroup made earlier under that
// name is killed and removed first) with the limits of l that the
// enabled controllers allow. Its files are the agent's user's: a job
// running as another user cannot change them, nor move itself out.
func (c *Cgroups) NewRun(name string, l Limits) (*Cgroup, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("cgroups: bad run name %q", name)
	}
	cg := &Cgroup{dir: filepath.Join(c.dir, name), fd: -1, kill: c.kill, mem: c.enabled[ctrlMemory]}
	err := os.Mkdir(cg.dir, 0o755)
	if errors.Is(err, os.ErrExist) {
		if err = cg.destroy(5 * time.Second); err == nil {
			err = os.Mkdir(cg.dir, 0o755)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cgroups: make %s: %w", cg.dir, err)
	}
	for _, f := range l.files(func(ctrl string) bool { return c.enabled[ctrl] }) {
		err := writeFile(filepath.Join(cg.dir, f[0]), f[1])
		if err == syscall.ENOENT && f[0] == "memory.swap.max" {
			continue // a kernel without swap accounting: there is no swap to limit per cgroup
		}
		if err != nil {
			syscall.Rmdir(cg.dir)
			return nil, fmt.Errorf("cgroups: set %s=%s on %s: %w", f[0], f[1], cg.dir, err)
		}
	}
	fd, err := syscall.Open(cg.dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		syscall.Rmdir(cg.dir)
		return nil, fmt.Errorf("cgroups: open %s: %w", cg.dir, err)
	}
	cg.fd = fd
	return cg, nil
}

// Dir is the cgroup's directory.
func (cg *Cgroup) Dir() string { return cg.dir }

// closeFD closes the directory once the job runs in it.
func (cg *Cgroup) closeFD() {
	if cg.fd >= 0 {
		syscall.Close(cg.fd)
		cg.fd = -1
	}
}

// usage is the CPU every process of the cgroup has used (cpu.stat
// usage_usec), those that exited included.
func (cg *Cgroup) usage() (time.Duration, error) {
	b, err := readCgroupFile(filepath.Join(cg.dir, "cpu.stat"))
	if err != nil {
		return 0, err
	}
	us, ok := parseKeyed(b, "usage_usec")
	if !ok {
		return 0, fmt.Errorf("%s/cpu.stat has no usage_usec", cg.dir)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// populated reports whether a process lives in the cgroup or below it
// (cgroup.events).
func (cg *Cgroup) populated() (bool, error) {
	b, err := readCgroupFile(filepath.Join(cg.dir, "cgroup.events"))
	if err != nil {
		return false, err
	}
	n, ok := parseKeyed(b, "populated")
	if !ok {
		return false, fmt.Errorf("%s/cgroup.events has no populated", cg.dir)
	}
	return n != 0, nil
}

// oomKills is how many processes of the cgroup the kernel killed for its
// memory limit (memory.events oom_kill), 0 without the memory controller.
func (cg *Cgroup) oomKills() int64 {
	if !cg.mem {
		return 0
	}
	b, err := readCgroupFile(filepath.Join(cg.dir, "memory.events"))
	if err != nil {
		return 0
	}
	n, _ := parseKeyed(b, "oom_kill")
	return n
}

// killAll sends SIGKILL to every process of the cgroup: through
// cgroup.kill, which no fork can outrun, or else to each process
// cgroup.procs lists.
func (cg *Cgroup) killAll() {
	if cg.kill && writeFile(filepath.Join(cg.dir, "cgroup.kill"), "1") == nil {
		return
	}
	cg.signal(syscall.SIGKILL)
}

// signal sends sig to each process cgroup.procs lists.
func (cg *Cgroup) signal(sig syscall.Signal) {
	b, err := readCgroupFile(filepath.Join(cg.dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			syscall.Kill(pid, sig)
		}
	}
}

// destroy kills what runs in the cgroup and in any cgroup below it,
// waits up to wait for them to be gone, and removes the cgroups.
func (cg *Cgroup) destroy(wait time.Duration) error {
	cg.closeFD()
	subs, _ := os.ReadDir(cg.dir)
	for _, e := range subs {
		if e.IsDir() {
			sub := &Cgroup{dir: filepath.Join(cg.dir, e.Name()), fd: -1, kill: cg.kill}
			if err := sub.destroy(wait); err != nil {
				return err
			}
		}
	}
	deadline := time.Now().Add(wait)
	for {
		live, err := cg.populated()
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err == nil && !live {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: processes still live in it after %s", cg.dir, wait)
		}
		cg.killAll()
		time.Sleep(5 * time.Millisecond)
	}
	return cg.remove(wait)
}

// remove removes the empty cgroup. The kernel may refuse for a moment
// after its last process exited (EBUSY): it tries again for up to wait.
func (cg *Cgroup) remove(wait time.Duration) error {
	cg.closeFD()
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Rmdir(cg.dir)
		switch {
		case err == nil || err == syscall.ENOENT:
			return nil
		case err != syscall.EBUSY || time.Now().After(deadline):
			return fmt.Errorf("remove the cgroup %s: %w", cg.dir, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func isCgroup(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "cgroup.procs"))
	return err == nil
}

func isUnder(p, dir string) bool {
	dir = strings.TrimSuffix(dir, "/")
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func hasWord(s, w string) bool { return slices.Contains(strings.Fields(s), w) }

func readSmall(p string) string {
	b, _ := readCgroupFile(p)
	return string(b)
}

// readCgroupFile reads a cgroup interface file (they are small).
func readCgroupFile(p string) ([]byte, error) {
	b, err := readProc(p, make([]byte, 0, 512), true)
	if errors.Is(err, errGone) {
		return nil, fmt.Errorf("%s: %w", p, os.ErrNotExist)
	}
	return b, err
}

// writeFile writes one value to a cgroup interface file, in one write
// (the kernel takes a value per write).
func writeFile(p, v string) error {
	fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	for {
		_, err = syscall.Write(fd, []byte(v))
		if err != syscall.EINTR {
			return err
		}
	}
}

// kernelBefore reports whether the running kernel is older than
// major.minor, with its release; false when the release cannot be read.
func kernelBefore(major, minor int) (string, bool) {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return "", false
	}
	var b []byte
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	rel := string(b)
	return rel, releaseBefore(rel, major, minor)
}
