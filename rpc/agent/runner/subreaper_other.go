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
