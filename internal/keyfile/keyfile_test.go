package keyfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, file, want, err string
	}{
		{"a key with its newline", write("good", "  0123456789abcdef0123\n"), "0123456789abcdef0123", ""},
		{"empty", write("empty", " \n"), "", "is empty"},
		{"short", write("short", "abc\n"), "", "the key is 3 bytes long; use at least 16"},
		{"missing", filepath.Join(dir, "none"), "", "no such file"},
		{"no file", "", "", "no key file"},
	} {
		got, err := Read(tc.file)
		if tc.err == "" && (err != nil || got != tc.want) {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %q, %v; want an error with %q", tc.name, got, err, tc.err)
		}
	}
}

func TestFromEnv(t *testing.T) {
	env := map[string]string{"GOOD": " 0123456789abcdef\n", "SHORT": "abc"}
	if got, err := FromEnv(func(k string) string { return env[k] }, "GOOD"); err != nil || got != "0123456789abcdef" {
		t.Errorf("GOOD: %q, %v", got, err)
	}
	if got, err := FromEnv(func(k string) string { return env[k] }, "UNSET"); err != nil || got != "" {
		t.Errorf("UNSET: %q, %v", got, err)
	}
	if _, err := FromEnv(func(k string) string { return env[k] }, "SHORT"); err == nil || !strings.Contains(err.Error(), "3 bytes long") {
		t.Errorf("SHORT: %v", err)
	}
}
