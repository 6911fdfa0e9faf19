// Package sfq is barista's scheduling core: tenants with tiered weights,
// start-time fair queuing over per-tenant virtual-time tags, hard caps,
// size stealing, optional usage decay, and the job lifecycle.
//
// The contract, which every replica of the state machine relies on:
//
//   - Pure and deterministic. The package performs no I/O, reads no clock,
//     starts no goroutine, draws no random number, never lets map iteration
//     order reach its state, and uses no floating point. Time is an argument
//     ([Time], milliseconds of cluster time) and every result is a value.
//     Two schedulers fed the same calls hold byte-identical state and report
//     the same [Scheduler.Hash].
//   - Exact. Virtual time is a fixed-point int64 ([VirtualTime], virtual
//     microseconds); weights are Q16 fixed point; arithmetic that could
//     overflow is checked and reported as [ErrOverflow].
//   - Fast. A dispatch costs O(log T + log G) in the number of tenants
//     with eligible work and of groups of the dispatched tenant, and
//     allocates nothing; a submit costs as much. Nothing scans the backlog:
//     all queued jobs of a tenant share the tenant's next tag, so the core
//     orders tenants, not jobs, in one heap per class and job size; inside
//     a tenant it orders the heads of its groups' queues in balanced trees
//     (slot.go, tree.go).
//   - Snapshot-friendly. The job, tenant and group tables are chunked
//     copy-on-write vectors: [Scheduler.Freeze] returns an immutable [View] in time
//     proportional to the number of chunks, and the scheduler may keep
//     mutating while another goroutine reads that view.
//
// Everything the package derives (heaps, trees, FIFO queues, counters) can
// be rebuilt from the job, tenant and group tables; [Scheduler.Verify] recomputes the
// counters and reports any difference.
package sfq
