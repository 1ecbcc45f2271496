package payload

// The MAC: the keys derived for each payload and each stream, and their
// GMAC tags.

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

const (
	// tagLen is the length of a GMAC tag: a payload's tag, and a signed
	// stream frame's.
	tagLen = 16
	// sealLen is what a signed payload carries after its body: its nonce,
	// then its tag.
	sealLen = nonceLen + tagLen
	// nonceLen is the length of the random nonce of a payload or a stream,
	// from which the key of its tags is derived.
	nonceLen = 16

	// The HKDF info strings of the keys of payloads and of streams: a
	// payload's key can never be a stream's.
	payloadKeyInfo = "omnistage payload GMAC key\x00"
	streamKeyInfo  = "omnistage stream GMAC key\x00"
	// keyIDInfo is the HKDF info string of a key's id.
	keyIDInfo = "omnistage key id\x00"
)

// macer holds one key of a Ring and derives from it the key of each
// payload and stream. It is safe for concurrent use.
type macer struct {
	prk []byte // HKDF-Extract(SHA-256, salt: none, the configured key)
	id  KeyID
}

func newMacer(key []byte) *macer {
	prk, err := hkdf.Extract(sha256.New, key, nil)
	if err != nil {
		panic(fmt.Sprintf("payload: HKDF refuses the key: %v", err)) // only in FIPS 140-only mode, for a short key
	}
	id, err := hkdf.Expand(sha256.New, prk, keyIDInfo, keyIDLen)
	if err != nil {
		panic(fmt.Sprintf("payload: HKDF-Expand: %v", err))
	}
	m := &macer{prk: prk}
	copy(m.id[:], id)
	return m
}

// sealer makes or checks the tags of one payload or one stream: GMAC
// (AES-256-GCM with no plaintext) under the key derived from the codec's
// key, info and binding (the payload's header and nonce, the stream's
// preamble), with the frame counter as the GCM nonce, so that no nonce
// is used twice under one key. It is not safe for concurrent use.
type sealer struct {
	gcm cipher.AEAD
	n   uint64 // the counter of the next tag
}

func (m *macer) sealer(info string, binding ...[]byte) *sealer {
	for _, b := range binding {
		info += string(b)
	}
	key, err := hkdf.Expand(sha256.New, m.prk, info, 32)
	if err != nil {
		panic(fmt.Sprintf("payload: HKDF-Expand: %v", err)) // only for a key length out of range
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(fmt.Sprintf("payload: AES: %v", err))
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		panic(fmt.Sprintf("payload: GCM: %v", err))
	}
	return &sealer{gcm: gcm}
}

// seal appends to dst the tag of the next frame, whose bytes are msg.
func (s *sealer) seal(dst, msg []byte) []byte {
	nonce := s.nonce()
	return s.gcm.Seal(dst, nonce[:], nil, msg)
}

// check reports whether tag is the tag of the next frame, whose bytes are
// msg; the comparison takes constant time. The counter moves on either
// way.
func (s *sealer) check(tag, msg []byte) bool {
	if len(tag) != tagLen {
		return false
	}
	nonce := s.nonce()
	_, err := s.gcm.Open(nil, nonce[:], tag, msg)
	return err == nil
}

// nonce returns the GCM nonce of the next frame and moves the counter on.
func (s *sealer) nonce() [12]byte {
	var nonce [12]byte
	binary.BigEndian.PutUint64(nonce[4:], s.n)
	s.n++
	return nonce
}

// sealPayload appends to b, whose bytes from start on are a payload's
// header and body, the payload's seal: a new random nonce, then the tag of
// header and body under the key derived from header and nonce.
func (m *macer) sealPayload(b []byte, start int) []byte {
	var nonce [nonceLen]byte
	rand.Read(nonce[:]) // never fails: it crashes the program instead
	s := m.sealer(payloadKeyInfo, b[start:start+headerLen], nonce[:])
	b = append(b, nonce[:]...)
	return s.seal(b, b[start:len(b)-nonceLen])
}

// checkPayload reports whether seal is the seal of msg, a payload's header
// and body.
func (m *macer) checkPayload(msg, seal []byte) bool {
	nonce, tag := seal[:nonceLen], seal[nonceLen:]
	return m.sealer(payloadKeyInfo, msg[:headerLen], nonce).check(tag, msg)
}
