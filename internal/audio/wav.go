package audio

// WAV files: the header, and a reader of the files this package writes.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/omnistage/omnistage/internal/engine"
)

// UnknownSize is the data length of a WAV header written before the length
// is known, for a stream: the RIFF and data chunk sizes are then both
// 0xFFFFFFFF, which sox, ffmpeg and browsers read as "until the end of the
// stream", as streaming TTS servers send it.
const UnknownSize uint32 = 0xFFFFFFFF

// WAVHeaderLen is the length of the header that WAVHeader returns.
const WAVHeaderLen = 44

// maxDataLen is the largest known data length a WAV header can state.
const maxDataLen = UnknownSize - 1 - (WAVHeaderLen - 8)

// WAVHeader returns the 44-byte header of a 16-bit mono PCM WAV file of
// dataLen bytes of samples at sampleRate Hz (positive). A dataLen of
// UnknownSize makes a header for a stream of unknown length.
//
// WAVHeader is written here rather than taken from github.com/go-audio/wav
// because that encoder needs an io.WriteSeeker to fill in the sizes at the
// end, which a chunked HTTP response is not.
func WAVHeader(sampleRate int, dataLen uint32) []byte {
	return AppendWAVHeader(make([]byte, 0, WAVHeaderLen), sampleRate, dataLen)
}

// AppendWAVHeader appends WAVHeader(sampleRate, dataLen) to dst.
func AppendWAVHeader(dst []byte, sampleRate int, dataLen uint32) []byte {
	riffLen := UnknownSize
	if dataLen <= maxDataLen {
		riffLen = dataLen + WAVHeaderLen - 8
	}
	le := binary.LittleEndian
	dst = append(dst, "RIFF"...)
	dst = le.AppendUint32(dst, riffLen)
	dst = append(dst, "WAVEfmt "...)
	dst = le.AppendUint32(dst, 16)                   // fmt chunk size
	dst = le.AppendUint16(dst, 1)                    // PCM
	dst = le.AppendUint16(dst, 1)                    // channels
	dst = le.AppendUint32(dst, uint32(sampleRate))   // samples per second
	dst = le.AppendUint32(dst, uint32(2*sampleRate)) // bytes per second
	dst = le.AppendUint16(dst, 2)                    // bytes per frame
	dst = le.AppendUint16(dst, 16)                   // bits per sample
	dst = append(dst, "data"...)
	return le.AppendUint32(dst, dataLen)
}

// WriteWAV writes a as a complete 16-bit mono PCM WAV file.
func WriteWAV(w io.Writer, a *engine.Audio) error {
	if err := checkWAV(a); err != nil {
		return err
	}
	const block = 8192 // samples written per Write
	buf := make([]byte, 0, WAVHeaderLen+2*min(block, len(a.Samples)))
	buf = AppendWAVHeader(buf, a.SampleRate, uint32(2*len(a.Samples)))
	s := a.Samples
	for {
		n := min(block, len(s))
		buf = AppendPCMBytes(buf, s[:n])
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("wav: %w", err)
		}
		s = s[n:]
		if len(s) == 0 {
			return nil
		}
		buf = buf[:0]
	}
}

// AppendWAV appends a to dst as a complete 16-bit mono PCM WAV file.
func AppendWAV(dst []byte, a *engine.Audio) ([]byte, error) {
	if err := checkWAV(a); err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, WAVHeaderLen+2*len(a.Samples))
	dst = AppendWAVHeader(dst, a.SampleRate, uint32(2*len(a.Samples)))
	return AppendPCMBytes(dst, a.Samples), nil
}

// checkWAV reports why a cannot be a WAV file, if it cannot.
func checkWAV(a *engine.Audio) error {
	if a == nil {
		return errors.New("wav: nil audio")
	}
	if a.SampleRate <= 0 {
		return fmt.Errorf("wav: sample rate %d Hz", a.SampleRate)
	}
	if uint64(len(a.Samples))*2 > uint64(maxDataLen) {
		return fmt.Errorf("wav: %d samples are too long for a WAV file", len(a.Samples))
	}
	return nil
}

