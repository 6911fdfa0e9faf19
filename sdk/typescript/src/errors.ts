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
import { BadRequestSchema, ErrorInfoSchema, RetryInfoSchema, StatusSchema, type Status } from "./gen/rpc_status_pb.js";
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
export const ResourceUnknown = reasonClass("ResourceUnknown");
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
/**
 * The node does not lead and did nothing with the call: the SDK asks
 * another node itself; a caller sees it only when no node could serve the
 * call.
 */
export const NotLeader = reasonClass("NotLeader");

export type QuotaExceeded = InstanceType<typeof QuotaExceeded>;
export type RateLimited = InstanceType<typeof RateLimited>;
export type MaxGroups = InstanceType<typeof MaxGroups>;
export type KeyConflict = InstanceType<typeof KeyConflict>;
export type KeyJobGone = InstanceType<typeof KeyJobGone>;
export type TenantUnknown = InstanceType<typeof TenantUnknown>;
export type PoolUnknown = InstanceType<typeof PoolUnknown>;
export type ResourceUnknown = InstanceType<typeof ResourceUnknown>;
export type TooLarge = InstanceType<typeof TooLarge>;
export type MaxClass = InstanceType<typeof MaxClass>;
export type DeadlinesNotAllowed = InstanceType<typeof DeadlinesNotAllowed>;
export type SubscriptionRequired = InstanceType<typeof SubscriptionRequired>;
export type FeatureLevel = InstanceType<typeof FeatureLevel>;
export type NotLeader = InstanceType<typeof NotLeader>;

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

/** A detail of a status: its type's full name ("google.rpc.ErrorInfo") and its bytes. */
interface Detail {
  type: string;
  value: Uint8Array;
}

/** The key of an ErrorInfo's metadata that names the request field at fault. */
const FIELD_KEY = "field";

/**
 * The ErrorInfo (of barista's domain), the RetryInfo's delay and the field
 * at fault (the ErrorInfo's, else the first a BadRequest names) of a
 * status's details.
 */
function readDetails(list: Iterable<Detail>): Details {
  const out: Details = {};
  for (const d of list) {
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
  const field = out.info?.metadata[FIELD_KEY];
  if (field) out.field = field;
  return out;
}

/** The details of a ConnectError (the transport decoded its grpc-status-details-bin trailer). */
function details(err: ConnectError): Details {
  return readDetails(err.details.filter((d): d is Detail => "type" in d));
}

/** The details of a google.rpc.Status (their Any's type URL names each type). */
function statusDetails(st: Status): Details {
  return readDetails(st.details.map((a) => ({ type: a.typeUrl.slice(a.typeUrl.lastIndexOf("/") + 1), value: a.value })));
}

/** The error of a refusal: its code, message and what its details say. */
function refusal(code: CodeName, message: string, d: Details, cause?: unknown): BaristaError {
  const metadata = d.info?.metadata ?? {};
  return makeError(code, message, { reason: d.info?.reason || undefined, field: d.field, metadata, retryAfter: d.retryAfter, cause });
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
  if (err instanceof ConnectError) return refusal(codeName(err.code), err.rawMessage, details(err), err);
  return new Unknown(err instanceof Error ? err.message : String(err), { cause: err });
}

/** Whether a call was refused by a node that no longer leads, before it did anything. */
export function isNotLeader(err: unknown): boolean {
  if (!(err instanceof ConnectError) || err.code !== Code.Unavailable) return false;
  return details(err).info?.reason === REASON_NOT_LEADER;
}

/**
 * The error of one refused job of a batch (its SubmitResult), read from its
 * status as a single call's is: its code's or its cause's class, with
 * reason, field and retryAfter; undefined for an accepted job. A result of
 * a server that sends no status (an earlier build) is an Unknown error
 * with its text as the message: its code is not read out of the text.
 */
export function fromResult(r: { status: Uint8Array; error: string }): BaristaError | undefined {
  if (r.status.length > 0) {
    let st: Status;
    try {
      st = fromBinary(StatusSchema, r.status);
    } catch (e) {
      return new Internal("a batch result with a malformed status", { cause: e });
    }
    return refusal(CODE_NAMES[st.code] ?? "UNKNOWN", st.message, statusDetails(st));
  }
  if (r.error) return new Unknown(r.error);
  return undefined;
}
