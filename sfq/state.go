package sfq

// The state encoding's versions, and View: an immutable picture of the
// scheduler's persistent state (Freeze, Peek).

// stateVersion is the version of the canonical state encoding. Version 2
// added priority classes (a virtual_now per class, a finish tag per tenant
// and class, class caps and max_class), deadlines and learned cost
// estimates; version 3 the wall-clock times of a job's submit and end and
// the stdout tail of its result (an ended job also keeps its last worker,
// which needs no new field); version 4 groups (a job's group, the tenants'
// group settings and group_now, and the group table); version 5 what
// feature level 5 adds (levers.go: delays, expiry, retry backoff, pauses
// and rate limits). Decode still reads versions 1 to 4; those of 1 to 3: their jobs are all in their tenants' unnamed groups;
// those of versions 1 and 2 show their cluster times as wall times and
// have no stdout tail, and version 1's are all of class normal without a
// deadline.
//
// A state that uses nothing of groups (no job of a named group, no group
// setting, no group tag or group_now) is written as version 3, byte for
// byte as before groups existed: its hash does not change, and a build
// before groups can still load it during a rolling upgrade. Likewise a
// state that uses nothing of version 5 is written as version 4 (or 3).
//
// Version 7 is version 6 with a byte after each job that has a result:
// how its run's CPU was measured and why it failed (runresult.go). A
// state that never kept either is written as before.
//
// Version 8 is version 7 with a byte after each job: its form (which
// workers run it: kinds.go). A state none of whose jobs has a form other
// than FormAny is written as before.
//
// Version 9 is version 8 with resources (resources.go): the settings
// resource_reserve_after and max_resources after max_snoozes, the
// resources a job uses after its form, and the resource table last. A
// state that declares no resource, holds no job that uses one and keeps
// both settings at their defaults is written as before.
const stateVersion = 9

// stateVersionForms is the version a state that holds nothing of
// resources, and some job of a form, is written as.
const stateVersionForms = 8

// stateVersionDetails is the version a state that has kept a run's CPU
// source or failure, and holds no job of a form, is written as.
const stateVersionDetails = 7

// stateVersionPools is the version a state that uses pools, and has
// never kept a run's CPU source or failure, is written as.
const stateVersionPools = 6

// stateVersionLevers is the version a state with nothing of pools is
// written as (version 6 adds pools: pool.go), byte for byte as the build
// before pools wrote it.
const stateVersionLevers = 5

// stateVersionNoGroups is the version a state without groups is written
// as.
const stateVersionNoGroups = 3

// stateVersionGroups is the version a state with groups but nothing of
// feature level 5 (delays, expiry, backoff, pauses, rate limits) is
// written as, byte for byte as the build before them wrote it.
const stateVersionGroups = 4

// View is an immutable picture of the scheduler's persistent state: its
// configuration, scalars, and tenant and job tables. A View returned by
// Freeze may be read from any goroutine while the scheduler goes on.
type View struct {
	cfg     Config
	vnow    [NumClasses]VirtualTime
	nextJob JobID
	tenants VectorView[Tenant]
	jobs    VectorView[Job]
	types   VectorView[TypeStat]
	groups  VectorView[Group]
	grouped uint64 // jobs of a named group in the job table
	details bool   // a run's CPU source or failure was kept (runresult.go)
	timed   uint64 // jobs with delay fields (delay.go)
	// pausedAll and evalUs: the pause of all dispatch, and the time
	// (µs) eligibility was last evaluated at (pause.go).
	pausedAll bool
	evalUs    int64
	// pools and subs: every pool slot's settings, pause and
	// virtual_now, and the subscriptions (pool.go).
	pools []poolPic
	subs  []subscription
	// res: the declared resources, by name (resources.go).
	res []resourcePic
}

// Freeze returns an immutable View of the current state in O(chunks) time.
// Writes after it copy the chunks they touch, so the View never changes.
func (s *Scheduler) Freeze() *View {
	s.subsShared = true
	return &View{cfg: s.cfg, vnow: s.pools[DefaultPool].vnow, nextJob: s.nextJob, tenants: s.tenants.Freeze(), jobs: s.jobs.Freeze(), types: s.types.Freeze(),
		groups: s.groups.Freeze(), grouped: s.grouped, details: s.details, timed: s.dl.timed, pausedAll: s.pausedAll, evalUs: s.evalUs, pools: s.poolPics(), subs: s.subs,
		res: s.resourcePics(true)}
}

// Peek returns a View valid only until the next write, for reading while
// no write can happen (on the writer's goroutine, or under its lock).
func (s *Scheduler) Peek() *View { return s.view() }

// view returns a View valid only until the next write, for reading on the
// scheduler's own goroutine.
func (s *Scheduler) view() *View {
	return &View{cfg: s.cfg, vnow: s.pools[DefaultPool].vnow, nextJob: s.nextJob, tenants: s.tenants.View(), jobs: s.jobs.View(), types: s.types.View(),
		groups: s.groups.View(), grouped: s.grouped, details: s.details, timed: s.dl.timed, pausedAll: s.pausedAll, evalUs: s.evalUs, pools: s.poolPics(), subs: s.subs,
		res: s.resourcePics(false)}
}

// JobCount returns the number of jobs in the view.
func (v *View) JobCount() int { return v.jobs.Len() }

// TenantCount returns the number of tenant slots in the view.
func (v *View) TenantCount() int { return v.tenants.Len() }
