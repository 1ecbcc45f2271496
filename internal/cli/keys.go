package cli

// A server's payload keys: loading the key ring, reloading it on SIGHUP,
// and the refusal to serve unsigned payloads beyond loopback.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/omnistage/omnistage/internal/keyfile"
	"github.com/omnistage/omnistage/internal/payload"
)

// makeKeyHint says how to make a payload key and hand it to a server.
const makeKeyHint = `make a key and give the same one to every server of the deployment:
    head -c 32 /dev/urandom | base64 > payload.key
    omnistage serve --payload-key-file payload.key ...   (or put the key in $` + keyfile.PayloadKeyEnv + `)`

// loadRing returns the payload keys of a server: the key files, oldest
// first (the last one signs), or, with no file, the key in the payload
// key variable when getenv is set; nil when there is none.
func loadRing(files []string, getenv func(string) string) (*payload.Ring, error) {
	ring, _, err := readRing(files, getenv, nil)
	return ring, err
}

// readRing is loadRing, which also returns the keys of the files; with
// prev (what the files held before, for a reload), a file whose key looks
// caught while it was being written is refused (keyfile.CheckReload).
func readRing(files []string, getenv func(string) string, prev []keyfile.Key) (*payload.Ring, []keyfile.Key, error) {
	read, err := readKeyFiles(files, prev)
	if err != nil {
		return nil, nil, err
	}
	var keys [][]byte
	for _, key := range read {
		keys = append(keys, []byte(key.Value))
	}
	if len(files) == 0 && getenv != nil {
		key, err := keyfile.FromEnv(getenv, keyfile.PayloadKeyEnv)
		if err != nil || key == "" {
			return nil, nil, err
		}
		keys = append(keys, []byte(key))
	}
	ring, err := payload.NewRing(keys...)
	return ring, read, err
}

// readKeyFiles reads the key files; with prev, the keys they held at the
// last load, it refuses a key that looks caught while being written.
func readKeyFiles(files []string, prev []keyfile.Key) ([]keyfile.Key, error) {
	var read []keyfile.Key
	for i, f := range files {
		key, err := keyfile.ReadKey(f)
		if err == nil && i < len(prev) {
			if err = keyfile.CheckReload(key, prev[i]); err != nil {
				err = fmt.Errorf("%s: %w", f, err)
			}
		}
		if err != nil {
			return nil, err
		}
		read = append(read, key)
	}
	return read, nil
}

// keyReloader reads a server's payload key files again into its codec on
// every SIGHUP: all of them, or, when one of them cannot be read or is
// not a key, none (the codec keeps its keys and the error is logged).
type keyReloader struct {
	log   *slog.Logger
	files []string
	keys  []keyfile.Key // what the files held at the last load
	codec *payload.Codec
	hup   chan os.Signal
}

// newKeyReloader returns the reloader of files into codec. SIGHUP no longer
// ends the process from now on: it is held for Run.
func newKeyReloader(log *slog.Logger, files []string, codec *payload.Codec) *keyReloader {
	k := &keyReloader{log: log, files: files, codec: codec, hup: make(chan os.Signal, 1)}
	k.keys, _ = readKeyFiles(files, nil) // what the server loaded at start
	signal.Notify(k.hup, syscall.SIGHUP)
	return k
}

// Run reloads the keys on every SIGHUP until ctx ends, then stops
// listening for SIGHUP.
func (k *keyReloader) Run(ctx context.Context) {
	defer signal.Stop(k.hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.hup:
		}
		if len(k.files) == 0 {
			k.log.Info("SIGHUP: no payload key files to reload (--payload-key-file)")
			continue
		}
		ring, keys, err := readRing(k.files, nil, k.keys)
		if err != nil {
			k.log.Error("SIGHUP: payload keys not reloaded; the server keeps its keys", "err", err.Error())
			continue
		}
		k.keys = keys
		k.codec.SetRing(ring)
		k.log.Info("SIGHUP: payload keys reloaded", "keys", ring.String(), "signing_key", ring.Newest().String())
	}
}

// loopbackOnly reports whether a server listening on addr is reachable
// only from this machine: its host is a loopback address or localhost.
// An empty host (every address) or another name is not.
func loopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// unsignedRefusal is the message of a server that refuses to serve
// unsigned payloads beyond loopback.
func unsignedRefusal(addr string) string {
	return fmt.Sprintf(`omnistage serve: --addr %s reaches beyond this machine, and no payload key is set: anyone who reaches the server could forge the input of any stage through POST /v1/run. To sign payloads, %s
or, on a network you trust, pass --insecure to serve unsigned payloads anyway.
`, addr, makeKeyHint)
}
