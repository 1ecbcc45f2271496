// Package keyfile reads the secrets a server is given in files or in its
// environment: /v1/run payload keys and API keys (bearer tokens). Every
// such secret is read one way, with the same rules.
package keyfile

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// PayloadKeyEnv is the environment variable that holds a server's /v1/run
// payload key when no key file is given (and in which a worker process
// gets the key its parent chose).
const PayloadKeyEnv = "OMNISTAGE_PAYLOAD_KEY"

// MinLen is the shortest key accepted: payload keys and bearer tokens
// shorter than this are guessable.
const MinLen = 16

// Read reads a key from file, dropping surrounding white space. A file
// that is empty, or holds a key shorter than MinLen, is refused with a
// message saying how to make a good one.
func Read(file string) (string, error) {
	if file == "" {
		return "", errors.New("no key file")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("%s is empty", file)
	}
	if len(key) < MinLen {
		return "", fmt.Errorf("%s: the key is %d bytes long; use at least %d (e.g. head -c 32 /dev/urandom | base64 > %s)", file, len(key), MinLen, file)
	}
	return key, nil
}

// FromEnv returns the key in variable name of getenv's environment, "" when
// it is unset or empty, and an error (which does not name the variable)
// when it is too short.
func FromEnv(getenv func(string) string, name string) (string, error) {
	key := strings.TrimSpace(getenv(name))
	if key == "" {
		return "", nil
	}
	if len(key) < MinLen {
		return "", fmt.Errorf("the key is %d bytes long; use at least %d (e.g. head -c 32 /dev/urandom | base64)", len(key), MinLen)
	}
	return key, nil
}
