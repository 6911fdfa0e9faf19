package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Spec is a job's command line, decoded from its payload.
type Spec struct {
	Argv []string          // program and arguments; Argv[0] looked up in PATH
	Env  map[string]string // laid over the job's base environment (Options.Env)
	Dir  string            // working directory ("" = the calling process's)
}

// FieldError is the error returned for an invalid payload or Spec. Field
// names the offending payload field ("argv", "argv[2]", "env", "env[KEY]",
// "dir"), or is "" when the payload as a whole is wrong (not a JSON object).
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return "payload: " + e.Err.Error()
	}
	return "payload: " + e.Field + ": " + e.Err.Error()
}

// wantPayload says what a command worker's payload is, for the refusal of
// another.
const wantPayload = `a command worker runs {"argv": ["PROGRAM", "ARG", ...], "env": {...}, "dir": "..."} (barista submit -- PROGRAM ARG... builds it)`

// shownJSON renders given JSON in a message, cut at 40 bytes.
func shownJSON(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 40 {
		return string(b[:37]) + "..."
	}
	return string(b)
}

func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(field string, err error) error { return &FieldError{Field: field, Err: err} }

// payload is the wire form of a Spec. Its fields are in alphabetical order of
// their JSON names so that EncodePayload's output has sorted keys.
type payload struct {
	Argv []string          `json:"argv"`
	Dir  string            `json:"dir,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
}

// ParsePayload decodes a job payload: a JSON object
//
//	{"argv": ["prog", "arg", ...], "env": {"KEY": "value"}, "dir": "/path"}
//
// argv is required and non-empty and argv[0] must not be empty; env and dir
// are optional (null is the same as absent). Unknown fields, values of the
// wrong type, trailing data after the object, environment keys that are empty
// or contain '=', and strings containing NUL bytes are errors. Errors are
// [*FieldError] values naming the field. An absent or empty env decodes to a
// nil map.
func ParsePayload(b []byte) (Spec, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return Spec{}, fieldErr("", errors.New("empty, so there is no argv to run: "+wantPayload))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil || fields == nil {
		return Spec{}, fieldErr("", fmt.Errorf("%s is not a JSON object: %s", shownJSON(b), wantPayload))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Spec{}, fieldErr("", errors.New("more than one JSON value: "+wantPayload))
	}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		switch name {
		case "argv", "env", "dir":
		default:
			return Spec{}, fieldErr(name, errors.New("not a field of a command payload (it takes argv, env and dir)"))
		}
	}

	var s Spec
	raw, ok := fields["argv"]
	if !ok {
		return Spec{}, fieldErr("argv", errors.New("required: the program and its arguments, [\"PROGRAM\", \"ARG\", ...]"))
	}
	if err := json.Unmarshal(raw, &s.Argv); err != nil {
		return Spec{}, fieldErr("argv", fmt.Errorf("%s is not a list of strings", shownJSON(raw)))
	}
	if raw, ok := fields["env"]; ok {
		if err := json.Unmarshal(raw, &s.Env); err != nil {
			return Spec{}, fieldErr("env", fmt.Errorf("%s is not an object of strings", shownJSON(raw)))
		}
		if len(s.Env) == 0 {
			s.Env = nil
		}
	}
	if raw, ok := fields["dir"]; ok {
		if err := json.Unmarshal(raw, &s.Dir); err != nil {
			return Spec{}, fieldErr("dir", fmt.Errorf("%s is not a string", shownJSON(raw)))
		}
	}
	if err := validateSpec(s); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// EncodePayload is the inverse of [ParsePayload]: it returns the payload of
// s as compact JSON with keys sorted ("argv", "dir", "env", and the env keys
// sorted), omitting an empty dir and env, and without HTML escaping. The
// output is deterministic. It returns a [*FieldError] if s is invalid by the
// rules of ParsePayload.
func EncodePayload(s Spec) ([]byte, error) {
	if err := validateSpec(s); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(payload{Argv: s.Argv, Dir: s.Dir, Env: s.Env}); err != nil {
		return nil, fmt.Errorf("runner: encode payload: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// validateSpec checks what the kernel and the payload format require of a
// Spec.
func validateSpec(s Spec) error {
	if len(s.Argv) == 0 {
		return fieldErr("argv", errors.New("empty: give the program and its arguments, [\"PROGRAM\", \"ARG\", ...]"))
	}
	if s.Argv[0] == "" {
		return fieldErr("argv[0]", errors.New("program name must not be empty"))
	}
	for i, a := range s.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return fieldErr(fmt.Sprintf("argv[%d]", i), errors.New("contains a NUL byte"))
		}
	}
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case k == "":
			return fieldErr("env[]", errors.New("empty variable name"))
		case strings.ContainsAny(k, "=\x00"):
			return fieldErr(fmt.Sprintf("env[%s]", k), errors.New("variable name contains '=' or a NUL byte"))
		case strings.IndexByte(s.Env[k], 0) >= 0:
			return fieldErr(fmt.Sprintf("env[%s]", k), errors.New("value contains a NUL byte"))
		}
	}
	if strings.IndexByte(s.Dir, 0) >= 0 {
		return fieldErr("dir", errors.New("contains a NUL byte"))
	}
	return nil
}
