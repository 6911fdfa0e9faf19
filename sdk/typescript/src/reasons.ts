/**
 * The causes a cluster names when it refuses a call: the `reason` of the
 * refusal's google.rpc.ErrorInfo (domain "barista"). This table is the one
 * list of them in the SDK: the error classes of errors.ts are made from it
 * (one class per reason, a subclass of the class of the code the cluster
 * sends it with), and a test checks it against the server's list.
 */

/** The canonical names of the gRPC status codes. */
export const CODE_NAMES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
] as const;

/** A gRPC status code's canonical name ("NOT_FOUND"). */
export type CodeName = (typeof CODE_NAMES)[number];

interface ReasonRow {
  /** The code the cluster sends the reason with. */
  readonly code: CodeName;
  /** The name of the SDK's class of the reason. */
  readonly className: string;
  /** What it means, for the docs. */
  readonly doc: string;
}

/** Every reason a refusal names, with its code and its class. */
export const REASONS = {
  QUOTA_EXCEEDED: {
    code: "RESOURCE_EXHAUSTED",
    className: "QuotaExceeded",
    doc: "the tenant holds its max_queued jobs (or the cluster's default_max_queued), or its max_queued_bytes of payloads",
  },
  RATE_LIMITED: {
    code: "RESOURCE_EXHAUSTED",
    className: "RateLimited",
    doc: "a rate limit refused the call (the tenant's submit_rate, or a caller's write_rate): retryAfter says when to try again",
  },
  MAX_GROUPS: {
    code: "RESOURCE_EXHAUSTED",
    className: "MaxGroups",
    doc: "a job of a new group would pass the tenant's max_groups",
  },
  KEY_CONFLICT: {
    code: "ALREADY_EXISTS",
    className: "KeyConflict",
    doc: "the idempotency key was used for a job with other content",
  },
  KEY_JOB_GONE: {
    code: "NOT_FOUND",
    className: "KeyJobGone",
    doc: "the idempotency key names a job that no longer exists (purged or pruned) within the key's dedupe window",
  },
  TENANT_UNKNOWN: {
    code: "NOT_FOUND",
    className: "TenantUnknown",
    doc: "the tenant does not exist (and the cluster makes none implicitly)",
  },
  POOL_UNKNOWN: {
    code: "NOT_FOUND",
    className: "PoolUnknown",
    doc: "the pool does not exist",
  },
  TOO_LARGE: {
    code: "INVALID_ARGUMENT",
    className: "TooLarge",
    doc: "the payload is over the cluster's max_payload_bytes, or the request over what any node takes: no retry makes it fit",
  },
  MAX_CLASS: {
    code: "PERMISSION_DENIED",
    className: "MaxClass",
    doc: "the job's priority class is above the tenant's max_class",
  },
  DEADLINES_NOT_ALLOWED: {
    code: "PERMISSION_DENIED",
    className: "DeadlinesNotAllowed",
    doc: "the tenant may not submit jobs with a deadline",
  },
  SUBSCRIPTION_REQUIRED: {
    code: "FAILED_PRECONDITION",
    className: "SubscriptionRequired",
    doc: "the pool admits only tenants with a subscription there",
  },
  FEATURE_LEVEL: {
    code: "FAILED_PRECONDITION",
    className: "FeatureLevel",
    doc: "the call needs a higher cluster feature level (a cluster still being upgraded)",
  },
} as const satisfies Record<string, ReasonRow>;

/** A reason the SDK has a class for ("QUOTA_EXCEEDED"). */
export type Reason = keyof typeof REASONS;

/** The domain of the ErrorInfo details barista sends. */
export const ERROR_DOMAIN = "barista";

/**
 * The reason of an UNAVAILABLE refusal by a node that no longer leads and
 * did nothing with the call: any call may be sent again to another node.
 * It is the transport's, not a refusal's: no class stands for it.
 */
export const REASON_NOT_LEADER = "NOT_LEADER";
