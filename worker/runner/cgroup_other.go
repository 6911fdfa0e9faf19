//go:build !linux

package runner

import (
	"errors"
	"fmt"
	"time"
)

// Cgroups is the cgroup v2 sub-tree a worker runs its jobs in (Linux).
type Cgroups struct{}

// OpenCgroups returns an error wrapping ErrNoCgroup: cgroups are Linux's.
func OpenCgroups(cfg CgroupConfig) (*Cgroups, error) {
	return nil, fmt.Errorf("%w: %w", ErrNoCgroup, errors.ErrUnsupported)
}

// Dir is the parent cgroup's directory.
func (c *Cgroups) Dir() string { return "" }

// RemoveLeftovers kills and removes the runs' cgroups in the parent.
func (c *Cgroups) RemoveLeftovers() error { return nil }

// RemoveAll kills what runs in the parent's sub-tree and removes it.
func (c *Cgroups) RemoveAll(wait time.Duration) error { return nil }

// Close removes the parent cgroup if OpenCgroups made it.
func (c *Cgroups) Close() error { return nil }

// CanKill reports whether a run's cgroup has cgroup.kill.
func (c *Cgroups) CanKill() bool { return false }

// Controller reports whether the runs' cgroups have the controller.
func (c *Cgroups) Controller(name string) (bool, string) { return false, "no cgroups on this system" }

// Cgroup is one run's cgroup (Linux).
type Cgroup struct{}

// NewRun makes a run's cgroup (Linux).
func (c *Cgroups) NewRun(name string, l Limits) (*Cgroup, error) {
	return nil, fmt.Errorf("cgroups: %w", errors.ErrUnsupported)
}

// Dir is the cgroup's directory.
func (cg *Cgroup) Dir() string { return "" }
