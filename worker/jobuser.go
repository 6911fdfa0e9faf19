package worker

import (
	"fmt"
	"os/user"
	"strconv"
	"strings"

	"github.com/baristahq/barista/worker/runner"
)

// JobUser is the user a worker runs its jobs as (barista worker --run-as).
type JobUser struct {
	Name string // "" for a user ID the system does not name
	runner.Identity
}

func (u *JobUser) String() string {
	if u.Name == "" {
		return fmt.Sprintf("uid %d", u.UID)
	}
	return fmt.Sprintf("user %s (uid %d)", u.Name, u.UID)
}

// LookupUser finds the user spec names: a user name, a numeric user ID,
// or UID:GID. A named user (or a user ID the system knows) brings its
// primary group and its supplementary groups; an unknown user ID runs
// with the group of the same number (or GID) and no other.
func LookupUser(spec string) (*JobUser, error) {
	if spec == "" {
		return nil, fmt.Errorf("no user given")
	}
	uidText, gidText, pair := strings.Cut(spec, ":")
	uid, numeric := parseID(uidText)
	if pair {
		gid, ok := parseID(gidText)
		if !numeric || !ok {
			return nil, fmt.Errorf("%q: want a user name, a UID, or UID:GID with numbers", spec)
		}
		return &JobUser{Identity: runner.Identity{UID: uid, GID: gid}}, nil
	}
	var u *user.User
	var err error
	if numeric {
		u, err = user.LookupId(uidText)
		if err != nil {
			return &JobUser{Identity: runner.Identity{UID: uid, GID: uid}}, nil
		}
	} else if u, err = user.Lookup(spec); err != nil {
		return nil, fmt.Errorf("no user %q on this machine", spec)
	}
	return fromUser(u)
}

func fromUser(u *user.User) (*JobUser, error) {
	uid, ok1 := parseID(u.Uid)
	gid, ok2 := parseID(u.Gid)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("user %s: IDs %q:%q are not numbers", u.Username, u.Uid, u.Gid)
	}
	ju := &JobUser{Name: u.Username, Identity: runner.Identity{UID: uid, GID: gid}}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("user %s: its groups: %w", u.Username, err)
	}
	for _, g := range ids {
		if id, ok := parseID(g); ok {
			ju.Groups = append(ju.Groups, id)
		}
	}
	return ju, nil
}

func parseID(s string) (uint32, bool) {
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err == nil
}

// currentUserName is the name of this process's user, "" if it has none.
func currentUserName() string {
	u, err := user.Current()
	if err != nil {
		return ""
	}
	return u.Username
}
