package runner

import (
	"errors"
	"reflect"
	"testing"
)

func TestPayloadRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		json string
	}{
		{Spec{Argv: []string{"true"}}, `{"argv":["true"]}`},
		{
			Spec{Argv: []string{"sh", "-c", `echo "<a> & b" é`, ""}, Env: map[string]string{"Z": "1", "A": "x=y", "M": ""}, Dir: "/tmp/w d"},
			`{"argv":["sh","-c","echo \"<a> & b\" é",""],"dir":"/tmp/w d","env":{"A":"x=y","M":"","Z":"1"}}`,
		},
		{Spec{Argv: []string{"ls"}, Env: map[string]string{"PATH": "/bin"}}, `{"argv":["ls"],"env":{"PATH":"/bin"}}`},
	} {
		b, err := EncodePayload(tc.spec)
		if err != nil {
			t.Fatalf("EncodePayload(%+v): %v", tc.spec, err)
		}
		if string(b) != tc.json {
			t.Errorf("EncodePayload(%+v) = %s, want %s", tc.spec, b, tc.json)
		}
		got, err := ParsePayload(b)
		if err != nil {
			t.Fatalf("ParsePayload(%s): %v", b, err)
		}
		if !reflect.DeepEqual(got, tc.spec) {
			t.Errorf("ParsePayload(%s) = %+v, want %+v", b, got, tc.spec)
		}
	}
}

func TestParsePayloadNormalizes(t *testing.T) {
	got, err := ParsePayload([]byte(` {"dir": null, "env": {}, "argv": ["a", "b"]} `))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Spec{Argv: []string{"a", "b"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
}

func TestParsePayloadErrors(t *testing.T) {
	for _, tc := range []struct {
		payload string
		field   string
	}{
		{``, ""},
		{`not json`, ""},
		{`["argv"]`, ""},
		{`null`, ""},
		{`"argv"`, ""},
		{`{"argv":["a"]`, ""},
		{`{"argv":["a"]} {}`, ""},
		{`{}`, "argv"},
		{`{"env":{"A":"1"}}`, "argv"},
		{`{"argv":null}`, "argv"},
		{`{"argv":[]}`, "argv"},
		{`{"argv":"ls"}`, "argv"},
		{`{"argv":[1,2]}`, "argv"},
		{`{"argv":[""]}`, "argv[0]"},
		{`{"argv":["a","b\u0000"]}`, "argv[1]"},
		{`{"argv":["a"],"cwd":"/"}`, "cwd"},
		{`{"argv":["a"],"Argv":["b"]}`, "Argv"},
		{`{"argv":["a"],"env":["A=1"]}`, "env"},
		{`{"argv":["a"],"env":{"A":1}}`, "env"},
		{`{"argv":["a"],"env":{"":"1"}}`, "env[]"},
		{`{"argv":["a"],"env":{"A=B":"1"}}`, "env[A=B]"},
		{`{"argv":["a"],"env":{"A":"\u0000"}}`, "env[A]"},
		{`{"argv":["a"],"dir":3}`, "dir"},
		{`{"argv":["a"],"dir":"/x\u0000"}`, "dir"},
	} {
		_, err := ParsePayload([]byte(tc.payload))
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("ParsePayload(%s) = %v, want a *FieldError", tc.payload, err)
			continue
		}
		if fe.Field != tc.field {
			t.Errorf("ParsePayload(%s): field %q, want %q (%v)", tc.payload, fe.Field, tc.field, err)
		}
	}
}

func TestEncodePayloadRejectsInvalid(t *testing.T) {
	for _, tc := range []struct {
		spec  Spec
		field string
	}{
		{Spec{}, "argv"},
		{Spec{Argv: []string{""}}, "argv[0]"},
		{Spec{Argv: []string{"a"}, Env: map[string]string{"A=": "1"}}, "env[A=]"},
	} {
		_, err := EncodePayload(tc.spec)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("EncodePayload(%+v) = %v, want a FieldError for %q", tc.spec, err, tc.field)
		}
	}
}

func TestFieldErrorMessage(t *testing.T) {
	_, err := ParsePayload([]byte(`{"argv":["a"],"color":"red"}`))
	if got, want := err.Error(), `payload: color: not a field of a command payload (it takes argv, env and dir)`; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	// One sentence each, naming what was given and what a command worker
	// runs, with nothing of Go's decoder in it.
	for _, c := range []struct{ payload, want string }{
		{``, `payload: empty, so there is no argv to run: ` + wantPayload},
		{`"x"`, `payload: "x" is not a JSON object: ` + wantPayload},
		{`{"argv":"ls"}`, `payload: argv: "ls" is not a list of strings`},
		{`{}`, `payload: argv: required: the program and its arguments, ["PROGRAM", "ARG", ...]`},
		{`{"argv":["a"],"env":["A=1"]}`, `payload: env: ["A=1"] is not an object of strings`},
	} {
		if _, err := ParsePayload([]byte(c.payload)); err == nil || err.Error() != c.want {
			t.Errorf("ParsePayload(%s) = %v\nwant %s", c.payload, err, c.want)
		}
	}
}
