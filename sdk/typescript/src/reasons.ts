/**
 * The causes a cluster names when it refuses a call: the `reason` of the
 * refusal's google.rpc.ErrorInfo (domain "barista"), the names of the
 * enum Reason of proto/types.proto (generated: gen/types_pb.ts), the one
 * list of them. The table below gives each its code and its class: the
 * compiler holds it to the enum (a row for every value, none other), and
 * a test of the Go module checks it against docs/api.md's table of
 * reasons (client TestReasonsAreOneList). The error classes of errors.ts
 * are made from it (one class per reason, a subclass of the class of the
 * code the cluster sends it with).
 */

import type { Reason as ReasonEnum } from "./gen/types_pb.js";

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

/** A value's name of the enum Reason ("QUOTA_EXCEEDED"), REASON_UNSPECIFIED aside. */
type ReasonName = Exclude<keyof typeof ReasonEnum, "REASON_UNSPECIFIED">;

/** Every reason a refusal names, with its code and its class. */
export const REASONS = {
  QUOTA_EXCEEDED: {
    code: "RESOURCE_EXHAUSTED",
    className: "QuotaExceeded",
    doc: "the tenant holds its max_queued jobs (or the cluster's default_max_queued), or its max_queued_bytes of payloads, or the cluster its max_total_queued_bytes",
  },
  RATE_LIMITED: {
    code: "RESOURCE_EXHAUSTED",
    className: "RateLimited",
    doc: "a rate limit refused the call (the tenant's submit_rate, or a caller's write_rate): retryAfter says when to try again",
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
  MAX_GROUPS: {
    code: "RESOURCE_EXHAUSTED",
    className: "MaxGroups",
    doc: "a job of a new group would pass the tenant's max_groups",
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
  NOT_LEADER: {
    code: "UNAVAILABLE",
    className: "NotLeader",
    doc: "the node does not lead and did nothing with the call: the SDK asks another node itself; a caller sees it only when no node could serve the call",
  },
  RESOURCE_UNKNOWN: {
    code: "NOT_FOUND",
    className: "ResourceUnknown",
    doc: "the resource a job uses, or a command names, is not declared",
  },
} as const satisfies Record<ReasonName, ReasonRow>;

/** A reason a refusal names ("QUOTA_EXCEEDED"). */
export type Reason = keyof typeof REASONS;

/** The domain of the ErrorInfo details barista sends. */
export const ERROR_DOMAIN = "barista";

/**
 * The reason of an UNAVAILABLE refusal by a node that no longer leads and
 * did nothing with the call: any call may be sent again to another node.
 */
export const REASON_NOT_LEADER: Reason = "NOT_LEADER";
