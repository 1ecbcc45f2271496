package encode

// ADTS AAC, encoded by an ffmpeg child process fed and read through pipes.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/omnistage/omnistage/internal/audio"
)

// aacRates are the sample rates of MPEG-4 audio that ffmpeg's AAC encoder
// takes.
var aacRates = []int{7350, 8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 64000, 88200, 96000}

const (
	// aacBlock is the most samples handed to ffmpeg in one pipe write.
	aacBlock = 8192
	// aacChunk is the size of the reads of ffmpeg's output, and aacChunks
	// how many read chunks wait for Write or Close to pass them on.
	aacChunk  = 16 << 10
	aacChunks = 8
	// aacStderr is how much of ffmpeg's error output an error quotes.
	aacStderr = 2 << 10
)

// aacEncoder encodes AAC-LC in ADTS frames with ffmpeg's native encoder,
// run as a subprocess: no AAC encoder library fits (Debian ships libfdk-aac
// in non-free, and binding libavcodec for one encoder would be a large cgo
// surface tied to ffmpeg's major versions).
//
// Two goroutines serve the pipes: one writes the input to ffmpeg's stdin,
// the other reads its output into a bounded channel, from which Write and
// Close, on the caller's goroutine, pass it to w. Feeding and draining
// happen together, so a Write of any size cannot deadlock on full pipes,
// and a slow w holds ffmpeg back.
type aacEncoder struct {
	w      io.Writer
	cmd    *exec.Cmd
	stderr *headBuffer
	feed   chan []byte // to the feeder; closing it closes ffmpeg's stdin
	fed    chan error  // the feeder's result for each feed
	out    chan []byte // from the reader; closed at the end of ffmpeg's output
	wg     sync.WaitGroup
	pcm    []byte
	err    error
	closed bool
}

var _ Encoder = (*aacEncoder)(nil)

func newAAC(w io.Writer, rate int, opts Options) (*aacEncoder, error) {
	path, err := exec.LookPath("ffmpeg")
	if err != nil {
		return nil, fmt.Errorf("encode: aac needs ffmpeg, which is not on PATH: %w", ErrUnavailable)
	}
	// Without the probe limits ffmpeg reads seconds of input before it
	// encodes any; -flush_packets passes each ADTS frame on at once.
	cmd := exec.Command(path, "-hide_banner", "-loglevel", "error", "-nostdin",
		"-probesize", "32", "-analyzeduration", "0",
		"-f", "s16le", "-ar", strconv.Itoa(rate), "-ac", "1", "-i", "pipe:0",
		"-c:a", "aac", "-b:a", strconv.Itoa(opts.Bitrate), "-ar", strconv.Itoa(nextRate(rate, aacRates)),
		"-f", "adts", "-flush_packets", "1", "pipe:1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("encode: aac: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		stdin.Close()
		return nil, fmt.Errorf("encode: aac: %w", err)
	}
	e := &aacEncoder{
		w:      w,
		cmd:    cmd,
		stderr: &headBuffer{max: aacStderr},
		feed:   make(chan []byte),
		fed:    make(chan error, 1),
		out:    make(chan []byte, aacChunks),
	}
	cmd.Stderr = e.stderr
	if err := cmd.Start(); err != nil {
		stdin.Close()
		stdout.Close()
		return nil, fmt.Errorf("encode: aac: starting ffmpeg: %w", err)
	}
	e.wg.Add(2)
	go e.feeder(stdin)
	go e.reader(stdout)
	return e, nil
}

// feeder writes each feed to ffmpeg's stdin and reports the result, then
// closes stdin when feed is closed.
func (e *aacEncoder) feeder(stdin io.WriteCloser) {
	defer e.wg.Done()
	for b := range e.feed {
		_, err := stdin.Write(b)
		e.fed <- err
	}
	stdin.Close()
}

// reader passes ffmpeg's output to out until it ends.
func (e *aacEncoder) reader(stdout io.Reader) {
	defer e.wg.Done()
	defer close(e.out)
	b := make([]byte, aacChunk)
	for {
		n, err := stdout.Read(b)
		if n > 0 {
			e.out <- bytes.Clone(b[:n])
		}
		if err != nil {
			return
		}
	}
}

func (e *aacEncoder) Write(samples []int16) error {
	if e.err != nil {
		return e.err
	}
	if e.closed {
		return errClosed
	}
	for len(samples) > 0 {
		n := min(aacBlock, len(samples))
		e.pcm = audio.AppendPCMBytes(e.pcm[:0], samples[:n])
		if err := e.send(e.pcm); err != nil {
			return err
		}
		samples = samples[n:]
	}
	// What ffmpeg has ready.
	for {
		select {
		case b, ok := <-e.out:
			if !ok {
				return e.died(errors.New("ffmpeg ended early"))
			}
			if err := e.pass(b); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// send hands b to the feeder and passes output on until ffmpeg has read b.
func (e *aacEncoder) send(b []byte) error {
	e.feed <- b
	out := e.out
	for {
		select {
		case err := <-e.fed:
			if err != nil {
				return e.died(fmt.Errorf("writing to ffmpeg: %w", err))
			}
			return nil
		case b, ok := <-out:
			if !ok {
				out = nil // ffmpeg exited; the feeder will fail
				continue
			}
			if err := e.pass(b); err != nil {
				return err
			}
		}
	}
}

// pass writes ffmpeg's output b to w; if that fails, it kills ffmpeg.
func (e *aacEncoder) pass(b []byte) error {
	if _, err := e.w.Write(b); err != nil {
		e.err = fmt.Errorf("encode: aac: %w", err)
		e.finish(true)
	}
	return e.err
}

// died records that ffmpeg stopped before the end of the input, with its
// exit status and error output if it has exited, or else err.
func (e *aacEncoder) died(err error) error {
	if exit := e.finish(false); exit != nil {
		err = exit
	}
	e.err = fmt.Errorf("encode: aac: %w", err)
	return e.err
}

// finish closes ffmpeg's stdin and waits for ffmpeg and both goroutines to
// end, passing the rest of ffmpeg's output to w, or with kill, killing
// ffmpeg first and dropping its output. It returns ffmpeg's exit error,
// quoting its error output, or the error of w.
func (e *aacEncoder) finish(kill bool) error {
	if e.cmd == nil {
		return nil
	}
	if kill {
		e.cmd.Process.Kill()
	}
	close(e.feed)
	var err error
	for b := range e.out {
		if kill {
			continue
		}
		if _, werr := e.w.Write(b); werr != nil {
			err = werr
			kill = true
			e.cmd.Process.Kill()
		}
	}
	e.wg.Wait()
	exit := e.cmd.Wait()
	e.cmd = nil
	switch {
	case err != nil || kill:
		return err
	case exit == nil:
		return nil
	}
	if msg := strings.TrimSpace(e.stderr.String()); msg != "" {
		return fmt.Errorf("ffmpeg: %w: %s", exit, msg)
	}
	return fmt.Errorf("ffmpeg: %w", exit)
}

func (e *aacEncoder) Close() error {
	if e.closed {
		return e.err
	}
	e.closed = true
	if e.err == nil {
		if err := e.finish(false); err != nil {
			e.err = fmt.Errorf("encode: aac: %w", err)
		}
	}
	return e.err
}

// headBuffer keeps the first max bytes written to it.
type headBuffer struct {
	max int
	buf bytes.Buffer
}

func (t *headBuffer) Write(p []byte) (int, error) {
	if room := t.max - t.buf.Len(); room > 0 {
		t.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (t *headBuffer) String() string { return t.buf.String() }
