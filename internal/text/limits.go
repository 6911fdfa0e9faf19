package text

// The limits the servers hold every caller to and the SDKs hold
// themselves to before they send, written once. The Go client and worker
// take them through internal/wire; the Python SDK's copy
// (sdk/python/src/barista/_limits.py) and the TypeScript SDK's
// (sdk/typescript/src/limits.ts) are checked against them by tests
// (internal/wire TestPythonLimits, TestTypeScriptLimits).
const (
	// MaxMessageBytes is the largest gRPC message a node receives or
	// sends, on every connection (clients, workers, forwarding between
	// members). It is gRPC's default, so clients in any language need no
	// setting.
	MaxMessageBytes = 4 << 20
	// MaxBatch is the most jobs one SubmitBatch request carries, and
	// MaxBatchBytes the most bytes of jobs a client puts in one: a longer
	// list goes in several requests, each of which fits one message with
	// room to spare.
	MaxBatch      = 1000
	MaxBatchBytes = 3 << 20
	// MinSnoozeMs and MaxSnoozeMs bound a snoozed run's delay (SPEC §3
	// "Job lifecycle"): 1 s .. 24 h. A worker holds a snooze its function
	// asks for to them (and says so in its log); the leader refuses a
	// report outside them.
	MinSnoozeMs = 1000
	MaxSnoozeMs = 24 * 3600 * 1000
)
