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

func TestCheckReload(t *testing.T) {
	full := Key{Value: "Dm9ZgZRv0qWVpoJBw7HbLqzwjIoNzU3ntk4KkR2UPO0=", Newline: true}
	for _, tc := range []struct {
		name    string
		k, prev Key
		err     string
	}{
		{"a new whole key", Key{Value: "rM0uQ8yB9hcK9xqC2vS4N3lpvWq8gq0o1R3dY8mJ7xU=", Newline: true}, full, ""},
		{"no line feed any more", Key{Value: full.Value}, full, "does not end with a line feed"},
		{"half of its base64", Key{Value: full.Value[:20], Newline: true}, full, "decode to 15 bytes, the one before to 32"},
		{"a pass phrase after base64", Key{Value: "a long pass phrase, 32 characters", Newline: true}, full, ""},
		{"hex, then short hex", Key{Value: "0123456789abcdef", Newline: true}, Key{Value: "0123456789abcdef0123456789abcdef", Newline: true}, "decode to 8 bytes, the one before to 16"},
		{"a key without a line feed before", Key{Value: full.Value}, Key{Value: full.Value}, ""},
	} {
		err := CheckReload(tc.k, tc.prev)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.err)
		}
	}
}

func TestReadRefusesWhatIsNotAKeyFile(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("k", MaxFileSize+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"/dev/urandom": "is not a regular file", dir: "is not a regular file", big: "bytes long"} {
		if _, err := Read(file); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", file, err, want)
		}
	}
}
