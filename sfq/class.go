package sfq

import (
	"fmt"
	"strings"
)

// Class is a job's priority class. Each class is its own fair-share domain
// with its own virtual_now and its own finish tag per tenant; a worker is
// served from the highest class that has an eligible job it fits.
//
// The zero value is ClassNormal, the default of a submit, so the numeric
// values do not follow the priority order: compare classes with Above and
// walk them with Classes.
type Class uint8

// The classes. ClassNormal is the zero value.
const (
	ClassNormal Class = iota
	ClassHigh
	ClassCritical
	ClassLow
	NumClasses = 4
)

var classNames = [NumClasses]string{"normal", "high", "critical", "low"}

// classRank is each class's place in the service order: 0 is served first.
var classRank = [NumClasses]uint8{ClassNormal: 2, ClassHigh: 1, ClassCritical: 0, ClassLow: 3}

// classOrder lists the classes highest first, the order a worker is served
// in.
var classOrder = [NumClasses]Class{ClassCritical, ClassHigh, ClassNormal, ClassLow}

// Classes returns the classes highest first.
func Classes() [NumClasses]Class { return classOrder }

func (c Class) String() string {
	if c < NumClasses {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// Above reports whether c is served before d.
func (c Class) Above(d Class) bool { return classRank[c] < classRank[d] }

// ClassesInOrder are the classes in the order they are served (critical,
// high, normal, low): the order the API lists per-class values in.
var ClassesInOrder = [NumClasses]Class{ClassCritical, ClassHigh, ClassNormal, ClassLow}

// ParseClass reads a class name (case-insensitive).
func ParseClass(s string) (Class, error) {
	for i, n := range classNames {
		if strings.EqualFold(s, n) {
			return Class(i), nil
		}
	}
	return 0, invalidf("", "unknown class %q (want critical, high, normal or low)", s)
}

// EstimateMode says where a submit's est_cost comes from.
type EstimateMode uint8

const (
	// EstimateSubmitted (default): every submit states its est_cost.
	EstimateSubmitted EstimateMode = iota
	// EstimateAuto: the moving average of the job type's completed runs
	// once it has MinEstimateSamples, else the submitted cost, else the
	// configured default cost.
	EstimateAuto
)

func (m EstimateMode) String() string {
	if m == EstimateAuto {
		return "auto"
	}
	return "submitted"
}

// ParseEstimateMode reads "submitted" or "auto".
func ParseEstimateMode(s string) (EstimateMode, error) {
	switch s {
	case "submitted":
		return EstimateSubmitted, nil
	case "auto":
		return EstimateAuto, nil
	}
	return 0, invalidf("", "unknown estimate mode %q (want submitted or auto)", s)
}

// EstSource says where a job's est_cost came from. It is fixed at submit.
type EstSource uint8

// The sources of an estimate.
const (
	// EstFromSubmit: the cost the submit stated.
	EstFromSubmit EstSource = iota
	// EstFromEMA: the moving average of the job type (estimate=auto).
	EstFromEMA
	// EstFromDefault: the configured default cost (estimate=auto, no
	// stated cost and too few samples).
	EstFromDefault
	numEstSources
)

var estSourceNames = [numEstSources]string{"submitted", "ema", "default"}

func (e EstSource) String() string {
	if e < numEstSources {
		return estSourceNames[e]
	}
	return fmt.Sprintf("source(%d)", uint8(e))
}

// CapVertex names one of the limits a queued job can be blocked by, in the
// order "Why a job waits" checks them.
type CapVertex uint8

// The cap vertices, tenant-level first, then group-level.
const (
	CapNone CapVertex = iota
	// CapTenantRunning: the tenant's max_running.
	CapTenantRunning
	// CapTenantSize: the tenant's max_running of the job's size.
	CapTenantSize
	// CapTenantInflight: the tenant's max_inflight_cpu_ms.
	CapTenantInflight
	// CapClass: the tenant's cap_critical or cap_high.
	CapClass
	// CapDeadline: the tenant's deadline_cap.
	CapDeadline
	// CapGroupRunning: the cap of the job's group.
	CapGroupRunning
	// CapSubscription: the tenant's subscription burst in the job's pool.
	CapSubscription
	numCapVertices
)

var capVertexNames = [numCapVertices]string{"none", "tenant_running", "tenant_size", "tenant_inflight", "class", "deadline", "group_running",
	"subscription"}

func (v CapVertex) String() string {
	if v < numCapVertices {
		return capVertexNames[v]
	}
	return fmt.Sprintf("vertex(%d)", uint8(v))
}
