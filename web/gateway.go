package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/baristahq/barista/internal/text"
	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/gateway"
)

// The HTTP/JSON API: the handlers grpc-gateway generates from the routes
// in proto/barista.http.yaml, served under /v1/ on a node's HTTP address.
// They call this node's own gRPC server over its listener, so every
// request passes the same interceptors (bearer tokens and roles), the
// same validation and the same forwarding to the leader as a gRPC call.
// Only the Authorization header carries a token: no cookie, no other
// header reaches the gRPC server.

// OpenAPIPath is where every node serves the OpenAPI document of the
// HTTP/JSON API, without a token.
const OpenAPIPath = "/v1/openapi.json"

// ndjson is the content type of a stream: one JSON object per line.
const ndjson = "application/x-ndjson"

// gatewayHandler serves /v1/: the OpenAPI document and the API.
func (s *Server) gatewayHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+OpenAPIPath, serveOpenAPI)
	api, err := s.newGateway()
	if err != nil {
		// Only a broken build (a generated handler that cannot register)
		// gets here; the rest of the HTTP listener still serves.
		s.log.Error("HTTP/JSON API disabled", "error", err)
		api = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeHTTPError(w, newHTTPErr(http.StatusServiceUnavailable, "UNAVAILABLE", "the HTTP/JSON API is not available on this node: "+err.Error()))
		})
	}
	mux.Handle("/v1/", s.apiAuth(s.apiShares(s.apiLimits(api))))
	return mux
}

// newGateway builds the generated handlers on a connection of their own
// to this node's own gRPC listener (rpc.Server.GatewayConn).
func (s *Server) newGateway() (http.Handler, error) {
	cc, err := s.srv.GatewayConn()
	if err != nil {
		return nil, err
	}
	gw := newGatewayMux()
	ctx := context.Background()
	for _, register := range []func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error{
		gateway.RegisterClientHandler, gateway.RegisterAdminHandler, gateway.RegisterWorkerHandler, gateway.RegisterNodeHandler,
	} {
		if err := register(ctx, gw, cc); err != nil {
			return nil, err
		}
	}
	return gw, nil
}

var gatewayMuxMu sync.Mutex

// newGatewayMux is the gateway's router with the house rules: JSON as
// protojson writes it with the proto field names, unknown fields and
// query parameters refused, errors as {"code": NAME, "message": ...},
// names in path segments unescaped exactly once, and no header but
// Authorization forwarded either way, save the log indexes of
// read-your-writes: X-Barista-Min-Index in, X-Barista-Index out.
func newGatewayMux() *runtime.ServeMux {
	none := func(string) (string, bool) { return "", false }
	minIndexIn := func(h string) (string, bool) {
		if strings.EqualFold(h, wire.HeaderMinIndex) {
			return wire.HeaderMinIndex, true
		}
		return "", false
	}
	indexOut := func(h string) (string, bool) {
		if h == wire.HeaderIndex {
			return "X-Barista-Index", true
		}
		return "", false
	}
	// The query-parameter parser option sets a package variable of the
	// gateway library: two servers of one process (tests) must not build
	// their routers at once.
	gatewayMuxMu.Lock()
	defer gatewayMuxMu.Unlock()
	return runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, newGatewayMarshaler()),
		runtime.WithErrorHandler(apiError),
		runtime.WithRoutingErrorHandler(apiRoutingError),
		runtime.WithIncomingHeaderMatcher(minIndexIn),
		runtime.WithOutgoingHeaderMatcher(indexOut),
		runtime.WithOutgoingTrailerMatcher(none),
		runtime.WithUnescapingMode(runtime.UnescapingModeAllExceptReserved),
		runtime.WithDisablePathLengthFallback(),
		runtime.WithDisableHTTPMethodOverride(),
		runtime.WithForwardResponseOption(streamStart),
		runtime.WithStreamErrorHandler(streamError),
		runtime.SetQueryParameterParser(strictQuery{}),
	)
}

