/**
 * The errors of the SDK: one class per gRPC code, and one per cause the
 * cluster names (the reason of the refusal's google.rpc.ErrorInfo), each a
 * subclass of its code's class, made from the table of reasons.ts.
 *
 *     try {
 *       await client.submit("resize", args, { key: "photo-17" });
 *     } catch (e) {
 *       if (e instanceof RateLimited) await sleep(e.retryAfter ?? 1000);
 *       else if (e instanceof QuotaExceeded) ...; // the tenant holds its max_queued jobs
 *       else throw e;
 *     }
 */

import { fromBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { BadRequestSchema, ErrorInfoSchema, RetryInfoSchema } from "./gen/rpc_status_pb.js";
import { CODE_NAMES, ERROR_DOMAIN, REASONS, REASON_NOT_LEADER, type CodeName, type Reason } from "./reasons.js";

/** What an error is made with besides its message. */
export interface ErrorInit {
  /** The gRPC code's name; a class's own code when left out. */
  code?: CodeName;
  reason?: string;
  field?: string;
  metadata?: Record<string, string>;
  /** Milliseconds. */
  retryAfter?: number;
  cause?: unknown;
}

/** A call the cluster refused, or that failed on the way to it. */
export class BaristaError extends Error {
  /** The gRPC code this class stands for. */
  static readonly codeName: CodeName = "UNKNOWN";

  /** The gRPC code's canonical name ("NOT_FOUND"). */
  readonly code: CodeName;
  /** The cause the cluster names ("QUOTA_EXCEEDED"), undefined when it names none. */
  readonly reason: string | undefined;
  /** The request field at fault, when the cluster (or the SDK) says which. */
  readonly field: string | undefined;
  /** The ErrorInfo's metadata. */
  readonly metadata: Record<string, string>;
  /** How long the cluster asks the caller to wait before trying again, in milliseconds (a RetryInfo). */
  readonly retryAfter: number | undefined;
  /** The server's words (the message without the code's name). */
  readonly rawMessage: string;

  constructor(message: string, init: ErrorInit = {}) {
    const code = init.code ?? (new.target as typeof BaristaError).codeName;
    super(`${code}: ${message}`, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.code = code;
    this.rawMessage = message;
    this.reason = init.reason || undefined;
    this.field = init.field || undefined;
    this.metadata = { ...(init.metadata ?? {}) };
    this.retryAfter = init.retryAfter;
  }
}

function codeClass<C extends CodeName>(code: C, name: string) {
  const cls = class extends BaristaError {
    static override readonly codeName: CodeName = code;
  };
  Object.defineProperty(cls, "name", { value: name });
  return cls;
}

export const Cancelled = codeClass("CANCELLED", "Cancelled");
export const Unknown = codeClass("UNKNOWN", "Unknown");
/** A field of the request breaks a rule; also thrown by the SDK, before sending, for what it checks itself. */
export const InvalidArgument = codeClass("INVALID_ARGUMENT", "InvalidArgument");
export const DeadlineExceeded = codeClass("DEADLINE_EXCEEDED", "DeadlineExceeded");
/** No such job (another tenant's job looks the same), tenant, pool or group. */
export const NotFound = codeClass("NOT_FOUND", "NotFound");
export const AlreadyExists = codeClass("ALREADY_EXISTS", "AlreadyExists");
/** The token may not do this: another tenant's name, an admin call with a client token, ... */
export const PermissionDenied = codeClass("PERMISSION_DENIED", "PermissionDenied");
export const ResourceExhausted = codeClass("RESOURCE_EXHAUSTED", "ResourceExhausted");
export const FailedPrecondition = codeClass("FAILED_PRECONDITION", "FailedPrecondition");
export const Aborted = codeClass("ABORTED", "Aborted");
export const OutOfRange = codeClass("OUT_OF_RANGE", "OutOfRange");
export const Unimplemented = codeClass("UNIMPLEMENTED", "Unimplemented");
export const Internal = codeClass("INTERNAL", "Internal");
/** No node could be reached, or the call failed on its way and was not safe to send again. */
export const Unavailable = codeClass("UNAVAILABLE", "Unavailable");
export const DataLoss = codeClass("DATA_LOSS", "DataLoss");
/** No token, or one the cluster does not know. */
export const Unauthenticated = codeClass("UNAUTHENTICATED", "Unauthenticated");
/** A call on a Client after close(). */
export const ClientClosed = codeClass("CANCELLED", "ClientClosed");

export type Cancelled = InstanceType<typeof Cancelled>;
export type Unknown = InstanceType<typeof Unknown>;
export type InvalidArgument = InstanceType<typeof InvalidArgument>;
export type DeadlineExceeded = InstanceType<typeof DeadlineExceeded>;
export type NotFound = InstanceType<typeof NotFound>;
export type AlreadyExists = InstanceType<typeof AlreadyExists>;
export type PermissionDenied = InstanceType<typeof PermissionDenied>;
export type ResourceExhausted = InstanceType<typeof ResourceExhausted>;
export type FailedPrecondition = InstanceType<typeof FailedPrecondition>;
export type Aborted = InstanceType<typeof Aborted>;
export type OutOfRange = InstanceType<typeof OutOfRange>;
export type Unimplemented = InstanceType<typeof Unimplemented>;
export type Internal = InstanceType<typeof Internal>;
export type Unavailable = InstanceType<typeof Unavailable>;
export type DataLoss = InstanceType<typeof DataLoss>;
export type Unauthenticated = InstanceType<typeof Unauthenticated>;
export type ClientClosed = InstanceType<typeof ClientClosed>;

const BY_CODE = {
  CANCELLED: Cancelled,
  UNKNOWN: Unknown,
  INVALID_ARGUMENT: InvalidArgument,
  DEADLINE_EXCEEDED: DeadlineExceeded,
  NOT_FOUND: NotFound,
  ALREADY_EXISTS: AlreadyExists,
  PERMISSION_DENIED: PermissionDenied,
  RESOURCE_EXHAUSTED: ResourceExhausted,
  FAILED_PRECONDITION: FailedPrecondition,
  ABORTED: Aborted,
  OUT_OF_RANGE: OutOfRange,
  UNIMPLEMENTED: Unimplemented,
  INTERNAL: Internal,
  UNAVAILABLE: Unavailable,
  DATA_LOSS: DataLoss,
  UNAUTHENTICATED: Unauthenticated,
} as const;

type ByCode = typeof BY_CODE;
type ClassName = (typeof REASONS)[Reason]["className"];
type ReasonOfClass<N extends ClassName> = { [R in Reason]: (typeof REASONS)[R]["className"] extends N ? R : never }[Reason];

/** The class of each reason, made from the table. */
export const BY_REASON: { [R in Reason]: ByCode[(typeof REASONS)[R]["code"]] } = Object.fromEntries(
  (Object.keys(REASONS) as Reason[]).map((reason) => {
    const row = REASONS[reason];
    const base = BY_CODE[row.code] as typeof BaristaError;
    const cls = class extends base {};
    Object.defineProperty(cls, "name", { value: row.className });
    return [reason, cls];
  }),
) as never;

function reasonClass<N extends ClassName>(name: N): ByCode[(typeof REASONS)[ReasonOfClass<N>]["code"]] {
  for (const reason of Object.keys(REASONS) as Reason[]) {
    if (REASONS[reason].className === name) return BY_REASON[reason] as never;
  }
  throw new Error(`no reason has the class ${name}`);
}

/** The tenant holds its max_queued jobs, or its max_queued_bytes of payloads. */
export const QuotaExceeded = reasonClass("QuotaExceeded");
/** A rate limit refused the call: retryAfter says when to try again. The SDK never retries it on its own. */
export const RateLimited = reasonClass("RateLimited");
/** A job of a new group would pass the tenant's max_groups. */
export const MaxGroups = reasonClass("MaxGroups");
/** The idempotency key was used for a job with other content. */
export const KeyConflict = reasonClass("KeyConflict");
/** The idempotency key names a job that no longer exists, within the key's dedupe window. */
export const KeyJobGone = reasonClass("KeyJobGone");
/** The tenant does not exist. */
export const TenantUnknown = reasonClass("TenantUnknown");
/** The pool does not exist. */
export const PoolUnknown = reasonClass("PoolUnknown");
/** The payload is over the cluster's max_payload_bytes: no retry makes it fit. */
export const TooLarge = reasonClass("TooLarge");
/** The job's priority is above the tenant's max_class. */
export const MaxClass = reasonClass("MaxClass");
/** The tenant may not submit jobs with a deadline. */
export const DeadlinesNotAllowed = reasonClass("DeadlinesNotAllowed");
/** The pool admits only tenants with a subscription there. */
export const SubscriptionRequired = reasonClass("SubscriptionRequired");
/** The call needs a higher cluster feature level. */
export const FeatureLevel = reasonClass("FeatureLevel");

export type QuotaExceeded = InstanceType<typeof QuotaExceeded>;
export type RateLimited = InstanceType<typeof RateLimited>;
export type MaxGroups = InstanceType<typeof MaxGroups>;
export type KeyConflict = InstanceType<typeof KeyConflict>;
export type KeyJobGone = InstanceType<typeof KeyJobGone>;
export type TenantUnknown = InstanceType<typeof TenantUnknown>;
export type PoolUnknown = InstanceType<typeof PoolUnknown>;
export type TooLarge = InstanceType<typeof TooLarge>;
export type MaxClass = InstanceType<typeof MaxClass>;
export type DeadlinesNotAllowed = InstanceType<typeof DeadlinesNotAllowed>;
export type SubscriptionRequired = InstanceType<typeof SubscriptionRequired>;
export type FeatureLevel = InstanceType<typeof FeatureLevel>;

/**
 * The class of a refusal: its reason's, when the reason is one the SDK
 * knows and comes with the code it is sent with, else its code's.
 */
export function errorClass(code: string, reason?: string): typeof BaristaError {
  const base = (BY_CODE as Record<string, typeof BaristaError>)[code] ?? Unknown;
  const cls = reason ? (BY_REASON as Record<string, typeof BaristaError>)[reason] : undefined;
  if (cls !== undefined && cls.prototype instanceof base) return cls;
  return base;
}

/** Makes the error of code (and reason) with message. */
export function makeError(code: string, message: string, init: Omit<ErrorInit, "code"> = {}): BaristaError {
  const cls = errorClass(code, init.reason);
  const known = (CODE_NAMES as readonly string[]).includes(code) && code !== "OK";
  return new cls(message, { ...init, code: known ? (code as CodeName) : "UNKNOWN" });
}

/** What the details of a refusal say. */
interface Details {
  info?: { reason: string; domain: string; metadata: Record<string, string> };
  retryAfter?: number;
  field?: string;
}

/** The ErrorInfo (of barista's domain), RetryInfo and BadRequest of a ConnectError's details. */
function details(err: ConnectError): Details {
  const out: Details = {};
  for (const d of err.details) {
    if (!("type" in d)) continue;
    try {
      switch (d.type) {
        case "google.rpc.ErrorInfo": {
          const i = fromBinary(ErrorInfoSchema, d.value);
          if (i.domain === ERROR_DOMAIN && out.info === undefined) out.info = i;
          break;
        }
        case "google.rpc.RetryInfo": {
          const r = fromBinary(RetryInfoSchema, d.value);
          if (r.retryDelay) out.retryAfter = Number(r.retryDelay.seconds) * 1000 + Math.floor(r.retryDelay.nanos / 1e6);
          break;
        }
        case "google.rpc.BadRequest": {
          const b = fromBinary(BadRequestSchema, d.value);
          if (b.fieldViolations.length > 0 && out.field === undefined) out.field = b.fieldViolations[0].field;
          break;
        }
      }
    } catch {
      // A detail that does not decode says nothing we can use.
    }
  }
  return out;
}

/** The gRPC code's name of a Connect code (they share the numbers). */
export function codeName(code: Code): CodeName {
  return CODE_NAMES[code] ?? "UNKNOWN";
}

/**
 * The BaristaError of a failed call: its code's class, or its cause's when
 * the status names one. An error that is already a BaristaError is
 * returned as it is; any other becomes Unknown.
 */
export function fromError(err: unknown): BaristaError {
  if (err instanceof BaristaError) return err;
  if (err instanceof ConnectError) {
    const d = details(err);
    const reason = d.info?.reason || undefined;
    const metadata = d.info?.metadata ?? {};
    return makeError(codeName(err.code), err.rawMessage, {
      reason,
      field: d.field ?? metadata.field,
      metadata,
      retryAfter: d.retryAfter,
      cause: err,
    });
  }
  return new Unknown(err instanceof Error ? err.message : String(err), { cause: err });
}

/** Whether a call was refused by a node that no longer leads, before it did anything. */
export function isNotLeader(err: unknown): boolean {
  if (!(err instanceof ConnectError) || err.code !== Code.Unavailable) return false;
  return details(err).info?.reason === REASON_NOT_LEADER;
}

/**
 * The error of one refused job of a batch (its SubmitResult): its
 * reason's class, with its retry delay; undefined for an accepted job.
 */
export function fromResult(r: { error: string; reason: string; retryAfterMs: bigint }): BaristaError | undefined {
  if (!r.error) return undefined;
  const cut = r.error.indexOf(": ");
  const name = cut < 0 ? "" : r.error.slice(0, cut);
  if (!(CODE_NAMES as readonly string[]).includes(name)) return new Unknown(r.error, { reason: r.reason });
  return makeError(name, r.error.slice(cut + 2), {
    reason: r.reason || undefined,
    retryAfter: r.retryAfterMs > 0n ? Number(r.retryAfterMs) : undefined,
  });
}
