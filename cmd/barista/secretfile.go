package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// maxSecretFile bounds a secret file: a token or a key, and a newline.
const maxSecretFile = 4096

// readSecretFile reads a secret (a token, a key) from a regular file that
// no other user may read or write: mode 0600 or 0400, or with group also
// 0640 or 0440 (a Kubernetes Secret volume shares its files with the
// pod's fsGroup). The file holds the secret alone, on one line.
func readSecretFile(path string, group bool) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	closed, want := os.FileMode(0o077), "0600 or 0400"
	if group {
		closed, want = 0o037, "0600, 0400 or 0440"
	}
	if perm := st.Mode().Perm(); perm&closed != 0 {
		return "", fmt.Errorf("%s has mode %04o: other users may read it; want %s (chmod 600 %s)", path, perm, want, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxSecretFile {
		return "", fmt.Errorf("%s holds more than %d bytes: want the secret alone", path, maxSecretFile)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	if strings.ContainsAny(secret, " \t\r\n") {
		return "", fmt.Errorf("%s holds more than one line or word: want the secret alone", path)
	}
	return secret, nil
}