// apiLimits bounds the request body by the largest gRPC message
// (limits.max_message_bytes: the body is a JSON message, its payload in
// base64). A body whose Content-Length is over the bound is refused
// before any of it is read; a chunked one as soon as it passes it.
func (s *Server) apiLimits(next http.Handler) http.Handler {
	limit := s.maxBody
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			s.limitMetrics.httpRefused.WithLabelValues("body_too_large").Inc()
			closeUnread(w, r)
			writeHTTPError(w, newHTTPErr(http.StatusRequestEntityTooLarge, "RESOURCE_EXHAUSTED",
				fmt.Sprintf("request body: %d bytes (at most %d: limits.max_message_bytes)", r.ContentLength, limit)))
			return
		}
		release, ok := s.reserveBody(w, r, limit)
		if !ok {
			return
		}
		defer release()
		body := &apiBody{ReadCloser: http.MaxBytesReader(w, r.Body, limit), limit: limit, length: r.ContentLength}
		r.Body = body
		sw := &statusOnce{ResponseWriter: w, stall: s.stall}
		ctx := context.WithValue(context.WithValue(r.Context(), statusOnceKey{}, sw), apiBodyKey{}, body)
		next.ServeHTTP(sw, r.WithContext(ctx))
		if sw.deadline {
			// What the server writes after the handler (the rest of its
			// buffer, a stream's last chunk) is bounded too; the server
			// clears the deadline before the connection's next request.
			http.NewResponseController(w).SetWriteDeadline(time.Now().Add(sw.stall))
		}
		if body.tooLarge {
			s.limitMetrics.httpRefused.WithLabelValues("body_too_large").Inc()
		}
	})
}

// statusOnce keeps the first status written: a stream's answer is 200
// from its start (streamStart), and a later failure is a line of its
// body. Once an answer is complete (a stream refused before it started,
// see streamError), whatever else the gateway writes is dropped. Each
// write must reach the client within stall (limits.watch_stall_timeout):
// a client that reads nothing of an answer, a stream's above all, is
// disconnected instead of holding it.
type statusOnce struct {
	http.ResponseWriter
	wrote, done bool
	stall       time.Duration
	deadline    bool // a write deadline was set
}

type statusOnceKey struct{}

func (w *statusOnce) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *statusOnce) Write(b []byte) (int, error) {
	if w.done {
		return len(b), nil
	}
	w.wrote = true
	if w.stall > 0 && http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.stall)) == nil {
		w.deadline = true
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController flush a stream.
func (w *statusOnce) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// streamStart answers a stream as soon as the gRPC server has accepted
// it (sent its headers; a call refused at once has none): 200 and
// newline-delimited JSON, flushed at once, so that a client learns the
// stream is open before the first event. Unary answers (resp != nil)
// pass through.
func streamStart(ctx context.Context, w http.ResponseWriter, resp proto.Message) error {
	if resp != nil {
		return nil
	}
	if md, ok := runtime.ServerMetadataFromContext(ctx); !ok || len(md.HeaderMD) == 0 {
		return nil
	}
	w.Header().Set("Content-Type", ndjson)
	w.WriteHeader(http.StatusOK)
	return http.NewResponseController(w).Flush()
}

// streamError answers a stream the gRPC server refused before it started
// (no header sent yet) like any refused call: the status of its code and
// {"code", "message"}. A stream that fails later ends with an error line
// (apiMarshaler).
func streamError(ctx context.Context, err error) *status.Status {
	st := status.Convert(err)
	if sw, _ := ctx.Value(statusOnceKey{}).(*statusOnce); sw != nil && !sw.wrote {
		writeHTTPError(sw, statusError(st))
		sw.done = true
	}
	return st
}

// apiMarshaler is protojson, with a stream written as one message per
// line (no envelope) and a stream's late failure as one line
// {"error": {"code": NAME, "message": ...}}.
type apiMarshaler struct{ runtime.JSONPb }

// newGatewayMarshaler writes protojson with the proto field names (as
// the documentation and the CLI name them), every scalar even at its
// zero value, and refuses a body with an unknown field.
func newGatewayMarshaler() *apiMarshaler {
	return &apiMarshaler{runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
	}}
}

// Marshal unwraps the envelopes the gateway puts around a stream's
// messages ({"result": msg}) and errors ({"error": status}).
func (m *apiMarshaler) Marshal(v any) ([]byte, error) {
	switch v := v.(type) {
	case map[string]any:
		if r, ok := v["result"]; ok && len(v) == 1 {
			return m.JSONPb.Marshal(r)
		}
	case map[string]proto.Message:
		if st, ok := v["error"].(*spb.Status); ok && len(v) == 1 {
			return json.Marshal(map[string]errorBody{"error": statusError(status.FromProto(st)).body()})
		}
	}
	return m.JSONPb.Marshal(v)
}

