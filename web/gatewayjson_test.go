package web

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// TestEveryEnumInEveryForm: every enum field of every request message of
// the API takes its value's name, its short name (what the CLI says:
// "fair" for GROUP_FAIR) in lower and upper case, and its name in lower
// case; what it refuses is named with the field's .proto name and the
// short names it takes.
func TestEveryEnumInEveryForm(t *testing.T) {
	files := []protoreflect.FileDescriptor{pb.File_client_proto, pb.File_admin_proto, clusterpb.File_node_proto, pb.File_worker_proto}
	seen := 0
	for _, f := range files {
		for i := range f.Services().Len() {
			methods := f.Services().Get(i).Methods()
			for j := range methods.Len() {
				md := methods.Get(j).Input()
				for k := range md.Fields().Len() {
					fd := md.Fields().Get(k)
					if fd.Kind() != protoreflect.EnumKind || fd.IsList() {
						continue
					}
					prefix := enumPrefix(fd.Enum())
					vals := fd.Enum().Values()
					for v := range vals.Len() {
						name := string(vals.Get(v).Name())
						if strings.HasSuffix(name, "_UNSPECIFIED") {
							continue
						}
						short := strings.TrimPrefix(name, prefix)
						for _, given := range []string{name, strings.ToLower(name), short, strings.ToLower(short), strings.ReplaceAll(strings.ToLower(short), "_", "-")} {
							body, _ := json.Marshal(map[string]string{string(fd.Name()): given})
							out, err := normalizeBody(body, md)
							var got map[string]string
							if err != nil || json.Unmarshal(out, &got) != nil || got[string(fd.Name())] != name {
								t.Errorf("%s.%s = %q: %s %v, want %s", md.Name(), fd.Name(), given, out, err, name)
							}
							seen++
						}
					}
				}
			}
		}
	}
	if seen < 50 {
		t.Fatalf("only %d enum forms checked", seen)
	}
	for _, c := range []struct {
		md   protoreflect.MessageDescriptor
		body string
		want string
	}{
		{(&pb.UpsertTenantRequest{}).ProtoReflect().Descriptor(), `{"group_order":"fifo-ish"}`, `group_order: "fifo-ish" is not a group order (want fifo or fair)`},
		{(&pb.SubmitRequest{}).ProtoReflect().Descriptor(), `{"size":"xl"}`, `size: "xl" is not a size (want sm, md or lg)`},
		{(&pb.SubmitRequest{}).ProtoReflect().Descriptor(), `{"estCostMs":"abc"}`, `est_cost_ms: "abc" is not a whole number`},
		{(&pb.SubmitRequest{}).ProtoReflect().Descriptor(), `{"max_attempts":-1}`, `max_attempts: -1 is out of range (0 to 4294967295)`},
		{(&pb.SubmitRequest{}).ProtoReflect().Descriptor(), `{"payload":"not base64!"}`, `payload: "not base64!" is not base64 (a bytes field takes its bytes in base64 in JSON)`},
		{(&pb.UpsertTenantRequest{}).ProtoReflect().Descriptor(), `{"caps":{"max_running":"two"}}`, `caps.max_running: "two" is not a whole number`},
		{(&pb.UpsertTenantRequest{}).ProtoReflect().Descriptor(), `{"allow_deadlines":"yes"}`, `allow_deadlines: "yes" is not true or false`},
		{(&pb.SubmitBatchRequest{}).ProtoReflect().Descriptor(), `{"jobs":[{"size":"sm"},{"size":"huge"}]}`, `jobs[1].size: "huge" is not a size (want sm, md or lg)`},
	} {
		_, err := normalizeBody([]byte(c.body), c.md)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s %s: %v\nwant %s", c.md.Name(), c.body, err, c.want)
		}
	}
}
