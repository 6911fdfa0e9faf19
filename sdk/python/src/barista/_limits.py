"""The limits the cluster holds every caller to, as the servers define
them (internal/text/limits.go); a test of the Go module checks that these
values are the same (internal/wire TestPythonLimits)."""

# The largest gRPC message a node receives or sends.
MAX_MESSAGE_BYTES = 4194304

# The most jobs, and bytes of jobs, one SubmitBatch request carries.
MAX_BATCH = 1000
MAX_BATCH_BYTES = 3145728

# The bounds of a snoozed run's delay: 1 s .. 24 h.
MIN_SNOOZE_MS = 1000
MAX_SNOOZE_MS = 86400000