// NewDecoder reads a request body once, into one buffer (apiBody:
// bounded, sized by its Content-Length), and decodes the message from
// it: no second copy of the body as json.RawMessage. Trailing bytes
// after the message are refused. An empty body is io.EOF, which the
// gateway reads as "no fields".
func (m *apiMarshaler) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		var data []byte
		var err error
		if b, ok := r.(*apiBody); ok {
			data, err = b.readAll()
		} else {
			data, err = io.ReadAll(r)
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(data)) == 0 {
			return io.EOF
		}
		if p, ok := v.(proto.Message); ok {
			if data, err = normalizeBody(data, p.ProtoReflect().Descriptor()); err != nil {
				var inv *text.InvalidError
				if b, ok := r.(*apiBody); ok && errors.As(err, &inv) {
					b.refused = inv.Field
				}
				return err
			}
			return m.UnmarshalOptions.Unmarshal(data, p)
		}
		return m.JSONPb.Unmarshal(data, v)
	})
}

// StreamContentType is the content type of a streamed answer.
func (*apiMarshaler) StreamContentType(any) string { return ndjson }

// httpStatus maps a gRPC code to the HTTP status of its answer.
func httpStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.Canceled:
		return 499 // the client closed the request
	case codes.InvalidArgument, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.FailedPrecondition:
		return http.StatusPreconditionFailed
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// apiError answers a failed call: the status of its gRPC code and
// {"code": NAME, "message": ...}, the message exactly as gRPC has it.
func apiError(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	if b, ok := bodyTooLarge(ctx); ok {
		closeUnread(w, r)
		writeHTTPError(w, newHTTPErr(http.StatusRequestEntityTooLarge, "RESOURCE_EXHAUSTED", b.errTooLarge().Error()))
		return
	}
	st := status.Convert(err)
	httpCode := 0
	if hs := (*runtime.HTTPStatusError)(nil); errors.As(err, &hs) {
		// The router's own refusals (a malformed escape in the path).
		st, httpCode = status.Convert(hs.Err), hs.HTTPStatus
		if st.Code() == codes.Unknown && httpCode == http.StatusBadRequest {
			st = status.New(codes.InvalidArgument, st.Message())
		}
	}
	e := statusError(st)
	if httpCode != 0 {
		e.status = httpCode
	}
	w.Header().Del("Trailer")
	w.Header().Del("Transfer-Encoding")
	if e.retryAfterMs > 0 {
		// RFC 9110 §10.2.3: whole seconds, rounded up.
		w.Header().Set("Retry-After", strconv.FormatInt((e.retryAfterMs+999)/1000, 10))
	}
	if e.reason == text.ReasonTooLarge {
		// A payload over the cluster's limit: permanent, as a body too
		// large for any message is.
		e.status = http.StatusRequestEntityTooLarge
	}
	e.msg = bodyError(e.msg)
	if f := bodyField(ctx); f != "" && e.field == "" {
		e.field = f
	}
	if field, msg, ok := paramError(e.msg); ok {
		e.field, e.msg = field, msg
	}
	writeHTTPError(w, e)
}

// pathParamErr is the gateway's refusal of a path parameter it could not
// convert ("type mismatch, parameter: job_id, error: strconv.ParseUint:
// parsing \"abc\": invalid syntax"): its text is the gateway's, not
// ours, and names Go's parser.
var pathParamErr = regexp.MustCompile(`^type mismatch, parameter: ([a-z0-9_.]+), error: strconv\.Parse\w+: parsing ("(?:[^"\\]|\\.)*"): (invalid syntax|value out of range)$`)

// paramError says the gateway's refusal of a path parameter in our
// words: the field, and one sentence naming it, what was given and what
// it takes; ok is false for any other message.
func paramError(msg string) (field, out string, ok bool) {
	m := pathParamErr.FindStringSubmatch(msg)
	if m == nil {
		return "", msg, false
	}
	if m[3] == "value out of range" {
		return m[1], m[1] + ": " + m[2] + " is out of range", true
	}
	return m[1], m[1] + ": " + m[2] + " is not a whole number", true
}

// bodyError rewrites protojson's refusal of a request body ("proto:"
// and a space that is, at random per build, a no-break space) as a
// stable message about the body: "request body: (line 1:17): unknown
// field \"sise\"".
func bodyError(msg string) string {
	for _, prefix := range []string{"proto: ", "proto:\u00a0"} {
		if rest, ok := strings.CutPrefix(msg, prefix); ok {
			return "request body: " + rest
		}
	}
	return msg
}

