package rpc

import (
	"strconv"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/proto/clusterpb"
)

// TestSetGroupCommand: the command a SetGroup proposes, for an admin and
// for the tenant's own token; a bad cap is INVALID_ARGUMENT naming the
// field and the rule.
func TestSetGroupCommand(t *testing.T) {
	for _, c := range []struct {
		value    string
		asTenant bool
		kind     clusterpb.GroupCapKind
		limit    uint32
	}{
		{"inherit", false, clusterpb.GroupCapKind_GROUP_CAP_INHERIT, 0},
		{"none", false, clusterpb.GroupCapKind_GROUP_CAP_NONE, 0},
		{"3", false, clusterpb.GroupCapKind_GROUP_CAP_LIMIT, 3},
		{"1000000", false, clusterpb.GroupCapKind_GROUP_CAP_LIMIT, 1_000_000},
		// The tenant's own cap: inherit and none both clear it.
		{"inherit", true, clusterpb.GroupCapKind_GROUP_CAP_NONE, 0},
		{"none", true, clusterpb.GroupCapKind_GROUP_CAP_NONE, 0},
		{"2", true, clusterpb.GroupCapKind_GROUP_CAP_LIMIT, 2},
	} {
		cmd, err := setGroupCommand("acme", "store-7", c.value, c.asTenant)
		if err != nil {
			t.Fatalf("%q as tenant %v: %v", c.value, c.asTenant, err)
		}
		if cmd.Tenant != "acme" || cmd.Group != "store-7" || cmd.AsTenant != c.asTenant || cmd.CapKind != c.kind || cmd.Limit != c.limit {
			t.Errorf("%q as tenant %v: %v, want kind %v limit %d", c.value, c.asTenant, cmd, c.kind, c.limit)
		}
	}
	for _, v := range []string{"", "0", "-1", "1000001", "x", "Inherit"} {
		_, err := setGroupCommand("acme", "g", v, false)
		want := `cap: "` + v + `" (want inherit, none or a number 1..1000000)`
		if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != want {
			t.Errorf("cap %q: %v, want INVALID_ARGUMENT %s", v, err, want)
		}
	}
}

// TestGroupNameAtTheEdge: a bad group name is INVALID_ARGUMENT naming the
// field, the byte and the rule.
func TestGroupNameAtTheEdge(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"", "group: group name is empty"},
		{"a b", `group: group name "a b" has ' ' at byte 1 (allowed: A-Z a-z 0-9 . _ : @ -)`},
		{string(make([]byte, 129)), "group: group name is 129 bytes (max 128)"},
	} {
		err := groupNameErr("group", c.name)
		if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != c.want {
			t.Errorf("%q: %v, want %s", c.name, err, c.want)
		}
	}
	if err := groupNameErr("group", "cust:42@eu-1_a.b"); err != nil {
		t.Errorf("a valid name: %v", err)
	}
}

// TestGroupPageToken: a token names the group a page continues after,
// any name quoted; anything else is refused.
func TestGroupPageToken(t *testing.T) {
	for _, name := range []string{"", "a", "store-7", `we"ird`} {
		after, first, err := parseGroupPageToken(groupPageToken(name))
		if err != nil || after != name || first {
			t.Errorf("%q: after %q first %v err %v", name, after, first, err)
		}
	}
	if after, first, err := parseGroupPageToken(""); err != nil || after != "" || !first {
		t.Errorf("empty token: %q %v %v", after, first, err)
	}
	for _, tok := range []string{"g", "gx", `g"a`, "p7", `x"a"`} {
		_, _, err := parseGroupPageToken(tok)
		want := "page_token: " + strconv.Quote(tok) + " is not a token this server issued"
		if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != want {
			t.Errorf("%q: %v", tok, err)
		}
	}
}
