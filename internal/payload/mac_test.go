package payload

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"testing"
)

// TestSealer checks the tags of a sealer against the construction of the
// package documentation, written out independently (referenceTag), for
// messages of several sizes and consecutive counters, and that a tag is
// refused under another counter, key, message or length.
func TestSealer(t *testing.T) {
	big := make([]byte, 300<<10+3)
	for i := range big {
		big[i] = byte(i * 7)
	}
	binding := append(append([]byte("OSTS\x02\x01"), stamp(testKey, testIssued)...), " sixteen byte nonce"...)
	key := referenceKey(testKey, "omnistage stream GMAC key\x00", binding)
	w := newMacer(testKey).sealer(streamKeyInfo, binding)
	r := newMacer(testKey).sealer(streamKeyInfo, binding)
	sizes := []int{0, 1, 15, 16, 17, 3200, 64 << 10, len(big)}
	for i, n := range sizes {
		got := w.seal([]byte("prefix"), big[:n])
		want := append([]byte("prefix"), referenceTag(key, uint64(i), big[:n])...)
		if !bytes.Equal(got, want) {
			t.Errorf("frame %d of %d bytes: tag %x, want %x", i, n, got, want)
		}
		if !r.check(want[len("prefix"):], big[:n]) {
			t.Errorf("frame %d of %d bytes: check refuses its tag", i, n)
		}
	}
	tag := referenceTag(key, uint64(len(sizes)), big[:100])
	for _, bad := range []struct {
		name string
		s    *sealer
		tag  []byte
		msg  []byte
	}{
		{"the next counter", newMacer(testKey).sealer(streamKeyInfo, binding), tag, big[:100]},
		{"another key", newMacer([]byte("another key, also long")).sealer(streamKeyInfo, binding), referenceTag(key, 0, big[:100]), big[:100]},
		{"another binding", newMacer(testKey).sealer(streamKeyInfo, big[:10]), referenceTag(key, 0, big[:100]), big[:100]},
		{"a payload's key", newMacer(testKey).sealer(payloadKeyInfo, binding), referenceTag(key, 0, big[:100]), big[:100]},
		{"an altered message", r, tag, big[1:101]},
		{"a short tag", newMacer(testKey).sealer(streamKeyInfo, binding), referenceTag(key, 0, big[:100])[:tagLen-1], big[:100]},
	} {
		if bad.s.check(bad.tag, bad.msg) {
			t.Errorf("check accepts a tag made under %s", bad.name)
		}
	}
}

// TestPayloadSeal checks a payload's seal against the package
// documentation: a fresh nonce each time, then the tag of header and body
// under the key derived from header and nonce.
func TestPayloadSeal(t *testing.T) {
	m := newMacer(testKey)
	msg := append(append([]byte("OSTG\x03\x01"), stamp(testKey, testIssued)...), "a body"...)
	a := m.sealPayload(bytes.Clone(msg), 0)
	b := m.sealPayload(bytes.Clone(msg), 0)
	sa, sb := a[len(msg):], b[len(msg):]
	if len(sa) != sealLen || bytes.Equal(sa[:nonceLen], sb[:nonceLen]) {
		t.Fatalf("two seals of one payload: %x and %x; want %d bytes each, fresh nonces", sa, sb, sealLen)
	}
	if want := referenceSeal(testKey, msg, sa[:nonceLen]); !bytes.Equal(sa, want) {
		t.Errorf("seal %x, want %x", sa, want)
	}
	if !m.checkPayload(msg, sa) || !m.checkPayload(msg, sb) {
		t.Error("checkPayload refuses a seal")
	}
	swapped := append(bytes.Clone(sa[:nonceLen]), sb[nonceLen:]...)
	if m.checkPayload(msg, swapped) {
		t.Error("checkPayload accepts a tag under another nonce")
	}
}

// referenceKey is the key of a payload or stream: HKDF-SHA256 of the
// configured key, no salt, info followed by binding, 32 bytes.
func referenceKey(key []byte, info string, binding []byte) []byte {
	k, err := hkdf.Key(sha256.New, key, nil, info+string(binding), 32)
	if err != nil {
		panic(err)
	}
	return k
}

// referenceTag is the tag of message n under key: GMAC, that is the tag of
// AES-256-GCM with no plaintext and msg as additional data, with the
// 12-byte big-endian counter n as nonce.
func referenceTag(key []byte, n uint64, msg []byte) []byte {
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	nonce := binary.BigEndian.AppendUint64(make([]byte, 4), n)
	return gcm.Seal(nil, nonce, nil, msg)
}

// referenceSeal is the seal of the payload msg (header and body) with
// nonce.
func referenceSeal(key, msg, nonce []byte) []byte {
	k := referenceKey(key, "omnistage payload GMAC key\x00", append(bytes.Clone(msg[:headerLen]), nonce...))
	return append(bytes.Clone(nonce), referenceTag(k, 0, msg)...)
}