// apiRoutingError answers a request no route matches.
func apiRoutingError(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, httpCode int) {
	e := newHTTPErr(http.StatusBadRequest, "INVALID_ARGUMENT", "bad request path")
	switch httpCode {
	case http.StatusNotFound:
		e = newHTTPErr(http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no route %s %s (the routes: %s)", r.Method, r.URL.EscapedPath(), OpenAPIPath))
	case http.StatusMethodNotAllowed:
		e = newHTTPErr(http.StatusMethodNotAllowed, "UNIMPLEMENTED", fmt.Sprintf("%s is not a method of %s (the routes: %s)", r.Method, r.URL.EscapedPath(), OpenAPIPath))
	}
	writeHTTPError(w, e)
}

// queryAliases are short query parameter names for fields of a request
// message (GET /v1/jobs?stale=true, GET /v1/events?from=42).
var queryAliases = map[string]string{"stale": "read.stale", "from": "from_seq"}

// strictQuery fills a request message from the query like grpc-gateway's
// own parser, but refuses a parameter that names no field of the message
// (a misspelt filter must not silently list everything), and reads the
// aliases of queryAliases.
type strictQuery struct{}

// Parse implements runtime.QueryParameterParser.
func (strictQuery) Parse(msg proto.Message, values url.Values, filter *utilities.DoubleArray) error {
	md := msg.ProtoReflect().Descriptor()
	named := make(url.Values, len(values))
	for key, v := range values {
		field := key
		if !hasFieldPath(md, field) {
			alias, ok := queryAliases[key]
			if !ok || !hasFieldPath(md, alias) {
				return fmt.Errorf("unknown query parameter %q (this route takes %s)", key, strings.Join(queryParams(md), ", "))
			}
			field = alias
		}
		if _, dup := named[field]; dup {
			return fmt.Errorf("query parameter %q is given twice (or with its alias)", key)
		}
		checked, err := queryValues(md, field, v)
		if err != nil {
			return err
		}
		named[field] = checked
	}
	return (&runtime.DefaultQueryParser{}).Parse(msg, named, filter)
}

// queryValues checks the values of the query parameter of field path in
// md as a body's are checked (gatewayjson.go), naming the field, and
// returns them with enum names made exact.
func queryValues(md protoreflect.MessageDescriptor, path string, values []string) ([]string, error) {
	fd := fieldAt(md, path)
	if fd == nil {
		return values, nil
	}
	out := make([]string, len(values))
	for i, s := range values {
		out[i] = s
		if fd.Kind() == protoreflect.BoolKind {
			if _, err := strconv.ParseBool(s); err != nil {
				return nil, fmt.Errorf("%s: %q is not true or false", path, s)
			}
			continue
		}
		var v any = s
		if _, err := normalizeValue(fd, &v, path); err != nil {
			return nil, err
		}
		out[i] = v.(string)
	}
	return out, nil
}

// fieldAt returns the field a dotted path names in md (hasFieldPath), or
// nil.
func fieldAt(md protoreflect.MessageDescriptor, path string) protoreflect.FieldDescriptor {
	if !hasFieldPath(md, path) {
		return nil
	}
	parts := strings.Split(path, ".")
	var fd protoreflect.FieldDescriptor
	for _, p := range parts {
		if fd = md.Fields().ByName(protoreflect.Name(p)); fd == nil {
			fd = md.Fields().ByJSONName(p)
		}
		md = fd.Message()
	}
	return fd
}

// hasFieldPath reports whether a dotted path of field names (proto or
// JSON names) leads to a field of md through singular message fields.
func hasFieldPath(md protoreflect.MessageDescriptor, path string) bool {
	parts := strings.Split(path, ".")
	for i, p := range parts {
		fd := md.Fields().ByName(protoreflect.Name(p))
		if fd == nil {
			fd = md.Fields().ByJSONName(p)
		}
		if fd == nil {
			return false
		}
		if i == len(parts)-1 {
			return true
		}
		if fd.Message() == nil || fd.IsList() || fd.IsMap() {
			return false
		}
		md = fd.Message()
	}
	return false
}

// queryParams lists the query parameters a request message takes, for
// the message refusing an unknown one.
func queryParams(md protoreflect.MessageDescriptor) []string {
	short := map[string]string{}
	for alias, field := range queryAliases {
		short[field] = alias
	}
	var out []string
	var walk func(md protoreflect.MessageDescriptor, prefix string)
	walk = func(md protoreflect.MessageDescriptor, prefix string) {
		for i := 0; i < md.Fields().Len(); i++ {
			fd := md.Fields().Get(i)
			name := prefix + string(fd.Name())
			switch {
			case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
				walk(fd.Message(), name+".")
			case short[name] != "":
				out = append(out, short[name])
			default:
				out = append(out, name)
			}
		}
	}
	walk(md, "")
	return out
}

// serveOpenAPI serves the OpenAPI document (no token: it describes the
// routes, it holds no data).
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc, err := openAPIDocument()
	if err != nil {
		writeHTTPError(w, newHTTPErr(http.StatusInternalServerError, "INTERNAL", "the OpenAPI document: "+err.Error()))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.Write(doc)
}

// openAPIDocument is the generated document (pb.OpenAPI) completed with
// what the generator cannot know: the bearer token, the error shape the
// gateway writes, the stream of /v1/events as newline-delimited events,
// and the short names of query parameters.
var openAPIDocument = sync.OnceValues(func() ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(pb.OpenAPI, &doc); err != nil {
		return nil, err
	}
	doc["info"] = map[string]any{
		"title":   "barista",
		"version": "v1",
		"description": "The client and admin API of barista as HTTP/JSON, on every node's HTTP address. " +
			"Every route but this document needs the header \"Authorization: Bearer TOKEN\" (no cookie is accepted). " +
			"A client token acts on its own tenant; an admin names one with \"tenant\". " +
			"JSON is protojson with the proto field names: 64-bit integers as strings, enums by name, bytes in base64. " +
			"An error is {\"code\": NAME, \"message\": ...} with the gRPC code's name and the HTTP status that code maps to.",
	}
	doc["securityDefinitions"] = map[string]any{
		"bearer": map[string]any{"type": "apiKey", "in": "header", "name": "Authorization", "description": "Bearer TOKEN"},
	}
	doc["security"] = []any{map[string]any{"bearer": []any{}}}

	defs, _ := doc["definitions"].(map[string]any)
	if defs == nil {
		return nil, errors.New("no definitions")
	}
	var names []any
	for c := codes.OK + 1; c <= codes.Unauthenticated; c++ {
		names = append(names, wire.CodeName(c))
	}
	delete(defs, "googleRpcStatus")
	delete(defs, "protobufAny")
	defs["Error"] = map[string]any{
		"type":     "object",
		"required": []any{"code", "message"},
		"properties": map[string]any{
			"code":    map[string]any{"type": "string", "enum": names, "description": "the gRPC status code's name"},
			"message": map[string]any{"type": "string"},
		},
	}
	renameRefs(doc, "#/definitions/googleRpcStatus", "#/definitions/Error")

	paths, _ := doc["paths"].(map[string]any)
	events, _ := paths["/v1/events"].(map[string]any)
	watch, _ := events["get"].(map[string]any)
	if watch == nil {
		return nil, errors.New("no GET /v1/events")
	}
	watch["produces"] = []any{ndjson}
	responses := watch["responses"].(map[string]any)
	responses["200"] = map[string]any{
		"description": "A stream of newline-delimited JSON: one event per line, in order. " +
			"Resume after a broken stream with from = the last seq + 1. " +
			"A stream that fails after it started ends with one line {\"error\": {\"code\": NAME, \"message\": ...}}.",
		"schema": map[string]any{"$ref": "#/definitions/v1Event"},
	}
	for _, item := range paths {
		for _, op := range item.(map[string]any) {
			params, _ := op.(map[string]any)["parameters"].([]any)
			for _, p := range params {
				p := p.(map[string]any)
				for alias, field := range queryAliases {
					if p["in"] == "query" && p["name"] == field {
						p["name"] = alias
						desc, _ := p["description"].(string)
						p["description"] = strings.TrimSpace(desc + "\n(" + field + " is accepted too.)")
					}
				}
			}
		}
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	if strings.Contains(string(out), "googleRpcStatus") || strings.Contains(string(out), "protobufAny") {
		return nil, errors.New("a reference to the replaced error schema remains")
	}
	return out, nil
})

// renameRefs replaces every "$ref": from with to in a decoded JSON value.
func renameRefs(v any, from, to string) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k == "$ref" && e == from {
				v[k] = to
				continue
			}
			renameRefs(e, from, to)
		}
	case []any:
		for _, e := range v {
			renameRefs(e, from, to)
		}
	}
}
