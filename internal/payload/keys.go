package payload

// Ring and KeyID: a server's payload keys, and how payloads and streams
// name the key that signed them.

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// keyIDLen is the length of a key id.
const keyIDLen = 8

// KeyID names a payload key without revealing it: the first 8 bytes of
// HKDF-Expand(SHA-256, the key's HKDF-Extract, "omnistage key id\x00").
// Every signed payload and stream carries the id of the key that signed
// it, so that the verifier picks that key from its Ring.
type KeyID [keyIDLen]byte

// String returns the id in hex, as messages and logs show it.
func (id KeyID) String() string { return hex.EncodeToString(id[:]) }

// Ring is the set of payload keys of a server: a Codec with a ring signs
// with its newest key and accepts payloads and streams signed with any of
// its keys. A Ring is immutable and safe for concurrent use; a server
// that reloads its keys makes a new Ring and hands it to its Codec
// (Codec.SetRing).
type Ring struct {
	keys []*macer // oldest first: the last one signs
}

// NewRing returns the ring of keys, oldest first: the last one is the
// newest and signs. A key given twice counts once, at its last place, so
// that the same file named twice does no harm. It refuses an empty list
// and an empty key. The keys are copied.
func NewRing(keys ...[]byte) (*Ring, error) {
	if len(keys) == 0 {
		return nil, errors.New("payload: a key ring needs at least one key")
	}
	r := &Ring{keys: make([]*macer, 0, len(keys))}
	for i, k := range keys {
		if len(k) == 0 {
			return nil, fmt.Errorf("payload: key %d of the ring is empty", i+1)
		}
		m := newMacer(k)
		for j, old := range r.keys {
			if old.id == m.id {
				r.keys = append(r.keys[:j], r.keys[j+1:]...)
				break
			}
		}
		r.keys = append(r.keys, m)
	}
	return r, nil
}

// Newest returns the id of the key that signs.
func (r *Ring) Newest() KeyID { return r.signer().id }

// ids returns the ids of the ring's keys, oldest first.
func (r *Ring) ids() []KeyID {
	ids := make([]KeyID, len(r.keys))
	for i, m := range r.keys {
		ids[i] = m.id
	}
	return ids
}

// String lists the ids of the ring's keys, oldest first, for logs.
func (r *Ring) String() string {
	var b strings.Builder
	for i, m := range r.keys {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(m.id.String())
	}
	return b.String()
}

func (r *Ring) signer() *macer { return r.keys[len(r.keys)-1] }

// key returns the key whose id is id, or nil.
func (r *Ring) key(id []byte) *macer {
	for _, m := range r.keys {
		if string(m.id[:]) == string(id) {
			return m
		}
	}
	return nil
}

// unknownKey is the error of a payload or stream (what) signed with a key
// that r does not hold.
func (r *Ring) unknownKey(what string, id []byte) *Error {
	return newError(CodeKeyUnknown, "%s is signed with payload key %x, which this server does not hold (its keys: %s); give every stage server the same payload key files (--payload-key-file) and reload them all (SIGHUP) when the files change", what, id, r)
}