// ReadWAV reads a 16-bit mono PCM WAV file, or a WAV stream whose data
// length is UnknownSize (read up to the end of r). Chunks other than "fmt "
// and "data" are skipped; the file must be PCM (plain or
// WAVE_FORMAT_EXTENSIBLE), mono, 16-bit. A size field makes ReadWAV
// allocate at most 2 MiB ahead of the bytes it announces, so a hostile header
// cannot make it allocate much more than it is sent; to bound what it is
// sent, wrap r in an io.LimitReader.
//
// The reader is not github.com/go-audio/wav's: that decoder returns no
// samples for a stream of unknown length, allocates whatever a LIST chunk's
// size field asks for (4 GiB for a 68-byte file), and needs an io.ReadSeeker.
// The tests check this reader against it on well-formed files.
func ReadWAV(r io.Reader) (*engine.Audio, error) {
	var riff [12]byte
	if _, err := io.ReadFull(r, riff[:]); err != nil {
		return nil, fmt.Errorf("wav: reading header: %w", err)
	}
	if string(riff[0:4]) != "RIFF" || string(riff[8:12]) != "WAVE" {
		return nil, errors.New("wav: not a RIFF WAVE file")
	}
	le := binary.LittleEndian
	rate := 0
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, errors.New("wav: no data chunk")
			}
			return nil, fmt.Errorf("wav: reading chunk header: %w", err)
		}
		id, size := string(hdr[:4]), le.Uint32(hdr[4:])
		switch id {
		case "fmt ":
			var err error
			if rate, err = readFmt(r, size); err != nil {
				return nil, err
			}
		case "data":
			if rate == 0 {
				return nil, errors.New("wav: data chunk before fmt chunk")
			}
			samples, err := readData(r, size)
			if err != nil {
				return nil, err
			}
			return &engine.Audio{SampleRate: rate, Samples: samples}, nil
		default:
			// Chunks are padded to an even length.
			skip := int64(size) + int64(size&1)
			if n, err := io.CopyN(io.Discard, r, skip); err != nil {
				return nil, fmt.Errorf("wav: %q chunk truncated at %d of %d bytes: %w", id, n, skip, err)
			}
		}
	}
}

// readFmt reads a fmt chunk of size bytes and returns the sample rate of a
// 16-bit mono PCM format.
func readFmt(r io.Reader, size uint32) (int, error) {
	const extensible = 0xFFFE
	if size < 16 || size > 64 {
		return 0, fmt.Errorf("wav: fmt chunk of %d bytes", size)
	}
	var buf [64]byte
	b := buf[:size+size&1]
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, fmt.Errorf("wav: reading fmt chunk: %w", err)
	}
	le := binary.LittleEndian
	format, channels := le.Uint16(b[0:]), le.Uint16(b[2:])
	rate, bits := le.Uint32(b[4:]), le.Uint16(b[14:])
	if format == extensible && size >= 40 {
		format = le.Uint16(b[24:]) // the sub-format GUID starts with the format code
	}
	switch {
	case format != 1:
		return 0, fmt.Errorf("wav: format %#x, want PCM", format)
	case channels != 1:
		return 0, fmt.Errorf("wav: %d channels, want mono", channels)
	case bits != 16:
		return 0, fmt.Errorf("wav: %d-bit samples, want 16-bit", bits)
	case rate == 0 || rate > MaxRate:
		return 0, fmt.Errorf("wav: sample rate %d Hz", rate)
	}
	return int(rate), nil
}

// readData reads a data chunk of size bytes, or to the end of r when size is
// UnknownSize.
func readData(r io.Reader, size uint32) ([]int16, error) {
	var samples []int16
	if size != UnknownSize {
		if size%2 == 1 {
			return nil, fmt.Errorf("wav: data chunk of odd length %d", size)
		}
		r = io.LimitReader(r, int64(size))
		samples = make([]int16, 0, min(size/2, 1<<20))
	}
	var buf [32 << 10]byte
	var got int64
	for {
		n, err := io.ReadFull(r, buf[:])
		got += int64(n)
		// A stream cut inside a sample loses that sample.
		samples, _ = AppendPCMSamples(samples, buf[:n&^1])
		switch {
		case err == nil:
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			if size != UnknownSize && got < int64(size) {
				return nil, fmt.Errorf("wav: data chunk truncated at %d of %d bytes", got, size)
			}
			return samples, nil
		default:
			return nil, fmt.Errorf("wav: reading data: %w", err)
		}
	}
}
