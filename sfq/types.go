package sfq

import (
	"errors"
	"fmt"
	"strings"

	"github.com/baristahq/barista/internal/text"
)

// Time is cluster time in milliseconds. The core never reads a clock: every
// operation that needs the time takes it as an argument.
type Time int64

// Tier is a tenant's subscription tier. Higher tiers win ties.
type Tier uint8

// The tiers, lowest first.
const (
	Free Tier = iota
	Bronze
	Silver
	Gold
	Diamond
	NumTiers = 5
)

var tierNames = [NumTiers]string{"free", "bronze", "silver", "gold", "diamond"}

func (t Tier) String() string {
	if t < NumTiers {
		return tierNames[t]
	}
	return fmt.Sprintf("tier(%d)", uint8(t))
}

// ParseTier reads a tier name (case-insensitive).
func ParseTier(s string) (Tier, error) {
	for i, n := range tierNames {
		if strings.EqualFold(s, n) {
			return Tier(i), nil
		}
	}
	return 0, invalidf("", "unknown tier %q (want free, bronze, silver, gold or diamond)", s)
}

// Size is a container size. A worker of size S may run a job of size <= S.
type Size uint8

// The sizes, smallest first.
const (
	SM Size = iota
	MD
	LG
	NumSizes = 3
)

var sizeNames = [NumSizes]string{"sm", "md", "lg"}

func (s Size) String() string {
	if s < NumSizes {
		return sizeNames[s]
	}
	return fmt.Sprintf("size(%d)", uint8(s))
}

// ParseSize reads a size name.
func ParseSize(s string) (Size, error) {
	for i, n := range sizeNames {
		if strings.EqualFold(s, n) {
			return Size(i), nil
		}
	}
	return 0, invalidf("", "unknown size %q (want sm, md or lg)", s)
}

// JobID identifies a job. IDs are assigned 1, 2, 3, ... in submit order and
// double as the job's enqueue sequence: a lower ID is older and goes first
// inside its tenant and size, also after a requeue.
type JobID uint64

// Sentinel errors callers branch on. Every error the core returns wraps one.
var (
	// ErrInvalid marks input that is malformed or out of range.
	ErrInvalid = text.ErrInvalid
	// ErrUnknownTenant marks a tenant name that does not exist.
	ErrUnknownTenant = errors.New("unknown tenant")
	// ErrUnknownPool marks a pool name (or ID) that does not exist.
	ErrUnknownPool = errors.New("unknown pool")
	// ErrUnknownResource marks a resource that is not declared.
	ErrUnknownResource = errors.New("unknown resource")
	// ErrPrecondition marks a command the state does not allow as it
	// stands (a submit to a pool that requires a subscription the tenant
	// does not have, deleting a pool that has jobs).
	ErrPrecondition = errors.New("failed precondition")
	// ErrUnknownJob marks a job ID that does not exist (or was pruned).
	ErrUnknownJob = errors.New("unknown job")
	// ErrTenantBusy marks a tenant delete refused because of live jobs.
	ErrTenantBusy = errors.New("tenant has queued or running jobs")
	// ErrRefused marks an event the job lifecycle does not accept in the
	// job's current state (stale attempt, wrong worker, not due, ...).
	ErrRefused = errors.New("refused")
	// ErrOverflow marks virtual-time arithmetic that left the int64 range.
	ErrOverflow = errors.New("virtual time overflow")
	// ErrPermission marks a submit the tenant is not allowed to make (a
	// class above its max_class, a deadline without allow_deadlines).
	ErrPermission = errors.New("permission denied")
	// ErrExhausted marks a submit or setting that would exceed a bound of
	// the tenant's (its max_groups).
	ErrExhausted = errors.New("resource exhausted")
)
