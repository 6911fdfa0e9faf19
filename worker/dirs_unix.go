//go:build unix

package worker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// privateDir makes dir with mode if it is missing (its missing parents
// with 0755), and checks that it is a directory (not a link) of this
// process's user that allows other users nothing mode does not.
func privateDir(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	switch err := os.Mkdir(dir, mode); {
	case err == nil:
		// The umask may have taken bits mode needs.
		if err := os.Chmod(dir, mode); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrExist):
		return err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory (a link is refused: name the directory itself)", dir)
	}
	if owner := st.Sys().(*syscall.Stat_t).Uid; int(owner) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to this worker's user (uid %d)", dir, owner, os.Geteuid())
	}
	if perm := st.Mode().Perm(); perm&^mode != 0 {
		return fmt.Errorf("%s has mode %04o, which lets other users in: want %04o (chmod %o %s)", dir, perm, mode, mode, dir)
	}
	return nil
}

// reachable checks that u may search dir and every directory above it.
func reachable(dir string, u *JobUser) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for d := abs; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		sys := st.Sys().(*syscall.Stat_t)
		perm := st.Mode().Perm()
		var bit os.FileMode = 0o001
		switch {
		case sys.Uid == u.UID:
			bit = 0o100
		case sys.Gid == u.GID || slices.Contains(u.Groups, sys.Gid):
			bit = 0o010
		}
		if perm&bit == 0 {
			return fmt.Errorf("%s cannot reach its job directories under %s: %s (mode %04o, uid %d, gid %d) is closed to it; choose a --work-dir that others may traverse, e.g. /var/lib/barista-worker/jobs", u, abs, d, perm, sys.Uid, sys.Gid)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
