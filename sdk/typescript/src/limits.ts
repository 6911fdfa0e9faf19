/**
 * The limits the cluster holds every caller to, as the servers define them
 * (internal/text/limits.go), written once in the SDK: a test of the Go
 * module checks that these values are the same (internal/wire
 * TestTypeScriptLimits). Each is a plain number here so that it can be
 * read without running any code.
 */

/** The largest gRPC message a node receives or sends (4 MiB). */
export const MAX_MESSAGE_BYTES = 4_194_304;

/** The most jobs one SubmitBatch request carries. */
export const MAX_BATCH = 1_000;

/** The most bytes of jobs the SDK puts in one SubmitBatch request (3 MiB). */
export const MAX_BATCH_BYTES = 3_145_728;

/** The shortest delay of a snoozed run (1 s), in ms. */
export const MIN_SNOOZE_MS = 1_000;

/** The longest delay of a snoozed run (24 h), in ms. */
export const MAX_SNOOZE_MS = 86_400_000;
