//go:build !linux

package runner

import (
	"errors"
	"fmt"
)

// EnableSubreaper marks the calling process a child subreaper on Linux; on
// other systems it returns an error wrapping [errors.ErrUnsupported].
func EnableSubreaper() error {
	return fmt.Errorf("runner: child subreaper: %w", errors.ErrUnsupported)
}

// MakeUndumpable hides the calling process's /proc files from its user's
// other processes on Linux; on other systems it returns an error wrapping
// [errors.ErrUnsupported].
func MakeUndumpable() error {
	return fmt.Errorf("runner: undumpable: %w", errors.ErrUnsupported)
}
